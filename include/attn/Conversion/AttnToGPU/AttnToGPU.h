//===- AttnToGPU.h - The target lowering of the tile-level form -*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// `convert-attn-to-gpu`: the attn.tile ops of every kernel (a gpu.func with
// an `attn.launch` contract) become gpu/nvgpu/nvvm code. Which pattern set
// does it is decided per kernel from its chip (TargetInfo) and tile
// (getTileMMA): this header is the seam target pattern sets plug into. The
// sm_80+ set (mma.sync, ldmatrix, cp.async) lowers every kernel; the sm_90a
// set replaces its two GEMMs with wgmma for tiles of whole warpgroups.
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

/// The sm_90a pattern set: the sm_80+ set with S = Q Kᵀ and O += P V on
/// wgmma (WGMMA/TileMath.cpp), for kernels whose tile getTileMMA puts on
/// wgmma.
void populateTileToWgmmaConversionPatterns(gpu::GPUFuncOp kernel,
                                           TypeConverter &converter,
                                           RewritePatternSet &patterns);

/// Splits a warp-specialized wgmma kernel's work loop into the producer's
/// and the computing warps' copies (WGMMA/WarpSpecialize.cpp), before its
/// tile ops are lowered; other kernels are left alone.
void specializeWarps(gpu::GPUFuncOp kernel);

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
