//===- TileHeuristicsTest.cpp - tile, packing and target rules ------------===//

#include "attn/Dialect/Attn/IR/TileLayout.h"
#include "attn/Dialect/Attn/Transforms/TileHeuristics.h"
#include "attn/Dialect/Attn/Utils/TargetInfo.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::attn;

TEST(TileHeuristics, QueryTileFollowsPackedRows) {
  EXPECT_EQ(chooseQueryTile(1), 16);
  EXPECT_EQ(chooseQueryTile(8), 16);  // decode, GQA group 8
  EXPECT_EQ(chooseQueryTile(16), 16);
  EXPECT_EQ(chooseQueryTile(17), 64);
  EXPECT_EQ(chooseQueryTile(32), 64); // 8 speculative tokens x group 4
  EXPECT_EQ(chooseQueryTile(64), 64);
  EXPECT_EQ(chooseQueryTile(8192), 128);
}

TEST(TileHeuristics, GqaPackFillsTheTile) {
  EXPECT_EQ(chooseGqaPack(/*group=*/8, /*rows=*/1, /*q=*/16), 8);
  EXPECT_EQ(chooseGqaPack(4, 1, 16), 4);
  EXPECT_EQ(chooseGqaPack(8, 4, 16), 4);    // 4 rows x 4 heads = 16
  EXPECT_EQ(chooseGqaPack(8, 512, 128), 1); // prefill: nothing to pack
  EXPECT_EQ(chooseGqaPack(1, 1, 16), 1);    // MHA
  EXPECT_EQ(chooseGqaPack(6, 1, 16), 6);    // the whole group fits
  EXPECT_EQ(chooseGqaPack(7, 1, 16), 7);    // Qwen2's group of 7
  EXPECT_EQ(chooseGqaPack(7, 4, 16), 1);    // 4 rows x 7 heads do not
  EXPECT_EQ(chooseGqaPack(32, 1, 16), 16);  // MQA: the largest divisor
  EXPECT_EQ(chooseGqaPack(8, 1, 1), 1);     // CUDA-core tile
}

TEST(TargetInfo, KnowsTheChipsItGeneratesFor) {
  std::optional<TargetInfo> h = TargetInfo::lookup("sm_90a");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->getSMVersion(), 90);
  EXPECT_TRUE(h->isArchSpecific());
  EXPECT_TRUE(h->hasWgmma());
  EXPECT_TRUE(h->hasPDL());
  EXPECT_EQ(h->getSharedMemoryPerBlock(), 227 * 1024);
  EXPECT_EQ(h->getMinPTXVersion(), 80);
  std::optional<TargetInfo> plain = TargetInfo::lookup("sm_90");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->hasWgmma());
  std::optional<TargetInfo> a100 = TargetInfo::lookup("sm_80");
  ASSERT_TRUE(a100);
  EXPECT_FALSE(a100->hasPDL());
  EXPECT_EQ(a100->getSharedMemoryPerBlock(), 163 * 1024);
  EXPECT_FALSE(TargetInfo::lookup("sm_75"));
  llvm::Expected<TargetInfo> bad = TargetInfo::get("sm_75");
  ASSERT_FALSE(bool(bad));
  std::string message = llvm::toString(bad.takeError());
  EXPECT_NE(message.find("unknown chip 'sm_75'"), std::string::npos) << message;
  EXPECT_NE(message.find("sm_80"), std::string::npos) << message;
}

TEST(TargetInfo, HeadDimsAreMultiplesOf16UpTo256) {
  for (int64_t d : {16, 64, 80, 96, 128, 192, 256})
    EXPECT_FALSE(bool(TargetInfo::checkHeadDim(d))) << d;
  for (int64_t d : {0, 8, 72, 100, 272}) {
    llvm::Error err = TargetInfo::checkHeadDim(d);
    ASSERT_TRUE(bool(err)) << d;
    EXPECT_NE(llvm::toString(std::move(err)).find(std::to_string(d)),
              std::string::npos);
  }
}

