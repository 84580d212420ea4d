//===- AttnToGPU.h - The target lowering of the tile-level form -*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// `convert-attn-to-gpu`: the attn.tile ops of every kernel (a gpu.func with
// an `attn.launch` contract) become gpu/nvgpu/nvvm code. Which pattern set
// does it is decided per kernel from its chip (TargetInfo): this header is
// the seam target pattern sets plug into. Today there is one, the sm_80+
// set (mma.sync, ldmatrix, cp.async); a wgmma/TMA set for sm_90a adds a
// populate function here and a line to getTileLowering.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOGPU_ATTNTOGPU_H
#define ATTN_CONVERSION_ATTNTOGPU_ATTNTOGPU_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::attn {

/// The sm_80+ pattern set for the tile ops of `kernel`: adds to `converter`
/// how each tile type of this kernel becomes per-thread values, and the
/// patterns to `patterns`.
void populateTileToMMASyncConversionPatterns(gpu::GPUFuncOp kernel,
                                             TypeConverter &converter,
                                             RewritePatternSet &patterns);

/// A target's pattern set, as the seam calls it.
using TileLoweringFn = void (*)(gpu::GPUFuncOp, TypeConverter &,
                                RewritePatternSet &);

/// The pattern set that lowers `kernel` (from its contract's chip), or null
/// when attn has none for that chip.
TileLoweringFn getTileLowering(gpu::GPUFuncOp kernel);

/// Lowers the tile ops of every kernel in `module`. Fails with a diagnostic
/// on the kernel it cannot lower.
LogicalResult lowerTileKernels(ModuleOp module);

/// Registers every dialect the lowered kernels are made of.
void registerKernelDialects(DialectRegistry &registry);

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOGPU_ATTNTOGPU_H
