//===- TileHeuristics.cpp - how attn picks tiles --------------------------===//
//
// Query tile from the packed query length (decode and short appends waste a
// 128-row tile, long prefills want it); KV tile, warps, stages and
// occupancy from the head dim and the chip; the planner's cost model. The
// numbers come from measurements on an H200 (bench/results/).
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Transforms/TileHeuristics.h"
#include "attn/Dialect/Attn/IR/TileLayout.h"
#include "attn/Runtime/Plan.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::attn;

int64_t mlir::attn::getExpectedQueryRows(AttentionOp op) {
  int64_t rows = op.getQuery().getType().getDimSize(0);
  auto qoIndptr = cast<ShapedType>(op.getViewIndices(0)[0].getType());
  int64_t batch = qoIndptr.getDimSize(0) - 1;
  if (!ShapedType::isDynamic(rows) &&
      !ShapedType::isDynamic(qoIndptr.getDimSize(0)) && batch > 0)
    return std::max<int64_t>(1, llvm::divideCeil(rows, batch));
  int64_t blockRows = std::numeric_limits<int64_t>::max();
  for (BsrAttr view : op.getViews()) {
    if (view.hasDynamicBlockRows())
      return ShapedType::kDynamic;
    blockRows = std::min(blockRows, view.getBlockRows());
  }
  return blockRows;
}

int64_t mlir::attn::chooseQueryTile(int64_t packedRows) {
  // The planner's rule over the candidates 16, 64, 128 (one definition).
  attnrt::TileCandidate candidates[3] = {};
  const int32_t tiles[3] = {16, 64, 128};
  for (int i = 0; i < 3; ++i) {
    candidates[i].q_rows = tiles[i];
    candidates[i].gqa_pack = 1;
  }
  int64_t rows = std::min<int64_t>(packedRows, 1 << 30);
  return candidates[attnrt::selectTileCandidate(
                        candidates, 3, int32_t(rows), 1)]
      .q_rows;
}

/// The shared memory `tile` needs for `headDim`.
static int64_t sharedBytes(MLIRContext *ctx, int64_t q, int64_t kv,
                           int64_t warps, int64_t stages, int64_t headDim) {
  return getTileSharedMemory(TileAttr::get(ctx, q, kv, warps, stages, 1, 1),
                             headDim)
      .bytes;
}

