//===- RowKernels.h - The row kernels of attn-outline-kernels ---*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Private to the attn transforms (OutlineRowKernels.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_DIALECT_ATTN_TRANSFORMS_ROWKERNELS_H
#define ATTN_LIB_DIALECT_ATTN_TRANSFORMS_ROWKERNELS_H

#include "attn/Dialect/Attn/IR/Attn.h"
#include "attn/Dialect/Attn/Utils/TargetInfo.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir::attn {

/// Writes (or finds) the merge_states kernel of `op` in `gm` and records it
/// in the op's `attn.kernels`.
LogicalResult outlineMergeStates(MergeStatesOp op, gpu::GPUModuleOp gm,
                                 const TargetInfo &target);

/// The same for the append_kv kernel of `op`.
LogicalResult outlineAppendKV(AppendKVOp op, gpu::GPUModuleOp gm,
                              const TargetInfo &target);

/// The same for the copy_indices kernel of `op`'s number of arrays.
LogicalResult outlineCopyIndices(CopyIndicesOp op, gpu::GPUModuleOp gm,
                                 const TargetInfo &target);

/// The same for the copy_by_table kernel of `op`'s number of table rows.
LogicalResult outlineCopyByTable(CopyByTableOp op, gpu::GPUModuleOp gm,
                                 const TargetInfo &target);

} // namespace mlir::attn

#endif // ATTN_LIB_DIALECT_ATTN_TRANSFORMS_ROWKERNELS_H
