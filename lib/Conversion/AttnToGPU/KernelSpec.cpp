//===- KernelSpec.cpp - Validation and launch contracts of kernels --------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Checks a DecodeKernelSpec before any IR is built and derives what launching
// the generated kernel requires. Builds no IR, so that the tool and the
// manifest writer can use it cheaply.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/KernelSpec.h"
#include "attn/Conversion/AttnToGPU/VariantParams.h"

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

llvm::StringRef attn::stringifyIndexing(KVIndexing indexing) {
  return indexing == KVIndexing::Ragged ? "ragged" : "paged";
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

int64_t DecodeKernelSpec::getGqaPack() const {
  if (gqaPack > 0)
    return gqaPack;
  int64_t pack = 1;
  while (groupSize() % (pack * 2) == 0 && pack * 2 <= kTileRows)
    pack *= 2;
  return pack;
}

std::string attn::getKVNameWord(KVIndexing indexing, int64_t pageSize) {
  return indexing == KVIndexing::Ragged ? std::string("ragged")
                                        : formatv("p{0}", pageSize).str();
}

std::string attn::getVariantNameSuffix(llvm::ArrayRef<std::string> variantNames,
                                       bool customMask) {
  std::string suffix;
  for (const std::string &variant : variantNames)
    suffix += "_" + variant;
  if (customMask)
    suffix += "_mask";
  return suffix;
}

std::string DecodeKernelSpec::getKernelName() const {
  if (!kernelName.empty())
    return kernelName;
  std::string kv = getKVNameWord(indexing, pageSize);
  std::string name =
      formatv("attn_decode_{0}_d{1}_h{2}x{3}_{4}_{5}_k{6}_w{7}_s{8}",
              stringifyDType(dtype), headDim, numQoHeads, numKVHeads, kv,
              stringifyLayout(layout).lower(), getGqaPack(), numWarps,
              numStages)
          .str();
  return name + getVariantNameSuffix(variantNames, customMask);
}

std::string MergeKernelSpec::getKernelName() const {
  if (!kernelName.empty())
    return kernelName;
  std::string name =
      formatv("attn_merge_{0}_d{1}", stringifyDType(dtype), headDim).str();
  if (rowsPerCta > 1)
    name += formatv("_r{0}", rowsPerCta).str();
  if (!outputTransform)
    return name;
  return name +
         formatv("_h{0}x{1}_{2}", numQoHeads, numKVHeads,
                 getKVNameWord(indexing, pageSize))
             .str() +
         getVariantNameSuffix(variantNames, /*customMask=*/false);
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
  int64_t pack = getGqaPack();
  if (pack < 1 || pack > kTileRows || groupSize() % pack != 0)
    return createStringError("gqa_pack (%lld) must divide the GQA group size "
                             "(%lld) and be at most %lld",
                             (long long)pack, (long long)groupSize(),
                             (long long)kTileRows);
  if (indexing == KVIndexing::Ragged && layout != KVLayout::NHD)
    return createStringError("ragged KV is supported in the NHD layout only");
  if (kvTile < 1 || costPerItem < 0 || costPerKVToken < 1)
    return createStringError("kv_tile and cost_per_kv_token must be >= 1, "
                             "cost_per_item >= 0");
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
  layout.mergeRows = DecodeKernelSpec::kTileRows;
  // Four floats of padding make the fragment stores bank-conflict free.
  layout.mergeRowStride = spec.headDim + 4;
  layout.mergeBytes =
      spec.numWarps * layout.mergeRows * layout.mergeRowStride * 4;
  layout.statsOffset = std::max(layout.kvBytes, layout.mergeBytes);
  layout.totalBytes = layout.statsOffset + spec.numWarps * 2 * 16 * 4;
  return layout;
}

bool attn::chipSupportsPDL(llvm::StringRef chip) {
  return getSMNumber(chip) >= 90;
}

bool MergeKernelSpec::usesPDL() const { return chipSupportsPDL(chip); }

llvm::Error MergeKernelSpec::validate() const {
  if (headDim != 64 && headDim != 128 && headDim != 256)
    return createStringError("head_dim must be 64, 128 or 256, got %lld",
                             (long long)headDim);
  if (numWarps < 1 || numWarps > 32)
    return createStringError("num_warps must be in [1, 32], got %lld",
                             (long long)numWarps);
  // A CTA's threads form parts of head_dim / 8 threads.
  if ((numWarps * 32) % (headDim / 8) != 0)
    return createStringError("num_warps * 32 must be a multiple of "
                             "head_dim / 8");
  if (rowsPerCta != 1 && rowsPerCta != getPartsPerCta())
    return createStringError(
        "rows_per_cta must be 1 (parts share a row) or %lld (a row per "
        "part), got %lld",
        (long long)getPartsPerCta(), (long long)rowsPerCta);
  if (outputTransform) {
    if (numQoHeads <= 0 || numKVHeads <= 0 || numQoHeads % numKVHeads)
      return createStringError("a merge kernel with an output transform "
                               "needs the head counts");
    bool pow2 = pageSize > 0 && (pageSize & (pageSize - 1)) == 0;
    if (indexing == KVIndexing::Paged && !pow2)
      return createStringError("page_size must be a power of two, got %lld",
                               (long long)pageSize);
  }
  if (getSMNumber(chip) < 80)
    return createStringError("the merge kernel needs sm_80 or newer, got %s",
                             chip.c_str());
  return llvm::Error::success();
}

KernelLaunchInfo
attn::getDecodeLaunchInfo(const DecodeKernelSpec &spec,
                          llvm::ArrayRef<std::pair<std::string, std::string>>
                              params) {
  KernelLaunchInfo info;
  info.kernelName = spec.getKernelName();
  info.blockDimX = spec.numWarps * 32;
  info.gridX = "num_ctas";
  info.gridY = "1";
  info.dynamicSharedMemBytes = getDecodeSmemLayout(spec).totalBytes;
  std::string dt = stringifyDType(spec.dtype).str();
  bool ragged = spec.indexing == KVIndexing::Ragged;
  std::string cache =
      ragged ? "[tokens, num_kv_heads, head_dim]"
      : spec.layout == KVLayout::NHD
          ? "[num_pages, page_size, num_kv_heads, head_dim]"
          : "[num_pages, num_kv_heads, page_size, head_dim]";
  info.args = {
      {"cta_indptr", "ptr", "i32", "[max_ctas + 1]"},
      {"work_items", "ptr", "i32", "[max_items, 8]"},
      {"partial_o", "ptr", "f32", "[max_slots, slot_rows, head_dim]"},
      {"partial_lse", "ptr", "f32", "[max_slots, slot_rows]"},
      {"slot_rows", "i32", "", ""},
      {"q", "ptr", dt, "[total_q_rows, num_qo_heads, head_dim]"},
      {"k_cache", "ptr", dt, cache},
      {"v_cache", "ptr", dt, cache},
      {"o", "ptr", dt, "[total_q_rows, num_qo_heads, head_dim]"},
      {"lse", "ptr", "f32", "[total_q_rows, num_qo_heads]"},
      {"qo_indptr", "ptr", "i32", "[batch + 1]"},
      {"kv_indptr", "ptr", "i32", "[batch + 1]"},
  };
  if (!ragged) {
    info.args.push_back({"kv_indices", "ptr", "i32", "[kv_indptr[batch]]"});
    info.args.push_back({"kv_last_len", "ptr", "i32", "[batch]"});
  }
  if (spec.customMask)
    appendCustomMaskArgs(info.args);
  info.args.push_back({"sm_scale", "f32", "", ""});
  for (const auto &[name, kind] : params)
    info.args.push_back(getVariantParamKernelArg(name, kind));
  return info;
}

void attn::appendCustomMaskArgs(llvm::SmallVectorImpl<KernelArg> &args) {
  args.push_back({"custom_mask", "ptr", "u8",
                  "[mask_indptr[batch] bytes, bit-packed little-endian]"});
  args.push_back({"mask_indptr", "ptr", "i32", "[batch + 1]"});
}

KernelLaunchInfo attn::getMergeLaunchInfo(const MergeKernelSpec &spec) {
  KernelLaunchInfo info;
  info.kernelName = spec.getKernelName();
  info.blockDimX = spec.numWarps * 32;
  // One CTA per (merge unit, rows_per_cta rows), grid-strided (manifest
  // merge_ctas, merge_rows_per_cta).
  info.gridX = spec.rowsPerCta == 1
                   ? "merge_units * slot_rows"
                   : formatv("merge_units * ceil(slot_rows / {0})",
                             spec.rowsPerCta)
                         .str();
  info.gridY = "1";
  info.dynamicSharedMemBytes = 0;
  std::string dt = stringifyDType(spec.dtype).str();
  info.args = {
      {"plan", "ptr", "i32", "[plan words]"},
      {"merge_indptr", "ptr", "i32", "[max_merge_units + 1]"},
      {"merge_units", "ptr", "i32", "[max_merge_units, 4]"},
      {"partial_o", "ptr", "f32", "[max_slots, slot_rows, head_dim]"},
      {"partial_lse", "ptr", "f32", "[max_slots, slot_rows]"},
      {"slot_rows", "i32", "", ""},
      {"o", "ptr", dt, "[total_q_rows, num_qo_heads, head_dim]"},
      {"lse", "ptr", "f32", "[total_q_rows, num_qo_heads]"},
      {"qo_indptr", "ptr", "i32", "[batch + 1]"},
  };
  if (spec.outputTransform) {
    // The output transform sees the query's position, from the KV length.
    info.args.push_back({"kv_indptr", "ptr", "i32", "[batch + 1]"});
    if (spec.indexing == KVIndexing::Paged)
      info.args.push_back({"kv_last_len", "ptr", "i32", "[batch]"});
    for (const auto &[name, kind] : spec.params)
      info.args.push_back(getVariantParamKernelArg(name, kind));
  }
  return info;
}
