//===- FormatTest.cpp - KV format arithmetic ------------------------------===//
//
// Blocks per request, last-block lengths, index arrays and the views of a
// composed format: the arithmetic every pass and the kernel generator share.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/IR/MLIRContext.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::attn;

namespace {
class FormatTest : public ::testing::Test {
protected:
  FormatTest() { ctx.loadDialect<AttnDialect>(); }
  BsrAttr bsr(int64_t rows, int64_t cols,
              KVIndexing indexing = KVIndexing::paged) {
    return BsrAttr::get(&ctx, rows, cols, KVLayout::NHD, indexing,
                        /*strided=*/false);
  }
  MLIRContext ctx;
};
} // namespace

TEST_F(FormatTest, BlocksPerRequest) {
  BsrAttr paged = bsr(1, 16);
  EXPECT_EQ(paged.getNumBlocks(0), 0);
  EXPECT_EQ(paged.getNumBlocks(1), 1);
  EXPECT_EQ(paged.getNumBlocks(16), 1);
  EXPECT_EQ(paged.getNumBlocks(17), 2);
  EXPECT_EQ(paged.getNumBlocks(2048), 128);
  EXPECT_EQ(bsr(1, 1).getNumBlocks(37), 37);
}

TEST_F(FormatTest, LastBlockLength) {
  BsrAttr paged = bsr(1, 16);
  EXPECT_EQ(paged.getLastBlockLen(0), 0);
  EXPECT_EQ(paged.getLastBlockLen(1), 1);
  EXPECT_EQ(paged.getLastBlockLen(16), 16);
  EXPECT_EQ(paged.getLastBlockLen(17), 1);
  EXPECT_EQ(paged.getLastBlockLen(31), 15);
  EXPECT_EQ(bsr(1, 1).getLastBlockLen(5), 1);
}

TEST_F(FormatTest, KVLengthRoundTrips) {
  for (int64_t cols : {1, 16, 64})
    for (int64_t len = 0; len < 300; ++len) {
      BsrAttr f = bsr(1, cols);
      EXPECT_EQ(f.getKVLen(f.getNumBlocks(len), f.getLastBlockLen(len)), len)
          << "block_cols " << cols << " kv_len " << len;
    }
}

TEST_F(FormatTest, IndexArraysPerForm) {
  EXPECT_EQ(bsr(1, 16).getNumIndexArrays(), 4u);
  EXPECT_EQ(bsr(4, 1).getNumIndexArrays(), 3u); // column vector: no last_len
  EXPECT_EQ(bsr(1, 1, KVIndexing::ragged).getNumIndexArrays(), 2u);
  EXPECT_TRUE(bsr(4, 1).isColumnVector());
  EXPECT_FALSE(bsr(4, 1, KVIndexing::ragged).isColumnVector());
  SmallVector<StringRef> names = bsr(1, 16).getIndexArrayNames();
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[0], "qo_indptr");
  EXPECT_EQ(names[3], "kv_last_len");
}

TEST_F(FormatTest, ComposedViews) {
  BsrAttr prefix = bsr(64, 16), suffix = bsr(1, 16);
  auto composed = ComposedAttr::get(&ctx, {prefix, suffix});
  SmallVector<BsrAttr> views = getFormatViews(composed);
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0], prefix);
  EXPECT_EQ(views[1], suffix);
  EXPECT_EQ(composed.getNumIndexArrays(), 8u);
  // A plain BSR format is its own single view.
  EXPECT_EQ(getFormatViews(suffix).size(), 1u);
}

TEST_F(FormatTest, VerifierRejectsBadFormats) {
  auto noDiag = [&] { return emitError(UnknownLoc::get(&ctx)); };
  ctx.getDiagEngine().registerHandler([](Diagnostic &) { return success(); });
  EXPECT_TRUE(failed(BsrAttr::verify(noDiag, 1, 0, KVLayout::NHD,
                                     KVIndexing::paged, false)));
  EXPECT_TRUE(failed(BsrAttr::verify(noDiag, 1, 1 << 20, KVLayout::NHD,
                                     KVIndexing::paged, false)));
  // Any page size works, not only powers of two; block rows may vary.
  for (int64_t page : {3, 12, 48, 544})
    EXPECT_TRUE(succeeded(BsrAttr::verify(noDiag, 1, page, KVLayout::NHD,
                                          KVIndexing::paged, false)));
  EXPECT_TRUE(succeeded(BsrAttr::verify(noDiag, ShapedType::kDynamic, 16,
                                        KVLayout::NHD, KVIndexing::paged, false)));
  EXPECT_TRUE(failed(BsrAttr::verify(noDiag, 0, 16, KVLayout::NHD,
                                     KVIndexing::paged, false)));
  EXPECT_TRUE(failed(BsrAttr::verify(noDiag, 1, 16, KVLayout::NHD,
                                     KVIndexing::ragged, false)));
  EXPECT_TRUE(succeeded(BsrAttr::verify(noDiag, 7, 16, KVLayout::HND,
                                        KVIndexing::paged, false)));
  // Strided rows (a token and a head stride at launch) are for ragged K/V.
  EXPECT_TRUE(succeeded(BsrAttr::verify(noDiag, ShapedType::kDynamic, 1,
                                        KVLayout::NHD, KVIndexing::ragged,
                                        true)));
  EXPECT_TRUE(failed(BsrAttr::verify(noDiag, 1, 16, KVLayout::NHD,
                                     KVIndexing::paged, true)));
  EXPECT_TRUE(failed(ComposedAttr::verify(noDiag, {bsr(1, 16)})));
  EXPECT_TRUE(failed(ComposedAttr::verify(noDiag, {bsr(64, 16), bsr(1, 32)})));
}

TEST_F(FormatTest, BuiltinLibraryParses) {
  auto *dialect = ctx.getLoadedDialect<AttnDialect>();
  SmallVector<StringRef> names = dialect->getBuiltinVariantNames();
  for (StringRef expected : {"causal", "sliding_window", "soft_cap",
                             "logits_scale", "alibi", "rope", "rope_llama31",
                             "sinks"})
    EXPECT_TRUE(llvm::is_contained(names, expected)) << expected.str();
  auto causal = dyn_cast_or_null<VariantOp>(
      dialect->lookupBuiltinVariant("causal"));
  ASSERT_TRUE(causal);
  EXPECT_TRUE(causal.getHook(HookKind::logits_mask));
  EXPECT_FALSE(causal.getHook(HookKind::logits_transform));
  EXPECT_EQ(dialect->lookupBuiltinVariant("no_such_variant"), nullptr);
}
