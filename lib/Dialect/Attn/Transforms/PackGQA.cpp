//===- PackGQA.cpp - pack GQA heads into tile rows ------------------------===//
//
// Sets gqa_pack on the tiles of every attn.attention, so that the query
// heads sharing a KV head fill the rows a short query leaves empty.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Transforms/Passes.h"
#include "attn/Dialect/Attn/Transforms/TileHeuristics.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNPACKGQAPASS
#include "attn/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace mlir::attn

#define DEBUG_TYPE "attn-pack-gqa"

using namespace mlir;
using namespace mlir::attn;

/// `tile` with its gqa_pack chosen for `op`. When the query lengths vary by
/// batch, a candidate tile is picked by the planner for batches whose
/// packed rows fit it: it packs as much of the group as its rows hold.
static TileAttr packTile(AttentionOp op, TileAttr tile) {
  int64_t rows = getExpectedQueryRows(op);
  if (ShapedType::isDynamic(rows))
    rows = 1;
  int64_t pack = chooseGqaPack(op.getGroupSize(), rows, tile.getQ());
  return TileAttr::get(op.getContext(), tile.getQ(), tile.getKv(),
                       tile.getWarps(), tile.getStages(), pack,
                       tile.getCtasPerSm(), tile.getKvTma());
}

namespace {
struct AttnPackGQAPass : attn::impl::AttnPackGQAPassBase<AttnPackGQAPass> {
  void runOnOperation() override {
    getOperation()->walk([&](AttentionOp op) {
      if (op.getGroupSize() == 1)
        return;
      if (std::optional<TileAttr> tile = op.getTile())
        op.setTileAttr(packTile(op, *tile));
      if (std::optional<ArrayAttr> candidates = op.getTileCandidates()) {
        SmallVector<Attribute> packed;
        for (auto tile : candidates->getAsRange<TileAttr>())
          packed.push_back(packTile(op, tile));
        op.setTileCandidatesAttr(ArrayAttr::get(op.getContext(), packed));
      }
    });
  }
};
} // namespace
