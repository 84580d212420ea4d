//===- DecomposeComposed.cpp - cascade attention --------------------------===//
//
// Attention over a composed KV format equals the log-sum-exp merge of
// attention over each of its views, because the views' key sets are
// disjoint. This pass makes that explicit: one attention per view (the KV
// operands are shared, only index arrays differ) and one attn.merge_states.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNDECOMPOSECOMPOSEDPASS
#include "attn/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace mlir::attn

#define DEBUG_TYPE "attn-decompose-composed"

using namespace mlir;
using namespace mlir::attn;

namespace {
/// attention(composed<[v0, v1, ...]>) -> merge_states(attention(v0), ...)
struct DecomposeComposedAttention : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    auto composed = dyn_cast<ComposedAttr>(op.getFormat());
    if (!composed)
      return failure();
    if (op.getMask())
      return rewriter.notifyMatchFailure(
          op, "a custom mask spans the whole cache, not one view");
    // The parts' partial results need buffers of their own: decompose
    // before bufferization (the pipelines do).
    if (!op.hasTensorSemantics() || !op.getOuts().empty())
      return rewriter.notifyMatchFailure(
          op, "only the value form without destinations is decomposed");

    SmallVector<Value> outputs, lses;
    for (auto [i, view] : llvm::enumerate(composed.getViewList())) {
      auto part = AttentionOp::create(
          rewriter, op.getLoc(), op.getOutput().getType(),
          op.getLse().getType(), op.getQuery(), op.getKeyCache(),
          op.getValueCache(), op.getViewIndices(i), /*mask=*/Value(),
          op.getSmScale(), op.getParams(), view, op.getVariantsAttr(),
          op.getTileAttr(), op.getTileCandidatesAttr());
      outputs.push_back(part.getOutput());
      lses.push_back(part.getLse());
    }
    rewriter.replaceOpWithNewOp<MergeStatesOp>(op, op.getOutput().getType(),
                                               op.getLse().getType(), outputs,
                                               lses, /*mask=*/Value());
    return success();
  }
};

struct AttnDecomposeComposedPass
    : attn::impl::AttnDecomposeComposedPassBase<AttnDecomposeComposedPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<DecomposeComposedAttention>(&getContext());
    // One walk, and no dead-code removal: the pass only rewrites.
    walkAndApplyPatterns(getOperation(), std::move(patterns));
    // A composed attention left behind carries a custom mask: say so.
    WalkResult result = getOperation()->walk([](AttentionOp op) {
      if (isa<ComposedAttr>(op.getFormat())) {
        op.emitError() << "cannot decompose a composed format with a custom "
                          "mask: the mask spans the whole cache, not one view";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