TileAttr mlir::attn::chooseTile(MLIRContext *ctx, int64_t q, int64_t headDim,
                                const TargetInfo &target) {
  const int64_t perBlock = target.getSharedMemoryPerBlock();
  const int64_t perSM = target.getSharedMemoryPerSM();
  if (q == 16) {
    // Decode is bound by DRAM: what matters is every CTA resident in one wave
    // and ~8 KB of loads in flight per warp. Measured on the H200 (bench/
    // results/2026-11-30-h200-decode-kernel.md): 3 warps x 2 stages of
    // 16-token tiles, 4 CTAs per SM for head_dim 128 (99% of copy
    // bandwidth); 4 warps fit only 3 CTAs (94%). 12 resident warps per SM is
    // the occupancy that kept D1 at the copy bandwidth.
    int64_t warps = headDim <= 128 ? 3 : 4, stages = 2;
    while (sharedBytes(ctx, q, 16, warps, stages, headDim) > perBlock) {
      if (stages > 1)
        --stages;
      else
        --warps;
    }
    int64_t bytes = sharedBytes(ctx, q, 16, warps, stages, headDim);
    int64_t ctas = std::clamp<int64_t>(12 / warps, 1, 8);
    while (ctas > 1 && ctas * bytes > perSM)
      --ctas;
    return TileAttr::get(ctx, q, /*kv=*/16, warps, stages, /*gqa_pack=*/1,
                         ctas);
  }
  // Prefill is bound by the tensor cores: K and V tiles near 16 KB each, two
  // stages. Measured on the H200 with the mma.sync kernel (bench/results/
  // 2026-11-30-h200-prefill-kernel.md): deeper pipelines cost registers the
  // 128-row tile needs (3 stages spill) and ran slower.
  int64_t kv = int64_t(llvm::bit_floor(uint64_t(8192 / headDim)));
  kv = std::clamp<int64_t>(kv, 16, q >= 128 ? 128 : 64);
  int64_t warps = q / 16;
  // On wgmma (sm_90a) the 128-row tile wants K and V tiles of 32 KB: measured
  // on the H200 (bench/results/2026-12-01-h200-session5.md, P1/P3 causal at
  // 8192 tokens) 64 -> 128 keys at head dim 128 gave 421 -> 463 TFLOP/s,
  // 128 -> 256 at 64 gave 309 -> 344, 32 -> 64 at 256 gave 409 -> 492; a
  // third stage ran slower (437).
  const bool wgmma = q >= 128 && getTileMMA(TileAttr::get(ctx, q, kv, warps, 2, 1, 1),
                                             headDim, target) == TileMMA::Wgmma;
  if (wgmma)
    kv = std::clamp<int64_t>(16384 / headDim, 16, 256);
  int64_t stages = 2;
  while (stages > 1 && sharedBytes(ctx, q, kv, warps, stages, headDim) > perBlock)
    --stages;
  while (kv > 16 && sharedBytes(ctx, q, kv, warps, stages, headDim) > perBlock)
    kv /= 2;
  // A third stage where it fits and S stays within 128 keys: the K/V loop is
  // then software-pipelined, the two warpgroups taking turns
  // (isKVLoopPipelined). Measured in the prefill rig on the H200 (bench/
  // NOTES.md v13), P1 at head dim 128: 540 TFLOP/s against 515 with two
  // stages in the same run, P2 equal; head dim 64 at 128 keys and three
  // stages 363 against 373 at 256 keys and two (two S tiles of 256 keys
  // spill); head dim 256 has no room for a third.
  // Head dim 64 on wgmma: three computing warpgroups on a 192-row tile of
  // 128 keys, two stages. The softmax bounds this head dim (taking the ex2s'
  // latency away made P3-d64 20% faster, bench/NOTES.md v25) and a third
  // warpgroup hides more of it behind the tensor cores: measured in the
  // prefill rig on an H100 (session 18), P3-d64 474.5 TFLOP/s against 407.7
  // for the 128-row tile of 256 keys; 64-key tiles ran at 394; in the
  // package's benchmark on an H100 (session 19, bench/NOTES.md v28) 403 ->
  // 454 in the same run.
  if (wgmma && q == 128 && headDim == 64) {
    TileAttr three = TileAttr::get(ctx, 192, 128, 12, 2, 1, 1);
    if (getTileSharedMemory(three, headDim, TileMMA::Wgmma).bytes <= perBlock)
      return three;
  }
  // Head dim 256 has room for neither a third stage nor 128 keys: its two
  // stages take the most keys that fit beside the Q tile, 80 (224 KB):
  // measured on an H100 (session 19, bench/NOTES.md v28), P3-d256 551 -> 574
  // TFLOP/s against 64 keys in the same run.
  if (wgmma && headDim == 256) {
    for (int64_t more = kv + 16;
         sharedBytes(ctx, q, more, warps, stages, headDim) <= perBlock;
         more += 16)
      kv = more;
  }
  if (wgmma && kv <= 128) {
    TileAttr three = TileAttr::get(ctx, q, kv, warps, 3, 1, 1);
    if (isKVLoopPipelined(three, TileMMA::Wgmma) &&
        getTileSharedMemory(three, headDim, TileMMA::Wgmma).bytes <= perBlock)
      stages = 3;
  }
  // A 64-row tile (four warps) keeps two CTAs per SM when their shared memory
  // fits: with short query tiles (speculative verification, short appends)
  // the kernel is bound by DRAM, and two CTAs keep twice the loads in flight;
  // four warps x 2 CTAs may still use every register (255 per thread).
  int64_t ctas = 1;
  if (q == 64 && 2 * sharedBytes(ctx, q, kv, warps, stages, headDim) <= perSM)
    ctas = 2;
  return TileAttr::get(ctx, q, kv, warps, stages, /*gqa_pack=*/1, ctas);
}

