//===- TileLayout.h - Where a tile's kernel keeps its data -------*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The shared-memory layout of the kernel of a tile: which buffers it holds,
// at which rows, and how rows are arranged against bank conflicts. One
// function computes it; tile selection sizes tiles with it, the outline pass
// records its size in the launch contract, and the target lowering addresses
// the buffers with it, so the three cannot disagree.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_IR_TILELAYOUT_H
#define ATTN_DIALECT_ATTN_IR_TILELAYOUT_H

#include "attn/Dialect/Attn/IR/Attn.h"

namespace mlir::attn {

class TargetInfo;

/// The dynamic shared memory of one CTA, as rows of `rowElements` 2-byte
/// elements (a row is one key, value or query vector of `headDim`
/// elements).
///
/// Rows hold their 16-byte chunks XOR-swizzled (chunk c of row r at c ^
/// (r % 8)) when `headDim` is a multiple of 64, so ldmatrix reads and
/// cp.async writes of 8 rows hit 8 different bank groups; other head dims pad
/// each row by one chunk instead (an odd number of chunks per row does the
/// same).
///
/// Decode tiles (the warps split the keys): warp w's ring of `stages` K and
/// V tiles of 16 rows each starts at row `warpRing(w)`; after the KV loop the
/// same bytes hold each warp's f32 output rows (`mergeRowStride` floats per
/// row, `16` rows per warp) and, after them, each warp's running max and sum
/// ([warp][2][16] f32 at byte `statsOffset`).
///
/// Taller tiles: the Q tile (`q` rows) at row `qRow`, the K ring (`stages`
/// tiles of `kv` rows) at `kRow`, the V ring at `vRow`. With swizzled rows,
/// each row is `columnBlocks` blocks of 64 elements (128 bytes), and block b
/// of every row lives in its own region of `totalRows` x 64 elements: the
/// canonical 128-byte-swizzled layout (atoms of 8 rows, 1024 bytes) that
/// wgmma's shared-memory descriptors read, and that ldmatrix reads without
/// bank conflicts too. Element view: [columnBlocks * totalRows][blockElements].
struct TileSharedMemory {
  int64_t rowElements = 0;
  bool swizzled = false;
  int64_t totalRows = 0;
  int64_t columnBlocks = 1, blockElements = 0;
  /// Taller tiles.
  int64_t qRow = 0, kRow = 0, vRow = 0;
  /// Decode tiles: rows of one warp's ring, the f32 merge rows' stride and
  /// the byte offset of the statistics.
  int64_t ringRows = 0, mergeRowStride = 0, statsOffset = 0;
  /// Kernels with a producer warpgroup: the K/V ring's mbarriers (8 bytes each) at this byte
  /// offset, `stages` "full" ones (the producer's copies of a slot landed)
  /// then `stages` "empty" ones (the consumers are done with a slot).
  int64_t barrierOffset = 0;
  /// Everything, in bytes.
  int64_t bytes = 0;

  /// First row of warp `w`'s K/V ring (decode tiles): stage s's K tile at
  /// warpRing(w) + 2 * 16 * s, its V tile 16 rows further.
  int64_t warpRing(int64_t w) const { return w * ringRows; }
};

/// The instructions a tile's S = Q Kᵀ and O += P V run on.
enum class TileMMA { MmaSync, Wgmma };

/// The layout of `tile`'s kernel for head dim `headDim` when its GEMMs run
/// on `mma` (kernels with a producer add the ring's mbarriers).
TileSharedMemory getTileSharedMemory(TileAttr tile, int64_t headDim,
                                     TileMMA mma = TileMMA::MmaSync);

/// wgmma (warpgroup MMA from shared-memory descriptors) where the chip has it
/// and the tile is whole warpgroups over 128-byte-swizzled rows: not a decode
/// tile, 16 rows per warp in multiples of four warps, a head dim that is a
/// multiple of 64 and keys per tile a multiple of 16. mma.sync otherwise.
TileMMA getTileMMA(TileAttr tile, int64_t headDim, const TargetInfo &target);

/// Warps of the producer warpgroup a kernel adds to its tile's warps: 4 on
/// wgmma tiles of one CTA per SM (it streams the K/V tiles into the ring,
/// the tile's warps only compute; two CTAs per SM leave no registers for
/// it), none otherwise. The kernel's threads are (warps + producer warps) x
/// 32, the producer's last.
int64_t getProducerWarps(TileAttr tile, TileMMA mma);
int64_t getTileThreads(TileAttr tile, TileMMA mma);

/// Keys per TMA box of a K/V tile of `tile` over `format` (kv_tma): the
/// whole tile for ragged K/V and for pages that hold whole tiles; one page
/// for pages of a multiple of 8 keys that divide the tile and map alike onto
/// every producer thread's copies (a multiple of the producer's rows per copy
/// round, 1024 / head_dim, so the pipe's page indices are the tile's pages
/// in order). 0 where pages cannot be boxes: their rows are gathered by
/// cp.async. A box's rows start a 1024-byte swizzle atom either way.
int64_t getKVBoxRows(TileAttr tile, int64_t headDim, BsrAttr format);

/// Whether the K/V loop of `tile`'s kernel is software-pipelined: warp-
/// specialized wgmma tiles of three or more stages. Step j then issues
/// S = Q Kᵀ of tile j and O += P V of tile j - 1 before the softmax of tile
/// j, which runs while the tensor cores do P V; tile j - 1 stays in the ring
/// until that P V is done, one step longer than otherwise, hence the third
/// stage.
bool isKVLoopPipelined(TileAttr tile, TileMMA mma);

/// Whether the online softmax of `tile`'s kernel moves a warp's running max
/// only when a row's max grew past a slack, skipping the accumulator's
/// rescale otherwise (docs/Kernels.md, "The running max"): the pipelined
/// loop's tiles, where it was measured faster (P1 +2.5%, P2 +1.2%, P5 +2.5%
/// on an H200); head dim 64's 192-row tile ran 3.7% slower with it and head
/// dim 256's 1%, so the others keep the textbook update (bench/NOTES.md v48).
bool movesRowMaxLazily(TileAttr tile, TileMMA mma);

/// The dynamic shared memory of a merge kernel of `threads` threads that
/// merges `rowsPerCta` rows at a time: with one row, each thread publishes
/// its state (8 accumulator floats, its max and its sum, [10][threads] f32:
/// accumulators at 8 * thread, maxima at 8 * threads + thread, sums at
/// 9 * threads + thread) for the CTA to combine; with a row per part,
/// nothing.
int64_t getMergeSharedBytes(int64_t threads, int64_t rowsPerCta);

} // namespace mlir::attn

#endif // ATTN_DIALECT_ATTN_IR_TILELAYOUT_H
