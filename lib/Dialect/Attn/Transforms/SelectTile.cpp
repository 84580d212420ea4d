//===- SelectTile.cpp - choose attention tiles ----------------------------===//
//
// Fills in the tile of every attn.attention: the query tile from the
// expected packed query length, the rest from the head dim and the chip.
// When the query lengths vary by batch (`block_rows = ?`), or with
// `candidates`, lists every query tile for the runtime planner instead. A
// tile the user wrote is checked against the chip.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/IR/TileLayout.h"
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
    llvm::Expected<TargetInfo> target = TargetInfo::get(chip);
    if (!target) {
      getOperation()->emitError()
          << "attn-select-tile: " << llvm::toString(target.takeError());
      return signalPassFailure();
    }
    MLIRContext *ctx = &getContext();
    WalkResult result = getOperation()->walk([&](AttentionOp op) {
      int64_t headDim = op.getHeadDim();
      auto emitError = [&] { return op.emitOpError(); };
      // Tiles already there (the user's) must fit the chip.
      SmallVector<TileAttr> given;
      if (std::optional<TileAttr> tile = op.getTile())
        given.push_back(*tile);
      if (std::optional<ArrayAttr> candidates = op.getTileCandidates())
        llvm::append_range(given, candidates->getAsRange<TileAttr>());
      for (TileAttr tile : given)
        if (failed(checkTileFits(tile, headDim, *target, emitError)))
          return WalkResult::interrupt();
      if (!given.empty())
        return WalkResult::advance();

      // K/V tiles by TMA (kv-tma) where the tile and every view's pages
      // can take boxes.
      auto choose = [&](int64_t q) {
        TileAttr tile = chooseTile(ctx, q, headDim, *target);
        if (!kvTma)
          return tile;
        TileAttr tma = withKVByTMA(tile, headDim, *target);
        for (BsrAttr view : op.getViews())
          if (!getKVBoxRows(tma, headDim, view))
            return tile;
        return tma;
      };
      int64_t rows = getExpectedQueryRows(op);
      if (candidates || ShapedType::isDynamic(rows)) {
        SmallVector<Attribute> tiles;
        for (int64_t q : {16, 64, 128})
          tiles.push_back(choose(q));
        op.setTileCandidatesAttr(ArrayAttr::get(ctx, tiles));
        return WalkResult::advance();
      }
      // Few rows per request are packed with the heads of their GQA group.
      int64_t packedRows = rows * op.getGroupSize();
      op.setTileAttr(choose(chooseQueryTile(packedRows)));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
