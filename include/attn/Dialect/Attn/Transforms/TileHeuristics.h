//===- TileHeuristics.h - how attn picks tiles -------------------*- C++ -*-===//
//
// The rules attn-select-tile, attn-pack-gqa and attn-outline-kernels apply,
// as plain functions so they are unit-tested on their own and so each
// decision about a tile is made in exactly one place: the query tile, the KV
// tile, warps, stages and occupancy, the GQA packing, whether a tile fits a
// chip, and the planner's cost model of a tile.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_TRANSFORMS_TILEHEURISTICS_H
#define ATTN_DIALECT_ATTN_TRANSFORMS_TILEHEURISTICS_H

#include "attn/Dialect/Attn/IR/Attn.h"
#include "attn/Dialect/Attn/Utils/TargetInfo.h"

namespace mlir::attn {

/// The query rows a request is expected to contribute to `op`: the static
/// average when the query and qo_indptr shapes are static, else the smallest
/// `block_rows` of the format's views; ShapedType::kDynamic when a view's
/// `block_rows` is `?` (the lengths vary by batch).
int64_t getExpectedQueryRows(AttentionOp op);

/// The query tile (16, 64 or 128) for `packedRows` query rows per request
/// (rows times the GQA heads packed with them): the smallest that holds them,
/// 128 beyond. The planner applies the same rule per batch to the average
/// packed length (attn/Runtime/Plan.h, selectTileCandidate).
int64_t chooseQueryTile(int64_t packedRows);

/// The full tile for a query tile `q` and head dim `headDim` on `target`:
/// KV tile, warps, pipeline stages and CTAs per SM that fit its shared
/// memory (gqa_pack 1; attn-pack-gqa sets it).
TileAttr chooseTile(MLIRContext *ctx, int64_t q, int64_t headDim,
                    const TargetInfo &target);

/// Query heads per KV head to pack as rows of a tile of `q` rows when each
/// request contributes `rows` rows: the largest divisor of `group` with
/// rows * pack <= q (1 when nothing packs).
int64_t chooseGqaPack(int64_t group, int64_t rows, int64_t q);

/// Whether `tile` can load K/V by TMA (kv_tma) with head dim `headDim` on
/// `target`: only the warp-specialized wgmma kernel's producer issues it.
bool canLoadKVByTMA(TileAttr tile, int64_t headDim, const TargetInfo &target);

/// `tile` loading K/V by TMA where it can (canLoadKVByTMA), else `tile`.
TileAttr withKVByTMA(TileAttr tile, int64_t headDim, const TargetInfo &target);

/// Checks that `tile` with head dim `headDim` fits `target`: its shared
/// memory in one CTA, `ctas_per_sm` of them in one SM. The message names
/// the value and the limit.
LogicalResult checkTileFits(TileAttr tile, int64_t headDim,
                            const TargetInfo &target,
                            function_ref<InFlightDiagnostic()> emitError);

/// The planner's cost model of a tile: an item over n keys costs
/// `perItem + n * perKVToken`, and KV is split into chunks of at least
/// `minChunk` keys (0: two KV tiles).
struct TileCost {
  int64_t perItem = 0, perKVToken = 1, minChunk = 0;
};
TileCost getTileCost(TileAttr tile);

} // namespace mlir::attn

#endif // ATTN_DIALECT_ATTN_TRANSFORMS_TILEHEURISTICS_H
