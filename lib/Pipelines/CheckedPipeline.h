//===- CheckedPipeline.h - Pipelines that refuse bad options ----*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// PassPipelineRegistration builds whatever options parse. attn's pipelines
// also check them first (a chip and PTX version NVPTX would abort the process
// on when it serializes): the check's error becomes the pipeline's parse
// error, which attn-opt and parsePassPipeline report as for a bad option.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_PIPELINES_CHECKEDPIPELINE_H
#define ATTN_LIB_PIPELINES_CHECKEDPIPELINE_H

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/Error.h"

#include <functional>

namespace mlir::attn {

template <typename Options>
void registerCheckedPipeline(
    StringRef arg, StringRef description,
    std::function<llvm::Error(const Options &)> check,
    std::function<void(OpPassManager &, const Options &)> builder) {
  std::string name = arg.str();
  registerPassPipeline(
      arg, description,
      [name, check, builder](OpPassManager &pm, StringRef text,
                             function_ref<LogicalResult(const Twine &)> error) {
        Options options;
        if (failed(options.parseFromString(text)))
          return failure();
        if (llvm::Error err = check(options))
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
