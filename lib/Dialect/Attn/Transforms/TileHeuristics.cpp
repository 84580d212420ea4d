//===- TileHeuristics.cpp - how attn picks tiles --------------------------===//
//
// Query tile from the packed query length (FlashInfer's observation: decode
// and short appends waste a 128-row tile, long prefills want it); KV tile,
// warps and stages from the head dim and the chip's shared memory.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Transforms/TileHeuristics.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::attn;

std::optional<ChipInfo> mlir::attn::lookupChip(StringRef name) {
  // Opt-in dynamic shared memory per block, from the CUDA programming guide.
  int64_t smem = llvm::StringSwitch<int64_t>(name)
                     .Case("sm_80", 163 * 1024)
                     .Cases({"sm_86", "sm_89"}, 99 * 1024)
                     .Cases({"sm_90", "sm_90a"}, 227 * 1024)
                     .Default(0);
  if (!smem)
    return std::nullopt;
  return ChipInfo{name, smem};
}

int64_t mlir::attn::getExpectedQueryRows(AttentionOp op) {
  int64_t rows = op.getQuery().getType().getDimSize(0);
  auto qoIndptr = cast<RankedTensorType>(op.getViewIndices(0)[0].getType());
  int64_t batch = qoIndptr.getDimSize(0) - 1;
  if (!ShapedType::isDynamic(rows) &&
      !ShapedType::isDynamic(qoIndptr.getDimSize(0)) && batch > 0)
    return std::max<int64_t>(1, llvm::divideCeil(rows, batch));
  int64_t blockRows = std::numeric_limits<int64_t>::max();
  for (BsrAttr view : op.getViews())
    blockRows = std::min(blockRows, view.getBlockRows());
  return blockRows;
}

int64_t mlir::attn::chooseQueryTile(int64_t packedRows) {
  if (packedRows <= 16)
    return 16;
  if (packedRows <= 64)
    return 64;
  return 128;
}

static int64_t sharedMemory(int64_t q, int64_t kv, int64_t warps,
                            int64_t stages, int64_t headDim) {
  constexpr int64_t elementBytes = 2;
  if (q == 16)
    return warps * stages * 2 * kv * headDim * elementBytes;
  return (q * headDim + stages * 2 * kv * headDim) * elementBytes;
}

int64_t mlir::attn::getTileSharedMemory(TileAttr tile, int64_t headDim) {
  return sharedMemory(tile.getQ(), tile.getKv(), tile.getWarps(),
                      tile.getStages(), headDim);
}

TileAttr mlir::attn::chooseTile(MLIRContext *ctx, int64_t q, int64_t headDim,
                                const ChipInfo &chip) {
  if (q == 16) {
    // Decode is bound by DRAM: what matters is every CTA resident in one wave
    // and ~8 KB of loads in flight per warp. Measured on the H200 (bench/
    // results/2026-11-30-h200-decode-kernel.md): 3 warps x 2 stages of
    // 16-token tiles fit 4 CTAs per SM for head_dim 128 (99% of copy
    // bandwidth); 4 warps fit only 3 CTAs (94%).
    int64_t warps = headDim <= 128 ? 3 : 4, stages = 2;
    while (sharedMemory(q, 16, warps, stages, headDim) >
           chip.sharedMemoryPerBlock) {
      if (stages > 1)
        --stages;
      else
        --warps;
    }
    return TileAttr::get(ctx, q, /*kv=*/16, warps, stages, /*gqa_pack=*/1);
  }
  // Prefill is bound by the tensor cores: K and V tiles near 16 KB each, two
  // stages. Measured on the H200 with the mma.sync kernel (bench/results/
  // 2026-11-30-h200-prefill-kernel.md): deeper pipelines cost registers the
  // 128-row tile needs (3 stages spill) and ran slower.
  int64_t kv = std::clamp<int64_t>(8192 / headDim, 16, q >= 128 ? 128 : 64);
  int64_t warps = q / 16;
  int64_t stages = 2;
  while (stages > 1 &&
         sharedMemory(q, kv, warps, stages, headDim) > chip.sharedMemoryPerBlock)
    --stages;
  while (kv > 16 &&
         sharedMemory(q, kv, warps, stages, headDim) > chip.sharedMemoryPerBlock)
    kv /= 2;
  return TileAttr::get(ctx, q, kv, warps, stages, /*gqa_pack=*/1);
}

int64_t mlir::attn::chooseGqaPack(int64_t group, int64_t rows, int64_t q) {
  int64_t pack = 1;
  if (q <= 1 || rows <= 0)
    return pack;
  while (group % (pack * 2) == 0 && rows * pack * 2 <= q)
    pack *= 2;
  return pack;
}
