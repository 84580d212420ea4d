//===- AttnToGPU.cpp - convert-attn-to-gpu --------------------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Per kernel: the pattern set of its chip, one type converter for its tile
// values (the pattern set's), scf's structural conversion for the loops
// and branches that carry them, and a partial conversion that leaves no
// attn.tile op behind.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/AttnToGPU.h"
#include "KernelBuilder.h"
#include "MMASync/MMASync.h"
#include "attn/Conversion/Passes.h"
#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"

namespace mlir::attn {
#define GEN_PASS_DEF_CONVERTATTNTOGPUPASS
#include "attn/Conversion/Passes.h.inc"
} // namespace mlir::attn

#define DEBUG_TYPE "convert-attn-to-gpu"

using namespace mlir;
using namespace mlir::attn;

void mlir::attn::populateTileToMMASyncConversionPatterns(
    gpu::GPUFuncOp kernel, TypeConverter &converter,
    RewritePatternSet &patterns) {
  auto launch = kernel->getAttrOfType<LaunchAttr>(LaunchAttr::getAttrName());
  if (launch.isAttention()) {
    // Any op of the kernel gives its context; the function itself carries
    // the contract.
    mmasync::addTypeConversions(converter,
                                mmasync::KernelContext::get(kernel));
  } else {
    converter.addConversion([](Type t) { return t; });
  }
  mmasync::populateWorkLoopPatterns(converter, patterns);
  mmasync::populateQueryTilePatterns(converter, patterns);
  mmasync::populateKVPipelinePatterns(converter, patterns);
  mmasync::populateTileMathPatterns(converter, patterns);
  mmasync::populateStorePatterns(converter, patterns);
  mmasync::populateMergePatterns(converter, patterns);
  mmasync::populateRowKernelPatterns(converter, patterns);
}

TileLoweringFn mlir::attn::getTileLowering(gpu::GPUFuncOp kernel) {
  auto launch = kernel->getAttrOfType<LaunchAttr>(LaunchAttr::getAttrName());
  std::optional<TargetInfo> target =
      launch ? TargetInfo::lookup(launch.getChip().getValue()) : std::nullopt;
  if (!target || !target->hasMmaSync() || !target->hasCpAsync())
    return nullptr;
  if (launch.isAttention() &&
      getTileMMA(launch.getTile(), launch.getHeadDim(), *target) ==
          TileMMA::Wgmma)
    return populateTileToWgmmaConversionPatterns;
  return populateTileToMMASyncConversionPatterns;
}

/// Lowers the tile ops of `kernel`.
static LogicalResult lowerKernel(gpu::GPUFuncOp kernel) {
  TileLoweringFn lowering = getTileLowering(kernel);
  if (!lowering)
    return kernel.emitOpError("has no tile lowering for its contract's chip");
  if (lowering == populateTileToWgmmaConversionPatterns)
    specializeWarps(kernel);
  MLIRContext *ctx = kernel.getContext();
  TypeConverter converter;
  RewritePatternSet patterns(ctx);
  lowering(kernel, converter, patterns);
  ConversionTarget target(*ctx);
  target.addIllegalOp<TileWorkLoopOp, TileLoadQueryOp, TilePrefetchQueryOp,
                      TileKVRangeOp, TileKVTileCountOp, TileKVPrologueOp,
                      TileKVNextOp, TileKVDrainOp, TileQKOp, TileSoftmaxInitOp,
                      TileOnlineSoftmaxOp, TilePVOp, TileStoreOp, TileMergeOp,
                      TileMergeStatesOp, TileAppendKVOp, TileCopyIndicesOp,
                      TileCopyByTableOp>();
  target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
  scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns,
                                                       target);
  if (failed(applyPartialConversion(kernel, target, std::move(patterns))))
    return failure();
  // The occupancy the tile was chosen for: registers capped so that
  // ctas_per_sm CTAs fit every SM.
  auto launch = kernel->getAttrOfType<LaunchAttr>(LaunchAttr::getAttrName());
  if (launch.isAttention() && launch.getCtasPerSm() > 1)
    mlir::attn::detail::setOccupancyHints(kernel, launch.getCtasPerSm());
  return success();
}

LogicalResult mlir::attn::lowerTileKernels(ModuleOp module) {
  SmallVector<gpu::GPUFuncOp> kernels;
  module.walk([&](gpu::GPUFuncOp func) {
    if (func->hasAttr(LaunchAttr::getAttrName()))
      kernels.push_back(func);
  });
  for (gpu::GPUFuncOp kernel : kernels)
    if (failed(lowerKernel(kernel)))
      return failure();
  return success();
}

void mlir::attn::registerKernelDialects(DialectRegistry &registry) {
  registry.insert<arith::ArithDialect, gpu::GPUDialect, LLVM::LLVMDialect,
                  math::MathDialect, memref::MemRefDialect,
                  nvgpu::NVGPUDialect, scf::SCFDialect, vector::VectorDialect,
                  AttnDialect>();
  mlir::attn::detail::insertNVVMDialect(registry);
}

namespace {
struct ConvertAttnToGPUPass
    : public mlir::attn::impl::ConvertAttnToGPUPassBase<ConvertAttnToGPUPass> {
  void getDependentDialects(DialectRegistry &registry) const override {
    registerKernelDialects(registry);
  }
  void runOnOperation() override {
    if (failed(lowerTileKernels(getOperation())))
      signalPassFailure();
  }
};
} // namespace
