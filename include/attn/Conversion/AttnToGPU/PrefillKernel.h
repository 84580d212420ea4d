//===- PrefillKernel.h - Generated work-list prefill attention --*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Builds, with MLIR builders and upstream dialects only (gpu, nvgpu, nvvm,
// vector, scf, arith, memref, math), a persistent prefill attention kernel
// that walks the planner's work list (attn/Runtime/Plan.h, docs/Manifest.md):
//
//   kernel(plan, cta_indptr, work_items, partial_o, partial_lse, slot_rows,
//          q, k_cache, v_cache, o, lse, qo_indptr, kv_indptr,
//          [kv_indices, kv_last_len,]   (paged only)
//          [custom_mask, mask_indptr,]  (customMask only)
//          sm_scale, <variant parameters>)      grid (plan.num_ctas)
//
// A work item is up to tileQ packed rows (token * gqaPack + head % gqaPack) of
// one (request, head group) against the keys [kv_begin, kv_end) of the
// request. Each of the tileQ / 16 warps owns 16 rows; K/V tiles of tileKV keys
// are gathered by BSR indices with cp.async into a multi-stage, XOR-swizzled
// shared-memory ring, and Q·Kᵀ / P·V run on mma.sync m16n8k16 with an online
// softmax in fp32 (base 2). Variant hooks (VariantHooks.h) are inlined; with
// the @causal variant, KV tiles past the last row's position are skipped and
// the element mask runs only on tiles that cross the diagonal.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOGPU_PREFILLKERNEL_H
#define ATTN_CONVERSION_ATTNTOGPU_PREFILLKERNEL_H

#include "attn/Conversion/AttnToGPU/KernelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace mlir::attn {
class VariantHooks;
class VariantOp;
} // namespace mlir::attn

namespace attn {

/// A runtime parameter of a variant, appended to the kernel's arguments
/// (the ABI of VariantParams.h, shared with decode).
struct PrefillVariantParam {
  std::string name;
  /// "i32", "f32" or "ptr" (a memref<?xf32> table such as @sinks').
  std::string kind;
};

/// A prefill (or append / chunked-prefill) attention kernel on the planner's
/// persistent work list.
///
/// KV: paged, the pages of request b are kv_indices[kv_indptr[b] ..
/// kv_indptr[b+1]) with kv_last_len[b] tokens in the last one, each page
/// laid out NHD [page][pageSize][Hkv][D] or HND [page][Hkv][pageSize][D];
/// or ragged, rows kv_indptr[b] .. kv_indptr[b+1] of [tokens, Hkv, D].
/// Query row i of request b (qo_len rows, kv_len keys) sits at position
/// kv_len - qo_len + i (causal is bottom-right aligned).
struct PrefillKernelSpec {
  int64_t headDim = 128;
  int64_t numQoHeads = 32;
  int64_t numKVHeads = 8;
  KernelDType dtype = KernelDType::BF16;
  KVIndexing indexing = KVIndexing::Paged;
  /// Tokens per page (the format's block_cols); 1 is reported for ragged.
  int64_t pageSize = 16;
  KVLayout layout = KVLayout::NHD;
  /// Packed query rows per work item (64 or 128); one warp per 16 rows.
  int64_t tileQ = 128;
  /// Keys per main-loop step (16..128, a multiple of 16); the planner's KV
  /// granule: chunk boundaries are multiples of it.
  int64_t tileKV = 64;
  /// Warps per CTA; 0 means tileQ / 16 (the only supported value).
  int64_t numWarps = 0;
  /// cp.async ring depth (2..4 K+V tiles in flight).
  int64_t numStages = 2;
  /// Query heads packed as rows per KV head (divides Hq / Hkv).
  int64_t gqaPack = 1;
  /// Target SM (sm_80+: bf16 mma.sync and cp.async).
  std::string chip = "sm_90";
  /// With the @causal variant: skip KV tiles past the last row's position and
  /// mask only tiles that cross the diagonal (or the end of the keys).
  bool causalBlockSkip = true;
  /// Set when a variant other than @causal also masks (sliding window, custom
  /// mask): every tile then runs the element mask.
  bool maskEveryTile = false;
  /// A bit-packed custom mask (DESIGN.md §3b; arguments `custom_mask`,
  /// `mask_indptr` as for DecodeKernelSpec::customMask). It replaces causal
  /// (no causal tile skipping) and runs on every tile, ANDed with the
  /// variants' masks.
  bool customMask = false;
  /// Keep the Q fragments in registers across the KV loop (0: auto, true for
  /// head_dim <= 128; head_dim 256 re-reads them from shared memory).
  int64_t queryInRegisters = 0;
  /// Occupancy hint (`.minnctapersm`); 0 leaves it to ptxas.
  int64_t minCTAsPerSM = 0;
  /// Planner cost model written to the manifest.
  int64_t costPerItem = 0;
  int64_t costPerKVToken = 0;
  /// Names of the applied variants (part of the derived kernel name).
  llvm::SmallVector<std::string> variantNames;
  /// Runtime parameters of the variants, appended to the arguments in order
  /// (getVariantParamArgs' names and kinds).
  llvm::SmallVector<PrefillVariantParam> variantParams;
  /// Symbol of the gpu.func; empty derives one from the parameters.
  std::string kernelName;

