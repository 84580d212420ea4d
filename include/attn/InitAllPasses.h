//===- InitAllPasses.h - every pass attn tools expose ------------*- C++ -*-===//
//
// One place that registers the attn passes and pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_INITALLPASSES_H
#define ATTN_INITALLPASSES_H

#include "attn/Conversion/Passes.h"
#include "attn/Dialect/Attn/Transforms/Passes.h"

namespace mlir::attn {

inline void registerAllPasses() {
  registerAttnPasses();
  registerAttnPreparePipeline();
  registerAttnConversionPasses();
}

} // namespace mlir::attn

#endif // ATTN_INITALLPASSES_H
