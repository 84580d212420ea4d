//===- KernelSpec.h - Plain descriptions of generated kernels ---*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The kernel generator's input: a plain C++ struct per kernel family, with no
// MLIR types, so the tool, tests and (later) the attn dialect lowering can all
// fill one in. `validate` rejects a spec before any IR is built, and
// `getLaunchInfo` states the launch contract the runtime must honour (grid,
// block, dynamic shared memory, argument order), which the manifest records.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOGPU_KERNELSPEC_H
#define ATTN_CONVERSION_ATTNTOGPU_KERNELSPEC_H

#include "attn/Runtime/Plan.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace attn {

/// Element type of queries, keys, values and output.
enum class KernelDType { BF16, F16 };

/// The KV page layout (NHD: [num_pages][page_size][num_kv_heads][head_dim],
/// HND: [num_pages][num_kv_heads][page_size][head_dim]) and how the kernels
/// find a request's keys (the `#attn.bsr` indexing: paged or ragged) are the
/// runtime's ABI enums, so a spec and the plan it runs under share one type.
using ::attn::runtime::KVIndexing;
using ::attn::runtime::KVLayout;

llvm::StringRef stringifyDType(KernelDType dtype);
llvm::StringRef stringifyLayout(KVLayout layout);
/// "paged" or "ragged", as the manifest's format spells it.
llvm::StringRef stringifyIndexing(KVIndexing indexing);
/// Parses "bf16"/"f16" and "NHD"/"HND" (case-insensitive).
llvm::Expected<KernelDType> parseDType(llvm::StringRef text);
llvm::Expected<KVLayout> parseLayout(llvm::StringRef text);

/// The pieces every generated kernel's name shares: the KV addressing word
/// (`p<page size>` or `ragged`) and the suffix naming the variants and a
/// custom mask. Names encode every field of a spec, so identical attentions
/// share one kernel.
std::string getKVNameWord(KVIndexing indexing, int64_t pageSize);
std::string getVariantNameSuffix(llvm::ArrayRef<std::string> variantNames,
                                 bool customMask);

/// A persistent split-KV decode attention kernel on the planner's work list
/// (attn/Runtime/Plan.h): grid = plan.num_ctas, each CTA walks its work items;
/// an item is up to 16 packed rows (token * gqaPack + head % gqaPack) of one
/// (request, head group) against one KV range of the request.
///
/// The KV cache is a block-sparse-row matrix with block_cols = pageSize: the
/// pages of request b are kv_indices[kv_indptr[b] .. kv_indptr[b+1]), and the
/// last one holds kv_last_len[b] tokens (1..pageSize). Ragged KV (NHD only)
/// is token rows kv_indptr[b] .. kv_indptr[b+1] of [tokens, Hkv, D].
struct DecodeKernelSpec {
  int64_t headDim = 128;
  int64_t numQoHeads = 32;
  int64_t numKVHeads = 8;
  int64_t pageSize = 16;
  KernelDType dtype = KernelDType::BF16;
  KVLayout layout = KVLayout::NHD;
  KVIndexing indexing = KVIndexing::Paged;
  /// Query heads packed as rows per KV head (P, divides the group size);
  /// 0 packs the whole group when it fits the 16 rows of a tile.
  int64_t gqaPack = 0;
  /// Keys per planner granule (manifest `tile.kv`): KV chunks split on
  /// multiples of it. The kernel itself steps 16 keys per warp.
  int64_t kvTile = 64;
  /// Planner cost model (manifest `cost`): an item over n keys costs
  /// costPerItem + n * costPerKVToken.
  int64_t costPerItem = 128;
  int64_t costPerKVToken = 1;
  /// Target SM ("sm_80", "sm_90", "sm_90a", ...); the kernel needs sm_80+
  /// (bf16 mma.sync, cp.async). Tile choices may depend on it later.
  std::string chip = "sm_90";

