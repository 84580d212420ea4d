//===- TileLayout.cpp - Where a tile's kernel keeps its data --------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/IR/TileLayout.h"
#include "attn/Dialect/Attn/Utils/TargetInfo.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::attn;

TileSharedMemory mlir::attn::getTileSharedMemory(TileAttr tile,
                                                 int64_t headDim,
                                                 TileMMA mma) {
  TileSharedMemory l;
  constexpr int64_t eltBytes = TargetInfo::kElementBytes;
  l.swizzled = headDim % 64 == 0;
  l.rowElements = l.swizzled ? headDim : headDim + 8;
  l.blockElements = l.rowElements;
  const int64_t rowBytes = l.rowElements * eltBytes;
  const int64_t S = tile.getStages();
  if (tile.warpsSplitKeys()) {
    const int64_t W = tile.getWarps(), T = tile.getKeysPerStep();
    l.ringRows = S * 2 * T;
    l.totalRows = W * l.ringRows;
    // Four floats of padding keep the fragment stores free of conflicts.
    l.mergeRowStride = headDim + 4;
    int64_t kvBytes = l.totalRows * rowBytes;
    int64_t mergeBytes = W * T * l.mergeRowStride * 4;
    l.statsOffset = std::max(kvBytes, mergeBytes);
    l.bytes = l.statsOffset + W * 2 * T * 4;
    return l;
  }
  if (l.swizzled) {
    l.columnBlocks = headDim / 64;
    l.blockElements = 64;
  }
  const int64_t ringRows = S * tile.getKv();
  l.qRow = 0;
  l.kRow = tile.getQ();
  l.vRow = l.kRow + ringRows;
  l.totalRows = l.vRow + ringRows;
  l.bytes = l.totalRows * rowBytes;
  if (getProducerWarps(tile, mma) > 0) {
    l.barrierOffset = (l.bytes + 7) / 8 * 8;
    l.bytes = l.barrierOffset + 2 * S * 8;
  }
  return l;
}

TileMMA mlir::attn::getTileMMA(TileAttr tile, int64_t headDim,
                               const TargetInfo &target) {
  const int64_t warps = tile.getWarps();
  bool wholeWarpgroups = !tile.warpsSplitKeys() && warps % 4 == 0 &&
                         tile.getQ() == 16 * warps;
  if (target.hasWgmma() && wholeWarpgroups && headDim % 64 == 0 &&
      tile.getKv() % 16 == 0)
    return TileMMA::Wgmma;
  return TileMMA::MmaSync;
}

int64_t mlir::attn::getProducerWarps(TileAttr tile, TileMMA mma) {
  return mma == TileMMA::Wgmma && tile.getCtasPerSm() == 1 ? 4 : 0;
}

int64_t mlir::attn::getTileThreads(TileAttr tile, TileMMA mma) {
  return (tile.getWarps() + getProducerWarps(tile, mma)) * 32;
}

int64_t mlir::attn::getKVBoxRows(TileAttr tile, int64_t headDim,
                                 BsrAttr format) {
  const int64_t N = tile.getKv();
  if (!format.isPaged())
    return N;
  const int64_t pageSize = format.getBlockCols();
  if (pageSize % N == 0)
    return N;
  // The producer warpgroup's copy rounds: its threads over a row's 16-byte
  // chunks.
  const int64_t rowsPerRound =
      getProducerWarps(tile, TileMMA::Wgmma) * 32 / (headDim / 8);
  if (pageSize < N && N % pageSize == 0 && pageSize % 8 == 0 &&
      rowsPerRound > 0 && pageSize % rowsPerRound == 0)
    return pageSize;
  return 0;
}

bool mlir::attn::isKVLoopPipelined(TileAttr tile, TileMMA mma) {
  return getProducerWarps(tile, mma) > 0 && tile.getStages() >= 3;
}

bool mlir::attn::movesRowMaxLazily(TileAttr tile, TileMMA mma) {
  return isKVLoopPipelined(tile, mma);
}

int64_t mlir::attn::getMergeSharedBytes(int64_t threads, int64_t rowsPerCta) {
  return rowsPerCta == 1 ? threads * 10 * 4 : 0;
}