TEST(TileHeuristics, TilesFitTheChip) {
  MLIRContext ctx;
  ctx.loadDialect<AttnDialect>();
  for (StringRef chipName : {"sm_80", "sm_86", "sm_90"}) {
    std::optional<TargetInfo> chip = TargetInfo::lookup(chipName);
    ASSERT_TRUE(chip);
    for (int64_t q : {16, 64, 128})
      for (int64_t d : {64, 80, 96, 128, 192, 256}) {
        TileAttr tile = chooseTile(&ctx, q, d, *chip);
        EXPECT_EQ(tile.getQ(), q);
        int64_t bytes = getTileSharedMemory(tile, d).bytes;
        EXPECT_LE(bytes, chip->getSharedMemoryPerBlock())
            << chipName.str() << " q " << q << " d " << d;
        EXPECT_LE(bytes * tile.getCtasPerSm(), chip->getSharedMemoryPerSM());
        EXPECT_GE(tile.getStages(), 1);
        EXPECT_TRUE(succeeded(checkTileFits(tile, d, *chip, [&] {
          return emitError(UnknownLoc::get(&ctx));
        })));
      }
  }
}

TEST(TileHeuristics, DecodeTileIsTheMeasuredOne) {
  MLIRContext ctx;
  ctx.loadDialect<AttnDialect>();
  TileAttr tile = chooseTile(&ctx, 16, 128, *TargetInfo::lookup("sm_90"));
  EXPECT_EQ(tile.getKv(), 16);
  EXPECT_EQ(tile.getWarps(), 3);
  EXPECT_EQ(tile.getStages(), 2);
  EXPECT_EQ(tile.getCtasPerSm(), 4);
  // 3 warps x 2 stages x (K + V) x 16 tokens x 128 x 2 bytes, then each
  // warp's max and sum: 4 CTAs per SM.
  TileSharedMemory smem = getTileSharedMemory(tile, 128);
  EXPECT_TRUE(smem.swizzled);
  EXPECT_EQ(smem.statsOffset, 49152);
  EXPECT_EQ(smem.bytes, 49152 + 3 * 2 * 16 * 4);
}

TEST(TileLayout, PadsRowsWhenChunksCannotSwizzle) {
  MLIRContext ctx;
  ctx.loadDialect<AttnDialect>();
  TileAttr tile = TileAttr::get(&ctx, 128, 64, 8, 2, 1, 1);
  TileSharedMemory d128 = getTileSharedMemory(tile, 128);
  EXPECT_TRUE(d128.swizzled);
  EXPECT_EQ(d128.rowElements, 128);
  EXPECT_EQ(d128.kRow, 128);
  EXPECT_EQ(d128.vRow, 128 + 2 * 64);
  EXPECT_EQ(d128.bytes, (128 + 4 * 64) * 128 * 2);
  // 96 = 12 chunks: XOR with row % 8 would leave the row; an odd number of
  // chunks per row (13) spreads 8 rows over 8 bank groups instead.
  TileSharedMemory d96 = getTileSharedMemory(tile, 96);
  EXPECT_FALSE(d96.swizzled);
  EXPECT_EQ(d96.rowElements, 104);
  EXPECT_EQ(d96.bytes, (128 + 4 * 64) * 104 * 2);
}

TEST(TileLayout, SwizzledTallTilesAreColumnBlocksOf128Bytes) {
  MLIRContext ctx;
  ctx.loadDialect<AttnDialect>();
  TileAttr tile = TileAttr::get(&ctx, 128, 64, 8, 2, 1, 1);
  // wgmma's 128-byte swizzle atoms: each row as 64-element blocks, block b
  // of every row in its own region; the bytes do not change.
  TileSharedMemory d256 = getTileSharedMemory(tile, 256);
  EXPECT_EQ(d256.columnBlocks, 4);
  EXPECT_EQ(d256.blockElements, 64);
  EXPECT_EQ(d256.totalRows % 8, 0);
  EXPECT_EQ(d256.bytes, d256.columnBlocks * d256.totalRows * 64 * 2);
  TileSharedMemory d96 = getTileSharedMemory(tile, 96);
  EXPECT_EQ(d96.columnBlocks, 1);
  EXPECT_EQ(d96.blockElements, d96.rowElements);
  // Decode tiles keep whole swizzled rows (their warps' rings and merge
  // buffers share the bytes).
  TileAttr decode = TileAttr::get(&ctx, 16, 16, 3, 2, 1, 4);
  TileSharedMemory dec = getTileSharedMemory(decode, 128);
  EXPECT_EQ(dec.columnBlocks, 1);
  EXPECT_EQ(dec.blockElements, 128);
}

