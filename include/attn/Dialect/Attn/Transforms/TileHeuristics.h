//===- TileHeuristics.h - how attn picks tiles -------------------*- C++ -*-===//
//
// The rules attn-select-tile and attn-pack-gqa apply, as plain functions so
// they are unit-tested on their own and shared by both passes.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_TRANSFORMS_TILEHEURISTICS_H
#define ATTN_DIALECT_ATTN_TRANSFORMS_TILEHEURISTICS_H

#include "attn/Dialect/Attn/IR/Attn.h"

#include <optional>

namespace mlir::attn {

/// What tile selection needs to know of a GPU.
struct ChipInfo {
  llvm::StringRef name;
  /// Dynamic shared memory one CTA may use, in bytes.
  int64_t sharedMemoryPerBlock;
};

/// The chip called `name` (sm_80, sm_86, sm_89, sm_90, sm_90a), or none.
std::optional<ChipInfo> lookupChip(llvm::StringRef name);

/// The query rows a request is expected to contribute to `op`: the static
/// average when the query and qo_indptr shapes are static, else the smallest
/// `block_rows` of the format's views.
int64_t getExpectedQueryRows(AttentionOp op);

/// The query tile (16, 64 or 128) for `packedRows` query rows per request
/// (rows times the GQA heads packed with them).
int64_t chooseQueryTile(int64_t packedRows);

/// The full tile for a query tile `q`: KV tile, warps and pipeline stages
/// that fit `chip`'s shared memory for `headDim` with 2-byte elements.
TileAttr chooseTile(MLIRContext *ctx, int64_t q, int64_t headDim,
                    const ChipInfo &chip);

/// Query heads per KV head to pack as rows of a tile of `q` rows when each
/// request contributes `rows` rows: the largest power of two dividing `group`
/// with rows * pack <= q (1 when nothing packs).
int64_t chooseGqaPack(int64_t group, int64_t rows, int64_t q);

/// Shared memory a tile's KV pipeline needs with 2-byte elements: decode
/// tiles (q = 16) give every warp its own `stages` K and V tiles; larger
/// tiles hold the query tile plus `stages` K and V tiles shared by all warps.
int64_t getTileSharedMemory(TileAttr tile, int64_t headDim);

} // namespace mlir::attn

#endif // ATTN_DIALECT_ATTN_TRANSFORMS_TILEHEURISTICS_H
