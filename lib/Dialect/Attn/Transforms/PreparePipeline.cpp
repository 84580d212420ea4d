//===- PreparePipeline.cpp - attn IR up to kernel generation --------------===//
//
// The fixed order of the attn transform passes: variants become hook
// regions, composed formats become one attention per view, then each
// attention gets its tile and GQA packing.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::attn;

void mlir::attn::buildAttnPreparePipeline(OpPassManager &pm,
                                          const AttnPrepareOptions &options) {
  pm.addPass(createAttnExpandVariantsPass());
  pm.addPass(createAttnDecomposeComposedPass());
  AttnSelectTilePassOptions tileOptions;
  tileOptions.chip = options.chip;
  tileOptions.candidates = options.tileCandidates;
  tileOptions.kvTma = options.kvTma;
  pm.addPass(createAttnSelectTilePass(tileOptions));
  pm.addPass(createAttnPackGQAPass());
}

namespace {
struct PreparePipelineOptions
    : public PassPipelineOptions<PreparePipelineOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("the target GPU (sm_80 ... sm_120a)"),
                           llvm::cl::init(kDefaultChip)};
  Option<bool> candidates{
      *this, "candidates",
      llvm::cl::desc("list every fitting tile for the runtime planner"),
      llvm::cl::init(false)};
  Option<bool> kvTma{
      *this, "kv-tma",
      llvm::cl::desc("load K/V tiles by TMA where the tile and pages can"),
      llvm::cl::init(false)};
};
} // namespace

void mlir::attn::registerAttnPreparePipeline() {
  PassPipelineRegistration<PreparePipelineOptions>(
      "attn-prepare-pipeline",
      "Expand variants, decompose composed formats, select tiles, pack GQA "
      "heads",
      [](OpPassManager &pm, const PreparePipelineOptions &options) {
        buildAttnPreparePipeline(
            pm, {options.chip, options.candidates, options.kvTma});
      });
}
