//===- TileHeuristicsTest.cpp - tile and GQA packing rules ----------------===//

#include "attn/Dialect/Attn/Transforms/TileHeuristics.h"

#include "mlir/IR/MLIRContext.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::attn;

TEST(TileHeuristics, QueryTileFollowsPackedRows) {
  EXPECT_EQ(chooseQueryTile(1), 16);
  EXPECT_EQ(chooseQueryTile(8), 16);  // decode, GQA group 8
  EXPECT_EQ(chooseQueryTile(16), 16);
  EXPECT_EQ(chooseQueryTile(17), 64);
  EXPECT_EQ(chooseQueryTile(64), 64);
  EXPECT_EQ(chooseQueryTile(8192), 128);
}

TEST(TileHeuristics, GqaPackFillsTheTile) {
  EXPECT_EQ(chooseGqaPack(/*group=*/8, /*rows=*/1, /*q=*/16), 8);
  EXPECT_EQ(chooseGqaPack(4, 1, 16), 4);
  EXPECT_EQ(chooseGqaPack(8, 4, 16), 4);   // 4 rows x 4 heads = 16
  EXPECT_EQ(chooseGqaPack(8, 512, 128), 1); // prefill: nothing to pack
  EXPECT_EQ(chooseGqaPack(1, 1, 16), 1);   // MHA
  EXPECT_EQ(chooseGqaPack(6, 1, 16), 2);   // largest power-of-two divisor
  EXPECT_EQ(chooseGqaPack(8, 1, 1), 1);    // CUDA-core tile
}

TEST(TileHeuristics, TilesFitTheChip) {
  MLIRContext ctx;
  ctx.loadDialect<AttnDialect>();
  for (StringRef chipName : {"sm_80", "sm_86", "sm_90"}) {
    std::optional<ChipInfo> chip = lookupChip(chipName);
    ASSERT_TRUE(chip);
    for (int64_t q : {16, 64, 128})
      for (int64_t d : {64, 128, 256}) {
        TileAttr tile = chooseTile(&ctx, q, d, *chip);
        EXPECT_EQ(tile.getQ(), q);
        EXPECT_LE(getTileSharedMemory(tile, d), chip->sharedMemoryPerBlock)
            << chipName.str() << " q " << q << " d " << d;
        EXPECT_GE(tile.getStages(), 1);
      }
  }
  EXPECT_FALSE(lookupChip("sm_75"));
}

TEST(TileHeuristics, DecodeTileIsTheMeasuredOne) {
  MLIRContext ctx;
  ctx.loadDialect<AttnDialect>();
  TileAttr tile = chooseTile(&ctx, 16, 128, *lookupChip("sm_90"));
  EXPECT_EQ(tile.getKv(), 16);
  EXPECT_EQ(tile.getWarps(), 3);
  EXPECT_EQ(tile.getStages(), 2);
  // 3 warps x 2 stages x (K + V) x 16 tokens x 128 x 2 bytes: 4 CTAs per SM.
  EXPECT_EQ(getTileSharedMemory(tile, 128), 49152);
}
