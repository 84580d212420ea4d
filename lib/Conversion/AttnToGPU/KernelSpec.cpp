//===- KernelSpec.cpp - Validation and launch contracts of kernels --------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Checks a DecodeKernelSpec before any IR is built and derives what launching
// the generated kernel requires. Kept free of MLIR so that the tool and the
// manifest writer can use it cheaply.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/KernelSpec.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace attn;
using llvm::createStringError;
using llvm::formatv;

llvm::StringRef attn::stringifyDType(KernelDType dtype) {
  return dtype == KernelDType::BF16 ? "bf16" : "f16";
}

llvm::StringRef attn::stringifyLayout(KVLayout layout) {
  return layout == KVLayout::NHD ? "NHD" : "HND";
}

llvm::Expected<KernelDType> attn::parseDType(llvm::StringRef text) {
  if (text.equals_insensitive("bf16"))
    return KernelDType::BF16;
  if (text.equals_insensitive("f16") || text.equals_insensitive("fp16"))
    return KernelDType::F16;
  return createStringError("unknown dtype '%s' (expected bf16 or f16)",
                           text.str().c_str());
}

llvm::Expected<KVLayout> attn::parseLayout(llvm::StringRef text) {
  if (text.equals_insensitive("nhd"))
    return KVLayout::NHD;
  if (text.equals_insensitive("hnd"))
    return KVLayout::HND;
  return createStringError("unknown KV layout '%s' (expected NHD or HND)",
                           text.str().c_str());
}

std::string DecodeKernelSpec::getKernelName() const {
  if (!kernelName.empty())
    return kernelName;
  return formatv("attn_decode_{0}_d{1}_g{2}_p{3}_{4}_w{5}_s{6}",
                 stringifyDType(dtype), headDim, groupSize(), pageSize,
                 stringifyLayout(layout).lower(), numWarps, numStages)
      .str();
}

/// Parses the number of "sm_NN[a]"; returns 0 when malformed.
static int64_t getSMNumber(llvm::StringRef chip) {
  if (!chip.consume_front("sm_"))
    return 0;
  chip.consume_back("a");
  chip.consume_back("f");
  int64_t sm = 0;
  if (chip.getAsInteger(10, sm))
    return 0;
  return sm;
}

llvm::Error DecodeKernelSpec::validate() const {
  if (headDim != 64 && headDim != 128 && headDim != 256)
    return createStringError("head_dim must be 64, 128 or 256, got %lld",
                             (long long)headDim);
  if (numQoHeads <= 0 || numKVHeads <= 0)
    return createStringError("head counts must be positive");
  if (numQoHeads % numKVHeads != 0)
    return createStringError(
        "num_qo_heads (%lld) must be a multiple of num_kv_heads (%lld)",
        (long long)numQoHeads, (long long)numKVHeads);
  if (groupSize() > 16)
    return createStringError("GQA group size %lld is above 16, the rows of "
                             "one tensor-core tile",
                             (long long)groupSize());
  bool pow2 = pageSize > 0 && (pageSize & (pageSize - 1)) == 0;
  if (!pow2 || pageSize > 1024)
    return createStringError("page_size must be a power of two in [1, 1024], "
                             "got %lld",
                             (long long)pageSize);
  if (numWarps < 1 || numWarps > 16)
    return createStringError("num_warps must be in [1, 16], got %lld",
                             (long long)numWarps);
  if (numStages < 1 || numStages > 4)
    return createStringError("num_stages must be in [1, 4], got %lld",
                             (long long)numStages);
  if (minCTAsPerSM < 0 || minCTAsPerSM > 32)
    return createStringError("min_ctas_per_sm must be in [0, 32]");
  int64_t sm = getSMNumber(chip);
  if (sm == 0)
    return createStringError("malformed chip '%s' (expected sm_NN)",
                             chip.c_str());
  if (sm < 80)
    return createStringError("the decode kernel needs sm_80 or newer "
                             "(bf16 mma.sync, cp.async), got %s",
                             chip.c_str());
  if (getDecodeSmemLayout(*this).totalBytes > 227 * 1024)
    return createStringError("shared memory (%lld bytes) is above 227 KiB; "
                             "use fewer warps or stages",
                             (long long)getDecodeSmemLayout(*this).totalBytes);
  return llvm::Error::success();
}

DecodeSmemLayout attn::getDecodeSmemLayout(const DecodeKernelSpec &spec) {
  DecodeSmemLayout layout;
  const int64_t eltBytes = 2;
  layout.kvBytes = spec.numWarps * spec.numStages * 2 *
                   DecodeKernelSpec::kTileTokens * spec.headDim * eltBytes;
  layout.mergeRows = spec.groupSize() <= 8 ? 8 : 16;
  // Four floats of padding make the fragment stores bank-conflict free.
  layout.mergeRowStride = spec.headDim + 4;
  layout.mergeBytes =
      spec.numWarps * layout.mergeRows * layout.mergeRowStride * 4;
  layout.statsOffset = std::max(layout.kvBytes, layout.mergeBytes);
  layout.totalBytes = layout.statsOffset + spec.numWarps * 2 * 16 * 4;
  return layout;
}

KernelLaunchInfo attn::getDecodeLaunchInfo(const DecodeKernelSpec &spec) {
  KernelLaunchInfo info;
  info.kernelName = spec.getKernelName();
  info.blockDimX = spec.numWarps * 32;
  info.gridX = "num_kv_heads";
  info.gridY = "batch";
  info.dynamicSharedMemBytes = getDecodeSmemLayout(spec).totalBytes;
  std::string dt = stringifyDType(spec.dtype).str();
  std::string cache = spec.layout == KVLayout::NHD
                          ? "[num_pages, page_size, num_kv_heads, head_dim]"
                          : "[num_pages, num_kv_heads, page_size, head_dim]";
  info.args = {
      {"q", "ptr", dt, "[batch, num_qo_heads, head_dim]"},
      {"k_cache", "ptr", dt, cache},
      {"v_cache", "ptr", dt, cache},
      {"kv_indptr", "ptr", "i32", "[batch + 1]"},
      {"kv_indices", "ptr", "i32", "[kv_indptr[batch]]"},
      {"kv_last_page_len", "ptr", "i32", "[batch]"},
      {"out", "ptr", dt, "[batch, num_qo_heads, head_dim]"},
      {"lse", "ptr", "f32", "[batch, num_qo_heads]"},
      {"sm_scale", "f32", "", ""},
  };
  return info;
}