  int64_t getNumWarps() const { return numWarps > 0 ? numWarps : tileQ / 16; }
  int64_t getThreads() const { return getNumWarps() * 32; }
  int64_t groupSize() const { return numQoHeads / numKVHeads; }
  bool keepsQueryInRegisters() const {
    return queryInRegisters ? queryInRegisters > 0 : headDim <= 128;
  }
  int64_t getPageSize() const {
    return indexing == KVIndexing::Paged ? pageSize : 1;
  }
  /// The kernel's name, e.g. `attn_prefill_bf16_d128_h32x8_p16_nhd_q128_kv64_s2_k1`.
  std::string getKernelName() const;
  /// Checks every field; the message names the offending one.
  llvm::Error validate() const;
};

/// Shared memory of the prefill kernel, in bytes: the Q tile
/// [tileQ][headDim], then the K ring [stages][tileKV][headDim], then the V
/// ring; every row XOR-swizzled in 16-byte chunks (chunk ^ row % 8).
struct PrefillSmemLayout {
  int64_t qOffset = 0, kOffset = 0, vOffset = 0;
  int64_t totalBytes = 0;
  /// Rows of the [rows][headDim] element view covering all three.
  int64_t totalRows = 0;
};
PrefillSmemLayout getPrefillSmemLayout(const PrefillKernelSpec &spec);

/// The launch contract: grid "num_ctas" x 1, getThreads() threads, the
/// arguments in the order of the file comment.
KernelLaunchInfo getPrefillLaunchInfo(const PrefillKernelSpec &spec);

/// Appends the prefill kernel for `spec` to `gpu.module @<gpuModuleName>` in
/// `module` (creating it if absent) and marks `module` a GPU container.
/// `hooks` must hold variants without runtime parameters (e.g. @causal): its
/// values are used inside the new kernel. Variants with parameters go through
/// buildPrefillKernelForVariants. An invalid spec is an error at `module`'s
/// location and nothing is built.
mlir::LogicalResult
buildPrefillKernel(mlir::ModuleOp module, const PrefillKernelSpec &spec,
                   const mlir::attn::VariantHooks *hooks = nullptr,
                   llvm::StringRef gpuModuleName = "attn_kernels");

/// `spec` with the names of `variants` appended to variantNames and their
/// parameters (getVariantParamArgs: scalars and memref<?xf32> tables) to
/// variantParams: the spec buildPrefillKernelForVariants builds and whose
/// manifest entry describes the kernel. Fails, with a diagnostic on the
/// variant, on a parameter type no kernel argument carries.
mlir::FailureOr<PrefillKernelSpec>
getPrefillSpecWithVariants(PrefillKernelSpec spec,
                           llvm::ArrayRef<mlir::attn::VariantOp> variants);

/// The lowering's entry: binds each declared parameter of `variants` (in
/// order) to a new trailing kernel argument as VariantParams.h describes
/// (f32, i32, i1 as i32, memref<?xf32> as a flat f32 buffer), names the
/// kernel as getPrefillSpecWithVariants(spec, variants) does, and inlines
/// the variants' hooks.
mlir::LogicalResult
buildPrefillKernelForVariants(mlir::ModuleOp module, PrefillKernelSpec spec,
                              llvm::ArrayRef<mlir::attn::VariantOp> variants,
                              llvm::StringRef gpuModuleName = "attn_kernels");

} // namespace attn

#endif // ATTN_CONVERSION_ATTNTOGPU_PREFILLKERNEL_H