TEST(TileLayout, WgmmaTakesWholeWarpgroupsOfSwizzledRows) {
  MLIRContext ctx;
  ctx.loadDialect<AttnDialect>();
  TargetInfo sm90a = *TargetInfo::lookup("sm_90a");
  TargetInfo sm90 = *TargetInfo::lookup("sm_90");
  TileAttr q128 = TileAttr::get(&ctx, 128, 128, 8, 2, 1, 1);
  TileAttr q64 = TileAttr::get(&ctx, 64, 64, 4, 2, 1, 2);
  TileAttr decode = TileAttr::get(&ctx, 16, 16, 3, 2, 1, 4);
  EXPECT_EQ(getTileMMA(q128, 128, sm90a), TileMMA::Wgmma);
  EXPECT_EQ(getTileMMA(q64, 64, sm90a), TileMMA::Wgmma);
  EXPECT_EQ(getTileMMA(q128, 256, sm90a), TileMMA::Wgmma);
  // Plain sm_90 has no wgmma; decode tiles split keys per warp; head dim 96
  // is not whole 128-byte blocks; 6 warps are not whole warpgroups.
  EXPECT_EQ(getTileMMA(q128, 128, sm90), TileMMA::MmaSync);
  EXPECT_EQ(getTileMMA(decode, 128, sm90a), TileMMA::MmaSync);
  EXPECT_EQ(getTileMMA(q128, 96, sm90a), TileMMA::MmaSync);
  EXPECT_EQ(getTileMMA(TileAttr::get(&ctx, 96, 64, 6, 2, 1, 1), 128, sm90a),
            TileMMA::MmaSync);
  // One CTA per SM: a producer warpgroup joins, and the ring's mbarriers
  // (full and empty per stage) follow the tiles; two CTAs per SM leave no
  // registers for it.
  EXPECT_EQ(getProducerWarps(q128, TileMMA::Wgmma), 4);
  EXPECT_EQ(getTileThreads(q128, TileMMA::Wgmma), 384);
  EXPECT_EQ(getProducerWarps(q64, TileMMA::Wgmma), 0);
  EXPECT_EQ(getTileThreads(q64, TileMMA::Wgmma), 128);
  EXPECT_EQ(getTileThreads(q128, TileMMA::MmaSync), 256);
  TileSharedMemory plain = getTileSharedMemory(q128, 128);
  TileSharedMemory ring = getTileSharedMemory(q128, 128, TileMMA::Wgmma);
  EXPECT_EQ(ring.barrierOffset, plain.bytes);
  EXPECT_EQ(ring.bytes, plain.bytes + 2 * 2 * 8);
  // The tile chooser gives the wgmma tile its 32 KB K/V tiles.
  EXPECT_EQ(chooseTile(&ctx, 128, 128, sm90a).getKv(), 128);
  // Head dim 64 on wgmma: three computing warpgroups, 128-key tiles.
  TileAttr d64 = chooseTile(&ctx, 128, 64, sm90a);
  EXPECT_EQ(d64.getQ(), 192);
  EXPECT_EQ(d64.getWarps(), 12);
  EXPECT_EQ(d64.getKv(), 128);
  EXPECT_EQ(d64.getStages(), 2);
  EXPECT_EQ(chooseTile(&ctx, 128, 64, sm90).getQ(), 128);
  // A 192-row tile is three computing warpgroups: wgmma on sm_90a, 512
  // threads with the producer's.
  TileAttr q192 = TileAttr::get(&ctx, 192, 128, 12, 2, 4, 1);
  EXPECT_EQ(getTileMMA(q192, 64, sm90a), TileMMA::Wgmma);
  EXPECT_EQ(getTileThreads(q192, TileMMA::Wgmma), 512);
  EXPECT_EQ(getTileMMA(q192, 64, sm90), TileMMA::MmaSync);
  // Head dim 256: the most keys two stages hold beside the Q tile.
  TileAttr d256 = chooseTile(&ctx, 128, 256, sm90a);
  EXPECT_EQ(d256.getKv(), 80);
  EXPECT_EQ(d256.getStages(), 2);
  EXPECT_LE(getTileSharedMemory(d256, 256, TileMMA::Wgmma).bytes,
            sm90a.getSharedMemoryPerBlock());
  EXPECT_EQ(chooseTile(&ctx, 128, 128, sm90).getKv(), 64);
  // The lazy running max (measured faster only there): the pipelined
  // loop's tile, not head dim 64's 192 rows nor 256's two stages.
  TileAttr d128 = chooseTile(&ctx, 128, 128, sm90a);
  EXPECT_TRUE(isKVLoopPipelined(d128, TileMMA::Wgmma));
  EXPECT_TRUE(movesRowMaxLazily(d128, TileMMA::Wgmma));
  EXPECT_FALSE(movesRowMaxLazily(d64, TileMMA::Wgmma));
  EXPECT_FALSE(movesRowMaxLazily(d256, TileMMA::Wgmma));
  EXPECT_FALSE(movesRowMaxLazily(d128, TileMMA::MmaSync));
}

