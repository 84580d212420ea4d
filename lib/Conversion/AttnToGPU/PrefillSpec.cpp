//===- PrefillSpec.cpp - Validation and launch contract of prefill --------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Checks a PrefillKernelSpec before any IR is built and derives its shared
// memory plan and launch contract (docs/Manifest.md). Free of MLIR.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/PrefillKernel.h"
#include "attn/Conversion/AttnToGPU/VariantParams.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace ::attn;
using llvm::createStringError;
using llvm::formatv;

/// Dynamic shared memory an sm_80+ CTA may use (sm_80: 163 KiB; sm_90: 227).
static int64_t maxSharedBytes(llvm::StringRef chip) {
  unsigned sm = 0;
  chip.drop_front(3).take_while(llvm::isDigit).getAsInteger(10, sm);
  if (sm == 86 || sm == 89 || sm == 120)
    return 99 * 1024;
  return sm >= 90 ? 227 * 1024 : 163 * 1024;
}

std::string PrefillKernelSpec::getKernelName() const {
  if (!kernelName.empty())
    return kernelName;
  std::string kv = getKVNameWord(indexing, pageSize);
  std::string name =
      formatv("attn_prefill_{0}_d{1}_h{2}x{3}_{4}_{5}_q{6}_kv{7}_s{8}_k{9}",
              stringifyDType(dtype), headDim, numQoHeads, numKVHeads, kv,
              stringifyLayout(layout).lower(), tileQ, tileKV, numStages,
              gqaPack)
          .str();
  return name + getVariantNameSuffix(variantNames, customMask);
}

llvm::Error PrefillKernelSpec::validate() const {
  auto fail = [](const llvm::Twine &msg) {
    return createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  if (headDim != 64 && headDim != 128 && headDim != 256)
    return fail(formatv("head_dim must be 64, 128 or 256, got {0}", headDim));
  if (numQoHeads <= 0 || numKVHeads <= 0)
    return fail("num_qo_heads and num_kv_heads must be positive");
  if (numQoHeads % numKVHeads)
    return fail(formatv("num_qo_heads ({0}) must be a multiple of "
                        "num_kv_heads ({1})",
                        numQoHeads, numKVHeads));
  if (gqaPack <= 0 || groupSize() % gqaPack)
    return fail(formatv("gqa_pack ({0}) must divide the group size ({1})",
                        gqaPack, groupSize()));
  if (tileQ != 64 && tileQ != 128)
    return fail(formatv("tile q must be 64 or 128, got {0}", tileQ));
  if (numWarps != 0 && numWarps != tileQ / 16)
    return fail(formatv("warps must be tile q / 16 = {0}, got {1}", tileQ / 16,
                        numWarps));
  if (tileKV < 16 || tileKV > 128 || tileKV % 16)
    return fail(formatv("tile kv must be a multiple of 16 in 16..128, got {0}",
                        tileKV));
  if (numStages < 2 || numStages > 4)
    return fail(formatv("stages must be 2..4, got {0}", numStages));
  if (indexing == KVIndexing::Paged && pageSize <= 0)
    return fail(formatv("page size must be positive, got {0}", pageSize));
  if (indexing == KVIndexing::Ragged && layout != KVLayout::NHD)
    return fail("ragged KV is [tokens, num_kv_heads, head_dim]: layout NHD");
  // Copies are spread evenly: every thread moves the same number of chunks.
  int64_t threads = getThreads();
  if ((tileKV * headDim / 8) % threads || (tileQ * headDim / 8) % threads)
    return fail(formatv("tile kv {0} x head_dim {1} does not split into "
                        "16-byte copies over {2} threads",
                        tileKV, headDim, threads));
  unsigned sm = 0;
  if (!llvm::StringRef(chip).starts_with("sm_") ||
      llvm::StringRef(chip).drop_front(3).take_while(llvm::isDigit)
          .getAsInteger(10, sm) ||
      sm < 80)
    return fail(formatv("chip must be sm_80 or newer, got '{0}'", chip));
  int64_t smem = getPrefillSmemLayout(*this).totalBytes;
  if (smem > maxSharedBytes(chip))
    return fail(formatv("shared memory {0} bytes exceeds {1} on {2}: fewer "
                        "stages or a smaller kv tile",
                        smem, maxSharedBytes(chip), chip));
  for (const PrefillVariantParam &p : variantParams)
    if (!isVariantParamKind(p.kind))
      return fail(formatv("variant parameter '{0}' has kind '{1}' (i32, f32 "
                          "or ptr expected)",
                          p.name, p.kind));
  return llvm::Error::success();
}

PrefillSmemLayout attn::getPrefillSmemLayout(const PrefillKernelSpec &spec) {
  PrefillSmemLayout l;
  const int64_t rowBytes = spec.headDim * 2;
  const int64_t ringRows = spec.numStages * spec.tileKV;
  l.qOffset = 0;
  l.kOffset = spec.tileQ * rowBytes;
  l.vOffset = l.kOffset + ringRows * rowBytes;
  l.totalRows = spec.tileQ + 2 * ringRows;
  l.totalBytes = l.totalRows * rowBytes;
  return l;
}

KernelLaunchInfo attn::getPrefillLaunchInfo(const PrefillKernelSpec &spec) {
  KernelLaunchInfo info;
  info.kernelName = spec.getKernelName();
  info.blockDimX = spec.getThreads();
  info.gridX = "num_ctas";
  info.gridY = "1";
  info.dynamicSharedMemBytes = getPrefillSmemLayout(spec).totalBytes;
  std::string elt = stringifyDType(spec.dtype).str();
  auto ptr = [&](const char *name, const std::string &type,
                 const char *shape) {
    info.args.push_back({name, "ptr", type, shape});
  };
  ptr("plan", "i32", "[plan words]");
  ptr("cta_indptr", "i32", "[max_ctas + 1]");
  ptr("work_items", "i32", "[max_items, 8]");
  ptr("partial_o", "f32", "[max_slots, slot_rows, head_dim]");
  ptr("partial_lse", "f32", "[max_slots, slot_rows]");
  info.args.push_back({"slot_rows", "i32", "", ""});
  ptr("q", elt, "[total_q_rows, num_qo_heads, head_dim]");
  const char *kvShape =
      spec.indexing == KVIndexing::Ragged
          ? "[kv_tokens, num_kv_heads, head_dim]"
          : (spec.layout == KVLayout::NHD
                 ? "[pages, page_size, num_kv_heads, head_dim]"
                 : "[pages, num_kv_heads, page_size, head_dim]");
  ptr("k_cache", elt, kvShape);
  ptr("v_cache", elt, kvShape);
  ptr("o", elt, "[total_q_rows, num_qo_heads, head_dim]");
  ptr("lse", "f32", "[total_q_rows, num_qo_heads]");
  ptr("qo_indptr", "i32", "[batch + 1]");
  ptr("kv_indptr", "i32", "[batch + 1]");
  if (spec.indexing == KVIndexing::Paged) {
    ptr("kv_indices", "i32", "[kv_indptr[batch]]");
    ptr("kv_last_len", "i32", "[batch]");
  }
  if (spec.customMask)
    appendCustomMaskArgs(info.args);
  info.args.push_back({"sm_scale", "f32", "", ""});
  for (const PrefillVariantParam &p : spec.variantParams)
    info.args.push_back(getVariantParamKernelArg(p.name, p.kind));
  return info;
}
