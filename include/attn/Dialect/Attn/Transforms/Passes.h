//===- Passes.h - attn transform passes --------------------------*- C++ -*-===//
//
// Declarations of the passes that prepare attn.attention for kernel
// generation. The passes themselves are declared in Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_TRANSFORMS_PASSES_H
#define ATTN_DIALECT_ATTN_TRANSFORMS_PASSES_H

#include "attn/Dialect/Attn/IR/Attn.h"
#include "attn/Dialect/Attn/Utils/TargetInfo.h"
#include "mlir/Pass/Pass.h"

namespace mlir::attn {

#define GEN_PASS_DECL
#include "attn/Dialect/Attn/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "attn/Dialect/Attn/Transforms/Passes.h.inc"

/// The attribute attn-outline-kernels sets on each attn.attention: the
/// symbols of its attention kernels, one per tile candidate, in order.
inline constexpr llvm::StringLiteral kKernelsAttrName = "attn.kernels";

/// Options of the pass pipeline that prepares attention for kernel
/// generation.
struct AttnPrepareOptions {
  std::string chip = kDefaultChip;
  bool tileCandidates = false;
  /// attn-select-tile's kv-tma: ragged K/V by TMA where the tile can.
  bool kvTma = false;
};

/// expand-variants, decompose-composed, select-tile, pack-gqa: everything
/// between the user's attn IR and kernel generation.
void buildAttnPreparePipeline(OpPassManager &pm,
                              const AttnPrepareOptions &options);

/// Registers `attn-prepare-pipeline` with attn-opt.
void registerAttnPreparePipeline();

} // namespace mlir::attn

#endif // ATTN_DIALECT_ATTN_TRANSFORMS_PASSES_H