TEST(TileHeuristics, OnlyTheWarpSpecializedTileLoadsKVByTMA) {
  MLIRContext ctx;
  ctx.loadDialect<AttnDialect>();
  TargetInfo sm90a = *TargetInfo::lookup("sm_90a");
  TargetInfo sm90 = *TargetInfo::lookup("sm_90");
  TileAttr q128 = chooseTile(&ctx, 128, 128, sm90a);
  EXPECT_FALSE(q128.getKvTma()); // cp.async unless asked for (kv-tma)
  EXPECT_TRUE(canLoadKVByTMA(q128, 128, sm90a));
  TileAttr tma = withKVByTMA(q128, 128, sm90a);
  EXPECT_TRUE(tma.getKvTma());
  EXPECT_EQ(tma.getKv(), q128.getKv());
  EXPECT_EQ(tma.getStages(), q128.getStages());
  // No producer warpgroup: mma.sync (sm_90, head dim 96) or the 64-row tile.
  EXPECT_FALSE(canLoadKVByTMA(chooseTile(&ctx, 128, 128, sm90), 128, sm90));
  EXPECT_FALSE(canLoadKVByTMA(q128, 96, sm90a));
  TileAttr q64 = chooseTile(&ctx, 64, 128, sm90a);
  EXPECT_EQ(withKVByTMA(q64, 128, sm90a), q64);
  EXPECT_EQ(withKVByTMA(chooseTile(&ctx, 16, 128, sm90a), 128, sm90a),
            chooseTile(&ctx, 16, 128, sm90a));

  // A box is the tile (ragged K/V, pages holding whole tiles) or one page
  // (a multiple of 8 keys dividing the tile and of the producer's 1024 /
  // head_dim rows per copy round); other pages have none.
  auto ragged = BsrAttr::get(&ctx, ShapedType::kDynamic, 1, KVLayout::NHD,
                             KVIndexing::ragged, false);
  auto pages = [&](int64_t size) {
    return BsrAttr::get(&ctx, ShapedType::kDynamic, size, KVLayout::NHD,
                        KVIndexing::paged, false);
  };
  EXPECT_EQ(getKVBoxRows(tma, 128, ragged), 128);
  EXPECT_EQ(getKVBoxRows(tma, 128, pages(256)), 128);
  EXPECT_EQ(getKVBoxRows(tma, 128, pages(128)), 128);
  EXPECT_EQ(getKVBoxRows(tma, 128, pages(16)), 16);
  EXPECT_EQ(getKVBoxRows(tma, 128, pages(8)), 8);
  EXPECT_EQ(getKVBoxRows(tma, 64, pages(8)), 0); // 16 rows per copy round
  EXPECT_EQ(getKVBoxRows(tma, 128, pages(48)), 0);
  EXPECT_EQ(getKVBoxRows(tma, 128, pages(3)), 0);
  EXPECT_EQ(getKVBoxRows(tma, 128, pages(1)), 0);
}

TEST(TileHeuristics, ATileTooBigForTheChipIsNamed) {
  MLIRContext ctx;
  ctx.loadDialect<AttnDialect>();
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  TileAttr tile = TileAttr::get(&ctx, 128, 128, 8, 4, 1, 1);
  EXPECT_TRUE(failed(checkTileFits(tile, 256, *TargetInfo::lookup("sm_86"), [&] {
    return emitError(UnknownLoc::get(&ctx));
  })));
  EXPECT_NE(message.find("bytes of shared memory"), std::string::npos)
      << message;
  EXPECT_NE(message.find(std::to_string(99 * 1024)), std::string::npos)
      << message;
}

TEST(TileHeuristics, CostModelPerTileKind) {
  MLIRContext ctx;
  ctx.loadDialect<AttnDialect>();
  TileCost decode = getTileCost(TileAttr::get(&ctx, 16, 16, 3, 2, 4, 4));
  EXPECT_EQ(decode.perItem, 128);
  EXPECT_EQ(decode.minChunk, 512);
  TileCost prefill = getTileCost(TileAttr::get(&ctx, 128, 64, 8, 2, 1, 1));
  EXPECT_EQ(prefill.perItem, 128);
  EXPECT_EQ(prefill.perKVToken, 1);
  EXPECT_EQ(prefill.minChunk, 0);
}
