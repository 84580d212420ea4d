//===- DecodeEmitter.h - The decode kernel body, shared by its parts -*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Private to the AttnToGPU library. The persistent split-KV decode kernel is
// emitted by one DecodeKernelEmitter whose methods live in three files, one
// concern each:
//
//   WorkList.cpp       the persistent loop over the CTA's work items and the
//                      per-item values (request, rows, positions, KV range)
//   DecodeKernel.cpp   the entry point, arguments, query fragments and the
//                      cp.async pipeline that gathers KV tiles by page
//   OnlineSoftmax.cpp  one tile's S = Q Kᵀ, hooks, masks, online softmax and
//                      O += P V; the merge of the warps and the output write
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_CONVERSION_ATTNTOGPU_DECODEEMITTER_H
#define ATTN_LIB_CONVERSION_ATTNTOGPU_DECODEEMITTER_H

#include "KernelBuilder.h"
#include "attn/Conversion/AttnToGPU/KernelSpec.h"
#include "attn/Conversion/AttnToGPU/VariantHooks.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace attn {
namespace detail {

/// The per-warp online-softmax state, carried through the main loop.
/// What one work item is, as index values (i32 where noted).
struct WorkItemValues {
  mlir::Value request, headGroup, rowBegin, rowCount, kvBegin, kvEnd, slot,
      flags /*i32*/;
  /// Derived: the request's first query row and length, its KV length and
  /// page range, the item's KV head, and the kernel's tile range.
  mlir::Value qoStart, qoLen, kvLen, pageBegin, numPages, kvHead;
  mlir::Value tileBase, numIters;
  /// For this thread's rows g and g + 8 of the tile: whether the row exists,
  /// its query row in q/o, its query head and its position (p = kv_len -
  /// qo_len + token).
  mlir::Value rowValid[2], qRow[2], head[2], qPos[2];
  /// With a custom mask: the bit of the request's mask where row `token`
  /// starts (mask_indptr[request] * 8 + token * kv_len), per row.
  mlir::Value maskRowBit[2];
};

/// Emits the body of one decode kernel into a gpu.func.
class DecodeKernelEmitter {
public:
  DecodeKernelEmitter(mlir::ImplicitLocOpBuilder &b,
                      const DecodeKernelSpec &spec);

  /// Emits the whole kernel into `func`, whose trailing arguments carry the
  /// parameters of `variants` in order (getVariantParamArgs).
  void emit(mlir::gpu::GPUFuncOp func,
            llvm::ArrayRef<mlir::attn::VariantOp> variants);

private:
  static constexpr int64_t T = DecodeKernelSpec::kTileTokens;
  /// 16-byte copies per lane per tile, for K (and again for V).
  int64_t copiesPerLane() const { return T * D / 8 / 32; }
  /// Page ids each lane needs per tile: one when a tile lies in one page.
  int64_t idsPerLane() const {
    return ragged ? 0 : (PS >= T ? 1 : copiesPerLane());
  }

  // DecodeKernel.cpp
  void emitSetup(mlir::gpu::GPUFuncOp func,
                 llvm::ArrayRef<mlir::attn::VariantOp> variants);
  void loadQueryFragments(const WorkItemValues &item);
  llvm::SmallVector<mlir::Value> loadPageIds(const WorkItemValues &item,
                                             mlir::Value tile);
  void issueTile(const WorkItemValues &item, mlir::Value tile,
                 mlir::Value stage, mlir::ValueRange ids);
  void transformKeys(const WorkItemValues &item, mlir::Value tile,
                     mlir::Value stage);
  SoftmaxState emitMainLoop(const WorkItemValues &item);
  mlir::Value tileStart(const WorkItemValues &item, mlir::Value tile);

  // WorkList.cpp
  void emitWorkLoop();
  WorkItemValues loadWorkItem(mlir::Value itemIndex);

  // OnlineSoftmax.cpp
  void computeTile(const WorkItemValues &item, mlir::Value tile,
                   mlir::Value stage, SoftmaxState &st);
  void emitEpilogue(const WorkItemValues &item, SoftmaxState &st);

  mlir::ImplicitLocOpBuilder &b;
  KernelBuilder kb;
  const DecodeKernelSpec &spec;
  DecodeSmemLayout smem;
  const int64_t D, G, P, W, S, PS;
  const bool ragged;
  mlir::Type eltType;
  mlir::attn::VariantHooks hooks;

  // Arguments.
  mlir::Value ctaIndptr, workItems, partialO, partialLse, slotRows, q, kCache,
      vCache, out, lse, qoIndptr, kvIndptr, kvIndices, kvLastLen, customMask,
      maskIndptr, smScale;
  // Shared-memory views.
  mlir::Value tiles, merge, stats;
  // Thread coordinates (index) and per-kernel constants.
  mlir::Value tid, lane, warp, g, t, scaleLog2 /*f32*/;
  // Lane-constant parts of the copy addresses.
  mlir::Value copyToken0, copyChunk;
  /// Query A fragments of the current item: headDim / 16 k-steps of 4
  /// packed i32.
  llvm::SmallVector<llvm::SmallVector<mlir::Value, 4>> qFrag;
};

/// Emits the body of the LSE merge kernel (MergeKernel.cpp) into `func`,
/// whose arguments are those of getMergeLaunchInfo; with
/// spec.outputTransform, the output-transform hooks of `variants` (whose
/// parameters are the trailing arguments) apply to the merged rows.
void emitMergeKernelBody(mlir::ImplicitLocOpBuilder &b,
                         mlir::gpu::GPUFuncOp func,
                         const MergeKernelSpec &spec,
                         llvm::ArrayRef<mlir::attn::VariantOp> variants = {});

} // namespace detail
} // namespace attn

#endif // ATTN_LIB_CONVERSION_ATTNTOGPU_DECODEEMITTER_H
