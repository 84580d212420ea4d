//===- AttnToNVVM.cpp - the whole compiler as one pipeline ----------------===//
//
// `attn-to-nvvm-pipeline`: attn IR in, LLVM/NVVM kernels with an
// #nvvm.target out, ready for PTX/cubin serialization. The stages are the
// ones attn-compile times one by one: attn-prepare-pipeline,
// convert-attn-to-gpu, attn-lower-to-nvvm.
//
//===----------------------------------------------------------------------===//

#include "CheckedPipeline.h"
#include "attn/Conversion/Passes.h"
#include "attn/Dialect/Attn/Transforms/Passes.h"
#include "attn/Pipelines/Pipelines.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace {
struct AttnToNVVMOptions : public PassPipelineOptions<AttnToNVVMOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("target GPU (sm_80 ... sm_120a)"),
                           llvm::cl::init(mlir::attn::kDefaultChip)};
  Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features, e.g. +ptx80 (default: the chip's)"),
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
} // namespace

void mlir::attn::registerAttnToNVVMPipeline() {
  registerTargetPipeline<AttnToNVVMOptions>(
      "attn-to-nvvm-pipeline",
      "attn IR to LLVM/NVVM kernels: attn-prepare-pipeline, "
      "convert-attn-to-gpu, attn-lower-to-nvvm",
      [](const AttnToNVVMOptions &options) {
        return getPipelineTarget(options.chip, options.features);
      },
      [](OpPassManager &pm, const AttnToNVVMOptions &options) {
        mlir::attn::buildAttnPreparePipeline(
            pm, {options.chip, options.candidates, options.kvTma});
        mlir::attn::AttnOutlineKernelsPassOptions outline;
        outline.chip = options.chip;
        pm.addPass(mlir::attn::createAttnOutlineKernelsPass(outline));
        pm.addPass(mlir::attn::createConvertAttnToGPUPass());
        mlir::attn::LowerToNVVMOptions lower;
        lower.chip = options.chip;
        lower.features = options.features;
        mlir::attn::buildLowerToNVVMPipeline(pm, lower);
      });
}