  /// Warps per CTA (3 measured best for D1 on the H200: 4 CTAs/SM fit in
  /// shared memory with 2 stages); each warp walks its own share of the
  /// item's KV tiles with its own online softmax, and the warps merge once
  /// at the end of the item.
  int64_t numWarps = 3;
  /// cp.async pipeline depth per warp (tiles of 16 tokens in shared memory).
  int64_t numStages = 2;
  /// Occupancy hint: the minimum number of CTAs per SM the register
  /// allocator must allow (`.minnctapersm`); 0 leaves it to ptxas.
  int64_t minCTAsPerSM = 4;

  /// Names of the variants whose hooks the kernel inlines, in application
  /// order (part of the kernel's identity; the hooks themselves are passed
  /// to buildDecodeKernel as attn.variant ops).
  llvm::SmallVector<std::string> variantNames;

  /// A custom mask (DESIGN.md §3b): the kernel takes `custom_mask` (uint8,
  /// bit-packed little-endian) and `mask_indptr` (int32 [batch + 1], the byte
  /// where request b's mask starts); key j of query row i of request b is
  /// visible iff bit mask_indptr[b] * 8 + i * kv_len + j is set, ANDed with
  /// the variants' masks. It replaces causal masking.
  bool customMask = false;

  /// Symbol of the gpu.func; empty derives one from the parameters.
  std::string kernelName;

  /// Tokens per tensor-core tile: the unit a warp loads and computes.
  static constexpr int64_t kTileTokens = 16;
  /// Packed query rows per work item (the planner's q_rows).
  static constexpr int64_t kTileRows = 16;

  /// Number of query heads per KV head.
  int64_t groupSize() const { return numQoHeads / numKVHeads; }
  /// gqaPack, or the default (the whole group, if it fits 16 rows).
  int64_t getGqaPack() const;
  /// The kernel's name (kernelName, or a derived one such as
  /// `attn_decode_bf16_d128_g4_p16_nhd_w3_s2`).
  std::string getKernelName() const;
  /// Checks every field; the message names the offending one.
  llvm::Error validate() const;
};

/// The LSE merge kernel of split KV (manifest role "merge"): one CTA per
/// (merge unit, row) pair, grid-strided over `plan[4] * slot_rows` such
/// pairs (manifest `merge_ctas: "unit_rows"`), it combines partial outputs
/// (f32) and LSEs into o/lse of `dtype`. Head counts and gqa_pack are read
/// from the plan header, so without an output transform one kernel serves
/// every head configuration of its head_dim.
///
/// Partial slots hold untransformed outputs; when the attention's variants
/// have an output_transform hook, the merge applies it once to the merged
/// row (`outputTransform`), which makes the kernel specific to the variants,
/// their parameters (trailing arguments, named as in the attention kernel),
/// the head configuration and the KV indexing (the hook sees the query's
/// position p = kv_len - qo_len + token, so the kernel reads the page table's
/// kv_indptr and kv_last_len).
struct MergeKernelSpec {
  int64_t headDim = 128;
  KernelDType dtype = KernelDType::BF16;
  int64_t numWarps = 8;
  std::string chip = "sm_90";
  std::string kernelName;

  /// Apply the variants' output transform to the merged rows. The fields
  /// below matter only then (and are part of the name).
  bool outputTransform = false;
  llvm::SmallVector<std::string> variantNames;
  /// The variants' runtime parameters as kernel arguments: (name, kind).
  llvm::SmallVector<std::pair<std::string, std::string>> params;
  int64_t numQoHeads = 0, numKVHeads = 0;
  KVIndexing indexing = KVIndexing::Paged;
  int64_t pageSize = 16;

