//===- LowerToNVVM.cpp - The attn-lower-to-nvvm pipeline ------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The order matters: nvgpu ops become nvvm ops while memrefs still exist;
// scf is lowered before the LLVM conversions; the
// target attribute is attached before convert-gpu-to-nvvm so the data layout
// and index width come from it; the dynamic shared memory fix and the
// by-value tensor-map parameters run last, on LLVM globals and functions.
//
//===----------------------------------------------------------------------===//

#include "CheckedPipeline.h"
#include "attn/Pipelines/Pipelines.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::attn::buildLowerToNVVMPipeline(OpPassManager &pm,
                                          const LowerToNVVMOptions &options) {
  // Before anything lowers math: RoPE's sin/cos on the hardware's
  // approximation, after an exact-enough range reduction.
  if (options.approximateTrig)
    pm.nest<gpu::GPUModuleOp>().addPass(
        mlir::attn::createApproximateTrigPass());
  // Device-side dialects that still need memref semantics. The kernels carry
  // no vector transfers (vector-to-scf walked the whole module for nothing),
  // and after the canonicalizer and CSE below, the LLVM conversion leaves
  // nothing to fold that LLVM's pipeline does not: without a second round
  // every cubin of the kernel pack is byte-identical (bench/NOTES.md,
  // "Compile time, session 22").
  pm.addPass(createConvertNVGPUToNVVMPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertNVVMToLLVMPass());
  pm.addPass(memref::createExpandStridedMetadataPass());

  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features =
      getPipelineTarget(options.chip, options.features).getFeatures();
  target.optLevel = options.optLevel;
  pm.addPass(createGpuNVVMAttachTarget(target));

  pm.addPass(createLowerAffinePass());
  pm.addPass(createArithToLLVMConversionPass());
  ConvertIndexToLLVMPassOptions index;
  index.indexBitwidth = 64;
  pm.addPass(createConvertIndexToLLVMPass(index));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // Inside each gpu.module: everything to LLVM + NVVM.
  ConvertGpuOpsToNVVMOpsOptions toNVVM;
  toNVVM.indexBitwidth = 64;
  toNVVM.useBarePtrCallConv = options.barePtrCallConv;
  OpPassManager &gpu = pm.nest<gpu::GPUModuleOp>();
  // No llvm-optimize-for-nvvm-target: its one rewrite is of f16 divisions,
  // which the kernels do not contain (LLVM lowers any a hook writes), and
  // its greedy walk over the unrolled kernels cost ~15 ms of the q128
  // candidate's compile; every cubin of the kernel pack is byte-identical
  // without it (bench/NOTES.md, "Compile time, session 28").
  gpu.addPass(createConvertGpuOpsToNVVMOps(toNVVM));
  gpu.addPass(createReconcileUnrealizedCastsPass());
  gpu.addPass(mlir::attn::createExternalizeDynamicSharedMemoryPass());
  gpu.addPass(mlir::attn::createGridConstantParamsPass());
}

void mlir::attn::registerAttnPipelines() {
  registerTargetPipeline<LowerToNVVMOptions>(
      "attn-lower-to-nvvm",
      "Lower gpu.modules of upstream dialects to LLVM/NVVM with an "
      "#nvvm.target (bare-pointer kernel arguments)",
      [](const LowerToNVVMOptions &o) {
        return getPipelineTarget(o.chip, o.features, o.optLevel);
      },
      buildLowerToNVVMPipeline);
  PassRegistration<Pass>(
      [] { return mlir::attn::createExternalizeDynamicSharedMemoryPass(); });
  PassRegistration<Pass>(
      [] { return mlir::attn::createApproximateTrigPass(); });
  PassRegistration<Pass>(
      [] { return mlir::attn::createGridConstantParamsPass(); });
}
