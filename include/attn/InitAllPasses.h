//===- InitAllPasses.h - every pass attn tools expose ------------*- C++ -*-===//
//
// One place that registers the attn passes and pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_INITALLPASSES_H
#define ATTN_INITALLPASSES_H

#include "attn/Conversion/Passes.h"
#include "attn/Dialect/Attn/Transforms/Passes.h"
#include "attn/Pipelines/Pipelines.h"

namespace mlir::attn {

inline void registerAllPasses() {
  registerAttnPasses();
  registerAttnPreparePipeline();
  registerAttnConversionPasses();
  mlir::attn::registerAttnPipelines();
  mlir::attn::registerAttnToNVVMPipeline();
}

} // namespace mlir::attn

#endif // ATTN_INITALLPASSES_H