  /// Rows of a unit one CTA merges at a time. 1: the CTA's parts (groups of
  /// head_dim / 8 threads) split one row's slots, for long splits (decode:
  /// one request over the whole GPU, tens of slots per row). The part count
  /// (num_warps * 32 / (head_dim / 8)): each part merges its own row alone,
  /// for short splits of tall units (prefill: 64-128 rows, 2-3 slots each).
  int64_t rowsPerCta = 1;
  /// The rows-per-part setting: numWarps * 32 / (headDim / 8).
  int64_t getPartsPerCta() const { return numWarps * 32 / (headDim / 8); }

  /// Slots each thread loads per step of its pass (all in flight at once).
  static constexpr int64_t kUnroll = 8;

  /// Programmatic dependent launch (sm_90+): the kernel waits with
  /// `griddepcontrol.wait` before reading the plan and the partials, so the
  /// runtime may launch it while the attention grid drains (manifest `pdl`).
  bool usesPDL() const;
  /// `attn_merge_bf16_d128` unless kernelName is set (`..._r16` with 16 rows
  /// per CTA); with an output transform `..._h32x8_p16_<variants>` follows.
  std::string getKernelName() const;
  llvm::Error validate() const;
};

/// Whether kernels for `chip` may use griddepcontrol (sm_90 or newer).
bool chipSupportsPDL(llvm::StringRef chip);

/// One kernel argument, as the launcher passes it.
struct KernelArg {
  /// Name used in docs and the manifest (`q`, `k_cache`, ...).
  std::string name;
  /// "ptr" (a device pointer, passed as u64) or a scalar type ("f32", "i32").
  std::string kind;
  /// Element type behind a pointer ("bf16", "i32", "f32", "u8"); empty for
  /// scalars.
  std::string elementType;
  /// Shape in words, for the manifest (e.g. "[batch, num_qo_heads, head_dim]").
  std::string shape;
};

/// What launching the kernel requires.
struct KernelLaunchInfo {
  std::string kernelName;
  /// Threads per CTA (x only).
  int64_t blockDimX = 0;
  /// Grid as a function of the plan: "num_ctas" (attention) or
  /// "merge_ctas" (merge), and "1".
  std::string gridX, gridY;
  /// Dynamic shared memory in bytes (set cuFuncSetAttribute's
  /// MAX_DYNAMIC_SHARED_SIZE_BYTES when above 48 KiB).
  int64_t dynamicSharedMemBytes = 0;
  llvm::SmallVector<KernelArg> args;
};

/// The launch contract of the decode kernel generated for `spec`: grid
/// "num_ctas", the work-list arguments of docs/Manifest.md (with
/// `custom_mask`, `mask_indptr` after the page table when spec.customMask),
/// then the variants' runtime parameters (`params`: name and kind, in order).
KernelLaunchInfo getDecodeLaunchInfo(
    const DecodeKernelSpec &spec,
    llvm::ArrayRef<std::pair<std::string, std::string>> params = {});
/// The launch contract of the merge kernel.
KernelLaunchInfo getMergeLaunchInfo(const MergeKernelSpec &spec);

/// Shared-memory plan of the decode kernel, in bytes from the start of the
/// dynamic shared memory.
struct DecodeSmemLayout {
  /// K/V tiles: [warp][stage][K|V][16 tokens][head_dim] elements, XOR-swizzled
  /// in 16-byte chunks. Reused after the main loop for the per-warp outputs
  /// [warp][16][head_dim + 4] f32.
  int64_t kvBytes = 0, mergeBytes = 0;
  int64_t mergeRows = 0, mergeRowStride = 0;
  /// Per-warp running max and sum: [warp][2][16] f32, after the tiles.
  int64_t statsOffset = 0;
  int64_t totalBytes = 0;
};
DecodeSmemLayout getDecodeSmemLayout(const DecodeKernelSpec &spec);

/// The two arguments of a custom mask (docs/Manifest.md), in kernel order.
void appendCustomMaskArgs(llvm::SmallVectorImpl<KernelArg> &args);

} // namespace attn

#endif // ATTN_CONVERSION_ATTNTOGPU_KERNELSPEC_H