int64_t mlir::attn::chooseGqaPack(int64_t group, int64_t rows, int64_t q) {
  if (q <= 1 || rows <= 0 || group <= 1)
    return 1;
  for (int64_t pack = std::min(group, q / rows); pack > 1; --pack)
    if (group % pack == 0)
      return pack;
  return 1;
}

bool mlir::attn::canLoadKVByTMA(TileAttr tile, int64_t headDim,
                                const TargetInfo &target) {
  return target.hasTMA() &&
         getProducerWarps(tile, getTileMMA(tile, headDim, target)) > 0;
}

TileAttr mlir::attn::withKVByTMA(TileAttr tile, int64_t headDim,
                                 const TargetInfo &target) {
  if (tile.getKvTma() || !canLoadKVByTMA(tile, headDim, target))
    return tile;
  return TileAttr::get(tile.getContext(), tile.getQ(), tile.getKv(),
                       tile.getWarps(), tile.getStages(), tile.getGqaPack(),
                       tile.getCtasPerSm(), /*kv_tma=*/true);
}

LogicalResult
mlir::attn::checkTileFits(TileAttr tile, int64_t headDim,
                          const TargetInfo &target,
                          function_ref<InFlightDiagnostic()> emitError) {
  TileMMA mma = getTileMMA(tile, headDim, target);
  if (tile.getQ() == 192 && mma != TileMMA::Wgmma)
    return emitError() << "tile " << tile << " takes three computing "
                       << "warpgroups, which only the wgmma lowering has (sm_90a, "
                       << "head dim a multiple of 64); " << target.getName()
                       << " with head dim " << headDim << " lowers to mma.sync";
  if (tile.getKvTma() && !canLoadKVByTMA(tile, headDim, target))
    return emitError() << "tile " << tile << " loads K/V by TMA, which only "
                       << "the warp-specialized wgmma kernel's producer issues "
                       << "(sm_90a, head dim a multiple of 64, q >= 128, "
                       << "ctas_per_sm = 1); " << target.getName()
                       << " with head dim " << headDim << " lowers it to "
                       << (mma == TileMMA::Wgmma ? "wgmma without a producer"
                                                 : "mma.sync");
  int64_t bytes = getTileSharedMemory(tile, headDim, mma).bytes;
  int64_t threads = getTileThreads(tile, mma);
  if (bytes > target.getSharedMemoryPerBlock())
    return emitError() << "tile " << tile << " needs " << bytes
                       << " bytes of shared memory with head dim " << headDim
                       << "; " << target.getName() << " gives a CTA at most "
                       << target.getSharedMemoryPerBlock();
  if (tile.getCtasPerSm() * bytes > target.getSharedMemoryPerSM())
    return emitError() << "tile " << tile << " keeps " << tile.getCtasPerSm()
                       << " CTAs of " << bytes
                       << " bytes of shared memory on an SM; "
                       << target.getName() << " has "
                       << target.getSharedMemoryPerSM();
  if (threads * tile.getCtasPerSm() > target.getMaxThreadsPerSM())
    return emitError() << "tile " << tile << " keeps "
                       << threads * tile.getCtasPerSm()
                       << " threads on an SM; " << target.getName()
                       << " holds " << target.getMaxThreadsPerSM();
  return success();
}

TileCost mlir::attn::getTileCost(TileAttr tile) {
  TileCost cost;
  if (tile.warpsSplitKeys()) {
    // A decode item's fixed cost is about 128 keys' worth (the query load,
    // the warps' merge and the write); splitting KV below ~512 keys costs
    // more in merging than it gains in balance (measured on the H200,
    // bench/results/*split-decode.md).
    cost.perItem = 128;
    cost.minChunk = 512;
    return cost;
  }
  // A prefill item pays about two KV tiles' worth for its Q load, its first
  // and last steps and its epilogue (measured: 1.3-2.2 tiles at the 128-row
  // tile of head dim 128, bench/harness/item_cost.py).
  cost.perItem = 2 * tile.getKv();
  return cost;
}
