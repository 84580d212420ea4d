//===- AttnToLLVMPipeline.cpp - a module with attention to LLVM -----------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// `attn-to-llvm-pipeline`: a tensor-level module whose host functions use
// attn ops, to the LLVM dialect, ready for mlir-translate --mlir-to-llvmir.
// The kernels are outlined and serialized (the image and manifest embedded)
// while the ops are still tensors, because tile selection and outlining read
// tensor shapes; bufferization then puts the ops in the memref form that
// attn-lower-host-calls turns into runtime calls; the rest is upstream's
// host lowering (gpu-to-llvm for the managed buffers the function allocates
// itself). Function boundaries bufferize to identity layouts, so the
// buffers the runtime sees are dense.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Transforms/Passes.h"
#include "attn/Target/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUCommon/GPUCommonPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace {
struct AttnToLLVMOptions : public PassPipelineOptions<AttnToLLVMOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("target GPU (sm_80 ... sm_120a)"),
                           llvm::cl::init(mlir::attn::kDefaultChip)};
  Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features, e.g. +ptx80 (default: the chip's)"),
      llvm::cl::init("")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("embedded image: bin (cubin) or isa (PTX)"),
      llvm::cl::init("bin")};
  Option<std::string> cudaPath{
      *this, "cuda-path",
      llvm::cl::desc("CUDA toolkit (default $CUDA_HOME or /usr/local/cuda)"),
      llvm::cl::init("")};
  Option<bool> candidates{
      *this, "candidates",
      llvm::cl::desc("keep every fitting tile for the runtime planner"),
      llvm::cl::init(false)};
  Option<bool> kvTma{
      *this, "kv-tma",
      llvm::cl::desc("load K/V tiles by TMA where the tile and pages can"),
      llvm::cl::init(false)};
};

void buildAttnToLLVMPipeline(OpPassManager &pm,
                             const AttnToLLVMOptions &options) {
  mlir::attn::buildAttnPreparePipeline(
      pm, {options.chip, options.candidates, options.kvTma});
  mlir::attn::AttnOutlineKernelsPassOptions outline;
  outline.chip = options.chip;
  pm.addPass(mlir::attn::createAttnOutlineKernelsPass(outline));
  mlir::attn::AttnSerializeKernelsPassOptions serialize;
  serialize.chip = options.chip;
  serialize.features = options.features;
  serialize.cudaPath = options.cudaPath;
  serialize.format = options.format;
  pm.addPass(mlir::attn::createAttnSerializeKernelsPass(serialize));

  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  pm.addPass(mlir::attn::createAttnLowerHostCallsPass());

  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  // The managed allocations attn-lower-host-calls made (mgpuMemAlloc).
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}
} // namespace

void mlir::attn::registerAttnToLLVMPipeline() {
  PassPipelineRegistration<AttnToLLVMOptions>(
      "attn-to-llvm-pipeline",
      "attn IR on tensors to the LLVM dialect: kernels compiled and embedded, "
      "attn ops lowered to calls of the runtime's C ABI",
      buildAttnToLLVMPipeline);
}
