//===- CheckedPipeline.h - Pipelines that refuse a bad target ---*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// PassPipelineRegistration builds whatever options parse. attn's pipelines
// that attach an #nvvm.target also check the chip, PTX features and opt level
// first (NVPTX aborts the process on a PTX version too old for the chip when
// it serializes): the check's error becomes the pipeline's parse error, which
// attn-opt and parsePassPipeline report as for a bad option.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_PIPELINES_CHECKEDPIPELINE_H
#define ATTN_LIB_PIPELINES_CHECKEDPIPELINE_H

#include "attn/Dialect/Attn/Utils/NVPTXOptions.h"

#include "mlir/Pass/PassRegistry.h"

#include <functional>

namespace mlir::attn {

/// The NVPTX options of a pipeline's chip, features (empty: the chip's) and
/// opt level.
inline NVPTXOptions getPipelineTarget(StringRef chip, StringRef features,
                                      unsigned optLevel = 3) {
  NVPTXOptions target;
  target.chip = chip.str();
  target.features = features.str();
  target.optLevel = optLevel;
  return target;
}

/// Registers pipeline `arg`, whose options give the NVPTX target `target`
/// says, refusing a target NVPTXOptions::validate refuses.
template <typename Options>
void registerTargetPipeline(
    StringRef arg, StringRef description,
    std::function<NVPTXOptions(const Options &)> target,
    std::function<void(OpPassManager &, const Options &)> builder) {
  std::string name = arg.str();
  registerPassPipeline(
      arg, description,
      [name, target, builder](OpPassManager &pm, StringRef text,
                              function_ref<LogicalResult(const Twine &)> error) {
        Options options;
        if (failed(options.parseFromString(text)))
          return failure();
        if (llvm::Error err = target(options).validate())
          return error(name + ": " + llvm::toString(std::move(err)));
        builder(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> describe) {
        describe(Options());
      });
}

} // namespace mlir::attn

#endif // ATTN_LIB_PIPELINES_CHECKEDPIPELINE_H
