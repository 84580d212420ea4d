//===- PrefillEmitter.h - State of the prefill kernel generator -*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Private to the AttnToGPU library. One PrefillEmitter builds one prefill
// kernel body; its methods are split by concern:
//   PrefillKernel.cpp   entry points, arguments, the work-item loop, the KV
//                       pipeline (prologue / steady state / drain)
//   PrefillTiles.cpp    Q and K/V gathers (cp.async, swizzle, page lookups),
//                       fragment loads, in-place q/k transforms
//   PrefillSoftmax.cpp  S = Q Kᵀ, hooks and masks, online softmax, O += P V,
//                       the epilogue (normalise, sink, direct/partial writes)
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_CONVERSION_ATTNTOGPU_PREFILLEMITTER_H
#define ATTN_LIB_CONVERSION_ATTNTOGPU_PREFILLEMITTER_H

#include "KernelBuilder.h"
#include "attn/Conversion/AttnToGPU/PrefillKernel.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir {
namespace gpu {
class GPUFuncOp;
} // namespace gpu
namespace attn {
class VariantHooks;
} // namespace attn
} // namespace mlir

namespace attn::detail {

/// Online-softmax state of one warp's 16 rows, carried through the KV loop.
/// Emits the body of one prefill kernel into a gpu.func.
class PrefillEmitter {
public:
  PrefillEmitter(mlir::ImplicitLocOpBuilder &b, const PrefillKernelSpec &spec,
                 const mlir::attn::VariantHooks *hooks);

  void emit(mlir::gpu::GPUFuncOp func);

private:
  // PrefillKernel.cpp
  void bindArguments(mlir::gpu::GPUFuncOp func);
  void emitItem(mlir::Value item);
  SoftmaxState emitKVLoop();

  // PrefillTiles.cpp
  void issueQueryTile();
  void loadQueryFragments();
  llvm::SmallVector<mlir::Value, 4> queryFragment(int64_t kStep);
  llvm::SmallVector<mlir::Value> loadPageIds(mlir::Value tile);
  void issueKVTile(mlir::Value tile, mlir::Value stage, mlir::ValueRange ids);
  void transformQueryTile();
  void transformKeyTile(mlir::Value tile, mlir::Value stage);
  /// Swizzled column (in elements) of 16-byte chunk `chunk` of smem row `row`.
  mlir::Value swizzledCol(mlir::Value row, mlir::Value chunk);

  // PrefillSoftmax.cpp
  void computeTile(mlir::Value tile, mlir::Value stage, SoftmaxState &st);
  void emitEpilogue(SoftmaxState &st);

  /// Row coordinates of this thread's rows g (r = 0) and g + 8 (r = 1).
  mlir::Value localRow(int64_t r);
  mlir::Value rowToken(mlir::Value local);
  mlir::Value rowHead(mlir::Value local);
  mlir::Value rowPos(mlir::Value local);

  mlir::ImplicitLocOpBuilder &b;
  KernelBuilder kb;
  const PrefillKernelSpec &spec;
  const mlir::attn::VariantHooks *hooks;
  PrefillSmemLayout smem;
  const int64_t D, Q, N, S, W, P, PS;
  mlir::Type eltType;

  // Kernel arguments.
  mlir::Value ctaIndptr, workItems, partialO, partialLse, slotRows;
  mlir::Value q, kCache, vCache, out, lse, qoIndptr, kvIndptr, kvIndices,
      kvLastLen, customMask, maskIndptr, smScale;
  // Thread coordinates (index).
  mlir::Value tid, lane, warp, g, t;
  /// [totalRows][headDim] element view of the dynamic shared memory.
  mlir::Value tiles;
  /// sm_scale * log2(e), f32.
  mlir::Value scaleLog2;

  // Per work item (index unless noted).
  mlir::Value request, headGroup, rowBegin, rowCount, kvBegin, kvEnd, slot,
      flags /*i32*/;
  mlir::Value qoStart, qoLen, kvBase, kvLen, posOffset, kvHead, numTiles;
  /// Position of the item's first row (for the diagonal test).
  mlir::Value firstPos;
  /// With a custom mask: the first bit of the request's mask
  /// (mask_indptr[request] * 8).
  mlir::Value maskBase;
  /// Query A fragments when kept in registers: headDim / 16 x 4 i32.
  llvm::SmallVector<llvm::SmallVector<mlir::Value, 4>> qFrag;
};

} // namespace attn::detail

#endif // ATTN_LIB_CONVERSION_ATTNTOGPU_PREFILLEMITTER_H
