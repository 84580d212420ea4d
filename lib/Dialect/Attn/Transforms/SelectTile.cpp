//===- SelectTile.cpp - choose attention tiles ----------------------------===//
//
// Fills in the tile of every attn.attention: the query tile from the
// expected packed query length, the rest from the head dim and the chip.
// With `candidates`, lists every query tile for the runtime planner instead.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Transforms/Passes.h"
#include "attn/Dialect/Attn/Transforms/TileHeuristics.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNSELECTTILEPASS
#include "attn/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace mlir::attn

#define DEBUG_TYPE "attn-select-tile"

using namespace mlir;
using namespace mlir::attn;

namespace {
struct AttnSelectTilePass
    : attn::impl::AttnSelectTilePassBase<AttnSelectTilePass> {
  using Base::Base;

  void runOnOperation() override {
    std::optional<ChipInfo> chipInfo = lookupChip(chip);
    if (!chipInfo) {
      getOperation()->emitError()
          << "attn-select-tile: unknown chip '" << chip
          << "'; expected sm_80, sm_86, sm_89, sm_90 or sm_90a";
      return signalPassFailure();
    }
    MLIRContext *ctx = &getContext();
    getOperation()->walk([&](AttentionOp op) {
      if (op.getTile() || op.getTileCandidates())
        return;
      int64_t headDim = op.getHeadDim();
      if (candidates) {
        SmallVector<Attribute> tiles;
        for (int64_t q : {16, 64, 128})
          tiles.push_back(chooseTile(ctx, q, headDim, *chipInfo));
        op.setTileCandidatesAttr(ArrayAttr::get(ctx, tiles));
        return;
      }
      // Few rows per request are packed with the heads of their GQA group.
      int64_t packedRows = getExpectedQueryRows(op) * op.getGroupSize();
      op.setTileAttr(
          chooseTile(ctx, chooseQueryTile(packedRows), headDim, *chipInfo));
    });
  }
};
} // namespace
