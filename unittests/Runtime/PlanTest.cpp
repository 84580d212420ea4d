//===- PlanTest.cpp - Planner validation, coverage and balance ------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Checks the planner without any attention math: bad input is refused with a
// message naming it; every query tile's visible KV range is covered exactly once
// by its chunks (so every KV block of every head is read once); slots and merge
// units are consistent; skewed batches are balanced within 10%; plans are
// deterministic; graph mode keeps the grid and layout fixed.
//
//===----------------------------------------------------------------------===//

#include "PlanCheck.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <tuple>

using namespace attnrt;
using namespace attnrt::test;

namespace {

/// Largest CTA cost over the mean over `ctas` CTAs (0: the plan's CTAs).
double imbalance(const PlanConfig &c, const PlanView &v, int64_t ctas = 0) {
  std::vector<int64_t> costs(v.numCtas());
  planCtaCosts(c, v, costs.data());
  int64_t total = 0, big = 0;
  for (int64_t x : costs) {
    total += x;
    big = std::max(big, x);
  }
  return double(big) / (double(total) / (ctas ? ctas : v.numCtas()));
}

/// docs/Benchmarks.md D3: 64 decode requests, four of 32768 tokens (the positions of
/// torch.randperm(64, generator seeded 0)[:4]; the planner does not care which),
/// the rest 512.
std::vector<std::pair<int32_t, int32_t>> skewedDecode() {
  std::vector<std::pair<int32_t, int32_t>> lens(64, {1, 512});
  for (int i : {4, 17, 33, 58})
    lens[i].second = 32768;
  return lens;
}

PlanConfig defaultDecodeConfig(const Batch &b) {
  // 32 query / 8 KV heads, GQA group 4 packed into a 16-row tile.
  return makeConfig(32, 8, 128, b.block_size, 132, 16, 64, 4, b);
}

} // namespace

TEST(PlanLayout, SizingIsAFunctionOfTheConfig) {
  Batch b = makeBatch({{1, 100}, {3, 40}}, 16, 1);
  PlanConfig c = defaultDecodeConfig(b);
  PlanLayout l;
  ASSERT_TRUE(computePlanLayout(c, &l).ok());
  EXPECT_EQ(planHostWorkspaceBytes(c), l.host_bytes);
  EXPECT_EQ(planDeviceWorkspaceBytes(c), l.device_bytes);
  EXPECT_EQ(l.partial_o_offset % kDeviceAlign, 0u);
  EXPECT_GE(l.partial_lse_offset,
            l.partial_o_offset + size_t(l.partial_rows) * 128 * 4);
  EXPECT_EQ(l.max_ctas, 132);
}

TEST(PlanValidation, RefusesBadInputWithAMessageNamingIt) {
  Batch b = makeBatch({{1, 100}, {3, 40}, {2, 17}}, 16, 2);
  PlanConfig c = defaultDecodeConfig(b);
  std::vector<int32_t> ws;
  auto expectError = [&](const PlanConfig &cc, const PlanInputs &in,
                         StatusCode code, const char *needle) {
    Status s = planInto(cc, in, &ws);
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  {
    Batch bad = b;
    bad.qo_indptr[2] = 0;
    expectError(c, inputsOf(bad), StatusCode::NonMonotoneIndptr, "qo_indptr");
  }
  {
    Batch bad = b;
    bad.kv_indptr[1] = bad.kv_indptr[2] + 1;
    expectError(c, inputsOf(bad), StatusCode::NonMonotoneIndptr, "kv_indptr");
  }
  {
    Batch bad = b;
    bad.kv_indices[3] = bad.num_blocks;
    expectError(c, inputsOf(bad), StatusCode::BlockIndexOutOfRange, "kv_indices[3]");
    bad.kv_indices[3] = -1;
    expectError(c, inputsOf(bad), StatusCode::BlockIndexOutOfRange, "kv_indices[3]");
  }
  for (int32_t last : {0, 17}) {
    Batch bad = b;
    bad.kv_last_len[1] = last;
    expectError(c, inputsOf(bad), StatusCode::LastBlockLenOutOfRange,
                "kv_last_len[1]");
  }
  {
    PlanInputs in = inputsOf(b);
    std::vector<int32_t> lens = {100, 40, 33};
    in.kv_lens = lens.data();
    expectError(c, in, StatusCode::LastBlockLenOutOfRange, "kv_lens[2]");
  }
  {
    PlanConfig bad = c;
    bad.num_kv_heads = 5;
    expectError(bad, inputsOf(b), StatusCode::HeadCountMismatch, "num_kv_heads");
    bad = c;
    bad.candidates[0].gqa_pack = 3;
    expectError(bad, inputsOf(b), StatusCode::HeadCountMismatch, "gqa_pack");
  }
  {
    PlanConfig bad = c;
    bad.max_batch = 2;
    bad.graph_mode = 1;
    expectError(bad, inputsOf(b), StatusCode::GraphMaximaExceeded, "max_batch");
    bad = c;
    bad.max_total_q_rows = 5;
    expectError(bad, inputsOf(b), StatusCode::GraphMaximaExceeded,
                "max_total_q_rows");
  }
  {
    std::vector<int32_t> small(8);
    Status s = plan(c, inputsOf(b), small.data(), small.size() * 4);
    EXPECT_EQ(s.code(), StatusCode::WorkspaceTooSmall);
    EXPECT_NE(s.message().find("needs"), std::string::npos);
  }
  {
    PlanInputs in = inputsOf(b);
    in.kv_last_len = nullptr;
    expectError(c, in, StatusCode::InvalidArgument, "kv_last_len");
  }
  {
    // 2^27 blocks of 16 tokens: more than int32 tokens, with no indices.
    Batch bad = b;
    bad.kv_indptr[3] = bad.kv_indptr[2] + (1 << 27);
    expectError(c, inputsOf(bad, false), StatusCode::InvalidArgument,
                "request 2 has too many KV tokens");
    PlanInputs in = inputsOf(b);
    in.num_cache_blocks = 0;
    expectError(c, in, StatusCode::InvalidArgument, "num_cache_blocks");
  }
  {
    // Several errors: the first in validation order is named (the monotone
    // checks of every request come before the block lengths).
    Batch bad = b;
    bad.kv_last_len[0] = 0;
    bad.qo_indptr[3] = bad.qo_indptr[2] - 1;
    expectError(c, inputsOf(bad), StatusCode::NonMonotoneIndptr,
                "qo_indptr is not monotone at request 2");
    bad.qo_indptr = b.qo_indptr;
    bad.kv_indices[0] = -1;
    expectError(c, inputsOf(bad), StatusCode::LastBlockLenOutOfRange,
                "kv_last_len[0]");
  }
}

struct CoverageCase {
  const char *name;
  std::vector<std::pair<int32_t, int32_t>> lens;
  int32_t blockSize, hq, hkv, pack, qRows, sms;
  int32_t causal = 0, window = -1, graph = 0;
};

void PrintTo(const CoverageCase &c, std::ostream *os) { *os << c.name; }

class PlanCoverage : public ::testing::TestWithParam<CoverageCase> {};

TEST_P(PlanCoverage, EveryKeyOfEveryTileExactlyOnce) {
  const CoverageCase &k = GetParam();
  Batch b = makeBatch(k.lens, k.blockSize, 7);
  PlanConfig c = makeConfig(k.hq, k.hkv, 128, k.blockSize, k.sms, k.qRows, 64,
                            k.pack, b);
  c.causal = k.causal;
  c.window_left = k.window;
  c.graph_mode = k.graph;
  std::vector<int32_t> ws;
  Status s = planInto(c, inputsOf(b), &ws);
  ASSERT_TRUE(s.ok()) << s.message();
  PlanView v;
  Status vs = viewPlan(ws.data(), ws.size() * 4, &v);
  ASSERT_TRUE(vs.ok()) << vs.message();
  checkPlan(c, b, v);
}

static std::vector<std::pair<int32_t, int32_t>> uniform(int n, int qo, int kv) {
  return std::vector<std::pair<int32_t, int32_t>>(n, {qo, kv});
}

static std::vector<std::pair<int32_t, int32_t>> randomLens(int n, int maxQo,
                                                           int maxKv, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::pair<int32_t, int32_t>> v;
  for (int i = 0; i < n; ++i) {
    int32_t qo = std::uniform_int_distribution<int32_t>(0, maxQo)(rng);
    int32_t kv = std::uniform_int_distribution<int32_t>(0, maxKv)(rng);
    v.push_back({qo, kv});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    Batches, PlanCoverage,
    ::testing::Values(
        CoverageCase{"decode_uniform_bs16_gqa4", uniform(64, 1, 2048), 16, 32, 8, 4, 16, 132},
        CoverageCase{"decode_skewed_bs16_gqa4", skewedDecode(), 16, 32, 8, 4, 16, 132},
        CoverageCase{"decode_131072_bs16_gqa8", uniform(1, 1, 131072), 16, 64, 8, 8, 16, 132},
        CoverageCase{"decode_131072_bs1_gqa1", uniform(1, 1, 131072), 1, 8, 8, 1, 16, 132},
        CoverageCase{"empty_requests_bs64", {{0, 0}, {1, 70}, {0, 300}, {2, 0}, {1, 1}}, 64, 8, 2, 4, 16, 16},
        CoverageCase{"random_bs1_gqa1", randomLens(40, 9, 900, 3), 1, 4, 4, 1, 16, 20},
        CoverageCase{"random_bs16_gqa4_causal", randomLens(40, 40, 900, 4), 16, 16, 4, 4, 64, 20, 1},
        CoverageCase{"random_bs64_gqa8_window", randomLens(40, 40, 2000, 5), 64, 16, 2, 8, 64, 20, 1, 100},
        CoverageCase{"random_bs16_gqa4_window_nocausal", randomLens(30, 20, 700, 6), 16, 8, 2, 2, 16, 12, 0, 50},
        CoverageCase{"prefill_causal_longer_than_kv", {{10, 4}, {5, 0}, {300, 300}}, 16, 4, 1, 4, 64, 8, 1},
        CoverageCase{"graph_mode_skewed", skewedDecode(), 16, 32, 8, 4, 16, 132, 0, -1, 1},
        CoverageCase{"graph_mode_tiny", {{1, 5}}, 16, 32, 8, 4, 16, 132, 0, -1, 1}),
    [](const auto &info) { return std::string(info.param.name); });

TEST(PlanBalance, SkewedDecodeWithinTenPercent) {
  Batch b = makeBatch(skewedDecode(), 16, 11);
  PlanConfig c = defaultDecodeConfig(b);
  std::vector<int32_t> ws;
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  PlanView v{ws.data()};
  // A fixed target just over the mean may leave the last CTA empty.
  EXPECT_GE(v.numCtas(), 131);
  EXPECT_LE(imbalance(c, v), 1.10);
  c.ctas_per_sm = 2;
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  EXPECT_LE(imbalance(c, PlanView{ws.data()}), 1.10);
}

TEST(PlanBalance, WorkloadsD1D2D4AndPrefillWithinTenPercent) {
  struct W {
    const char *name;
    std::vector<std::pair<int32_t, int32_t>> lens;
    int32_t causal, qRows, pack;
  };
  std::vector<std::pair<int32_t, int32_t>> p2;
  for (int n : {1024, 256, 3840, 2048, 512, 3072, 1536, 4096, 768, 2816, 1280,
                3584, 1792, 2304, 3328, 2560})
    p2.push_back({n, n});
  std::vector<W> ws = {{"D1", uniform(64, 1, 2048), 0, 16, 4},
                       {"D2", uniform(16, 1, 32768), 0, 16, 4},
                       {"D4", uniform(1, 1, 131072), 0, 16, 4},
                       {"P2", p2, 1, 128, 1}};
  for (const W &w : ws) {
    Batch b = makeBatch(w.lens, 16, 5);
    PlanConfig c = makeConfig(32, 8, 128, 16, 132, w.qRows, 64, w.pack, b);
    c.causal = w.causal;
    std::vector<int32_t> buf;
    ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok()) << w.name;
    PlanView v{buf.data()};
    checkPlan(c, b, v);
    EXPECT_LE(imbalance(c, v), 1.10) << w.name;
  }
}

/// The decode kernels' manifest values: 132 SMs x 4 CTAs, one 16-row tile
/// packing the GQA group of 4, cost 128 + 1 per key, chunks of >= 512 keys.
PlanConfig h200DecodeConfig(const Batch &b) {
  PlanConfig c = makeConfig(32, 8, 128, 16, 132, 16, 64, 4, b);
  c.ctas_per_sm = 4;
  c.min_chunk_tokens = 512;
  c.candidates[0] = {16, 64, 4, 128, 1};
  return c;
}

TEST(PlanSplitPolicy, TilesThatFillTheGridStayWhole) {
  // D1: 512 equal tiles on 528 CTAs. Balanced splitting would shorten the
  // makespan by 3% in the model but adds 32 merges; the plan keeps them whole.
  Batch b = makeBatch(uniform(64, 1, 2048), 16, 5);
  PlanConfig c = h200DecodeConfig(b);
  std::vector<int32_t> ws;
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  PlanView v{ws.data()};
  checkPlan(c, b, v);
  EXPECT_EQ(v.numMergeUnits(), 0);
  EXPECT_EQ(v.numSlots(), 0);
  EXPECT_EQ(v.numItems(), 512);
  EXPECT_EQ(v.numCtas(), 512);
  // Graph mode keeps its fixed grid, and the same whole tiles.
  c.graph_mode = 1;
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  EXPECT_EQ(PlanView{ws.data()}.numMergeUnits(), 0);
  EXPECT_EQ(PlanView{ws.data()}.numCtas(), 528);
}

TEST(PlanSplitPolicy, SplitsWhenWholeTilesLeaveTheGridShort) {
  struct W {
    const char *name;
    std::vector<std::pair<int32_t, int32_t>> lens;
    int32_t minUnits;
    double maxImbalance;
  };
  std::vector<W> ws = {
      {"D3", skewedDecode(), 32, 1.07},         // 4 x 32768: every long tile splits
      {"D4", uniform(1, 1, 131072), 8, 1.03},   // one request over the whole GPU
      {"D2", uniform(16, 1, 32768), 128, 1.02}, // 128 tiles on 528 CTAs
      // 400 tiles of 2048 keys (4 chunks of 512 at most): coarse pieces
      // (1.245 walking all 8 head groups, 1.257 walking one on 66 CTAs).
      {"50 x 2048", uniform(50, 1, 2048), 1, 1.26},
  };
  for (const W &w : ws) {
    Batch b = makeBatch(w.lens, 16, 7);
    PlanConfig c = h200DecodeConfig(b);
    std::vector<int32_t> buf;
    ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok()) << w.name;
    PlanView v{buf.data()};
    checkPlan(c, b, v);
    EXPECT_GE(v.numMergeUnits(), w.minUnits) << w.name;
    // At 528 CTAs with 512-key minimum chunks: D2 1.004, D3 1.030, D4 1.029
    // with equal chunks and short tiles placed first, one head group walked
    // on 66 CTAs and repeated (all 8 walked on 528: 1.011, 1.022, 1.029;
    // greedy cuts at the running target: 1.051, 1.196, 1.181; D4 1.45
    // before the split costs were counted up front).
    EXPECT_LE(imbalance(c, v), w.maxImbalance) << w.name;
  }
}

TEST(PlanSplitPolicy, UnmaskedHeadGroupsRepeatOneGroupsPlan) {
  // Without a mask the 8 head groups' tiles cost the same, and 528 CTAs
  // divide by 8: the plan stores group 0's work on 66 CTAs, and group g runs
  // it on CTAs [66g, 66g + 66), its slots and merge units offset by group
  // 0's counts (Plan.h, "Head-group copies").
  for (const auto &lens : {skewedDecode(), uniform(256, 1, 2048),
                           uniform(1, 1, 131072)}) {
    Batch b = makeBatch(lens, 16, 7);
    PlanConfig c = h200DecodeConfig(b);
    std::vector<int32_t> buf;
    ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
    PlanView v{buf.data()};
    checkPlan(c, b, v);
    const int32_t G = 8, n = v.numItems() / G, ctas = v.numCtas() / G;
    const int32_t s = v.numSlots() / G, u = v.numMergeUnits() / G;
    ASSERT_EQ(v.copies(), G);
    ASSERT_EQ(v.copyCtas(), ctas);
    ASSERT_EQ(v.copyItems(), n);
    ASSERT_EQ(v.copyUnits(), u);
    ASSERT_EQ(v.header(kHdrCopyGroups), 1);
    ASSERT_EQ(v.header(kHdrCopySlots), s);
    ASSERT_EQ(v.numItems(), n * G);
    ASSERT_EQ(v.numCtas(), ctas * G);
    ASSERT_EQ(v.numMergeUnits(), u * G);
    for (int32_t g = 0; g < G; ++g) {
      for (int32_t k = 0; k < ctas; ++k) {
        int32_t first, last, first0, last0;
        v.ctaItems(g * ctas + k, &first, &last);
        v.ctaItems(k, &first0, &last0);
        EXPECT_EQ(std::make_pair(first, last),
                  std::make_pair(first0 + g * n, last0 + g * n));
      }
      for (int32_t i = 0; i < n; ++i) {
        const WorkItem a = v.item(i), x = v.item(g * n + i);
        EXPECT_EQ(x.head_group, g);
        EXPECT_EQ(std::make_tuple(x.request, x.row_begin, x.row_count, x.kv_begin,
                                  x.kv_end, x.flags),
                  std::make_tuple(a.request, a.row_begin, a.row_count, a.kv_begin,
                                  a.kv_end, a.flags));
        EXPECT_EQ(x.slot, a.slot < 0 ? -1 : a.slot + g * s);
      }
      for (int32_t k = 0; k < u; ++k) {
        int32_t s0, s1, t0, t1;
        v.unitSlots(g * u + k, &s0, &s1);
        v.unitSlots(k, &t0, &t1);
        EXPECT_EQ(v.unit(g * u + k).head_group, g);
        EXPECT_EQ(std::make_pair(s0, s1), std::make_pair(t0 + g * s, t1 + g * s));
      }
    }
  }
  // A grid that does not divide by the groups (132 CTAs, 8 groups) walks
  // every group; the plan still covers every key once.
  Batch b = makeBatch(skewedDecode(), 16, 7);
  PlanConfig c = h200DecodeConfig(b);
  c.ctas_per_sm = 1;
  std::vector<int32_t> buf;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  checkPlan(c, b, PlanView{buf.data()});
}

TEST(PlanSplitPolicy, EqualChunksBalanceD4AtTheH200Grid) {
  // D4: 8 tiles of 131072 keys on 528 CTAs = 66 chunks a tile, one chunk a
  // CTA; equal chunks differ by at most one granule (64 keys), so the largest
  // CTA is 128 + 2048 against a mean of 2114 (greedy cuts: 2496, 1.18x).
  Batch b = makeBatch(uniform(1, 1, 131072), 16, 7);
  PlanConfig c = h200DecodeConfig(b);
  std::vector<int32_t> buf;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  PlanView v{buf.data()};
  checkPlan(c, b, v);
  EXPECT_EQ(v.numCtas(), 528);
  EXPECT_EQ(v.numItems(), 528);
  EXPECT_EQ(v.numMergeUnits(), 8);
  const int32_t granule = v.header(kHdrKvGranule);
  std::map<int32_t, std::pair<int32_t, int32_t>> minMax; // per head group
  for (int32_t i = 0; i < v.numItems(); ++i) {
    const WorkItem it = v.item(i);
    int32_t first, last;
    v.ctaItems(i, &first, &last);
    EXPECT_EQ(std::make_pair(first, last), std::make_pair(i, i + 1))
        << "one chunk per CTA";
    auto [at, fresh] = minMax.try_emplace(it.head_group, it.kv_end - it.kv_begin,
                                          it.kv_end - it.kv_begin);
    at->second.first = std::min(at->second.first, it.kv_end - it.kv_begin);
    at->second.second = std::max(at->second.second, it.kv_end - it.kv_begin);
  }
  for (auto &[g, mm] : minMax)
    EXPECT_LE(mm.second - mm.first, granule) << "head group " << g;
  std::vector<int64_t> costs(v.numCtas());
  planCtaCosts(c, v, costs.data());
  EXPECT_EQ(*std::max_element(costs.begin(), costs.end()), 128 + 2048);
  EXPECT_LE(imbalance(c, v), 1.03);
  // The same with other lengths around it (remainders of any size).
  for (int32_t kv : {131072 - 1000, 131072 + 37, 100000, 65536 + 511}) {
    Batch bb = makeBatch(uniform(1, 1, kv), 16, 7);
    ASSERT_TRUE(planInto(c, inputsOf(bb), &buf).ok()) << kv;
    PlanView vv{buf.data()};
    checkPlan(c, bb, vv);
    EXPECT_LE(imbalance(c, vv), 1.04) << kv;
  }
}

TEST(PlanSplitPolicy, ShortTilesFirstBalanceD3AtTheH200Grid) {
  // D3: 480 tiles of 512 keys (too short to split) and 32 of 32768. Placed in
  // request order the short tiles' drift (4 x 640 = 2560 per CTA against a
  // target of ~2670) piled 5 of them on each of the last CTAs (1.20x); placed
  // first, the long tiles' chunks absorb it.
  Batch b = makeBatch(skewedDecode(), 16, 7);
  PlanConfig c = h200DecodeConfig(b);
  std::vector<int32_t> buf;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  PlanView v{buf.data()};
  checkPlan(c, b, v);
  EXPECT_EQ(v.numMergeUnits(), 32);
  EXPECT_LE(imbalance(c, v), 1.07);
  // Skewed batches of other shapes at the same grid: exact coverage always;
  // balance where there is enough work for the grid (a batch of 8 - 39 short
  // requests has too few tiles, and tiles under two minimum chunks never
  // split).
  std::mt19937 rng(5);
  for (int trial = 0; trial < 12; ++trial) {
    std::vector<std::pair<int32_t, int32_t>> lens;
    int n = 8 + int(rng() % 120);
    for (int i = 0; i < n; ++i)
      lens.push_back({1, rng() % 7 == 0 ? 16384 + int32_t(rng() % 32768)
                                         : 1 + int32_t(rng() % 1024)});
    Batch bb = makeBatch(lens, 16, trial);
    PlanConfig cc = h200DecodeConfig(bb);
    ASSERT_TRUE(planInto(cc, inputsOf(bb), &buf).ok()) << trial;
    PlanView vv{buf.data()};
    checkPlan(cc, bb, vv);
    if (n >= 40) {
      EXPECT_LE(imbalance(cc, vv), 1.10) << "trial " << trial;
    }
  }
}

/// Largest CTA cost over the mean of the whole grid (num_sms * ctas_per_sm),
/// however many CTAs the plan uses: a plan that leaves CTAs empty is no
/// better balanced for it.
double gridImbalance(const PlanConfig &c, const PlanView &v) {
  return imbalance(c, v, int64_t(c.num_sms) * c.ctas_per_sm);
}

/// bench/harness/sweeps.py's skewed(share): 64 requests of 2048 keys on
/// average, four of them (every 16th) holding `share` of the keys.
std::vector<std::pair<int32_t, int32_t>> sweepSkewed(double share) {
  const int32_t total = 64 * 2048;
  const int32_t longKeys = int32_t(total * share / 4) / 16 * 16;
  const int32_t shortKeys = (total - 4 * longKeys) / 60;
  std::vector<std::pair<int32_t, int32_t>> lens(64, {1, shortKeys});
  for (int i = 0; i < 4; ++i)
    lens[i * 16].second = longKeys;
  return lens;
}

TEST(PlanSplitPolicy, FixedTargetSearchBalancesTheSkewSweep) {
  // Skew 0.25: 480 tiles of 1638 keys (cost 1766) and 32 of 8192 on 528
  // CTAs, mean ~2230. The running target closes each short tile's CTA 344
  // short (a chunk needs 640), the target creeps, and the last CTAs took
  // 2956 (1.36x). The fixed-target walk tops every short CTA up with a
  // chunk of a long tile: 2406 (1.08x the grid mean). Skew 0.5: 1.15x ->
  // 1.04x.
  for (double share : {0.25, 0.5, 0.75, 0.9}) {
    Batch b = makeBatch(sweepSkewed(share), 16, 7);
    PlanConfig c = h200DecodeConfig(b);
    std::vector<int32_t> buf;
    ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok()) << share;
    PlanView v{buf.data()};
    checkPlan(c, b, v);
    EXPECT_LE(gridImbalance(c, v), 1.10) << "share " << share;
    // Graph mode keeps the grid whole and the same balance.
    c.graph_mode = 1;
    ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok()) << share;
    PlanView g{buf.data()};
    checkPlan(c, b, g);
    EXPECT_EQ(g.numCtas(), 528);
    EXPECT_LE(gridImbalance(c, g), 1.10) << "graph, share " << share;
  }
}

TEST(PlanSplitPolicy, FixedTargetSearchKeepsEveryInvariant) {
  // Batches that take the search (short tiles and tiles over a CTA's share
  // on one grid, the running plan over 17/16 of the mean): decode and
  // causal prefill, windows, block sizes, minimum chunks. Coverage is exact
  // and the grid balance is what the work allows.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::pair<int32_t, int32_t>> lens;
    const int n = 16 + int(rng() % 100);
    const int longEvery = 4 + int(rng() % 20);
    const int32_t longKv = 4096 + int32_t(rng() % 40000);
    const int32_t shortMax = 256 + int32_t(rng() % 3000);
    const bool prefill = trial % 4 == 3;
    for (int i = 0; i < n; ++i) {
      int32_t kv = i % longEvery == 1 ? longKv + int32_t(rng() % 999)
                                      : 1 + int32_t(rng() % shortMax);
      lens.push_back({prefill ? 1 + int32_t(rng() % 40) : 1, kv});
    }
    const int32_t bs = trial % 3 == 0 ? 1 : 16;
    Batch b = makeBatch(lens, bs, trial);
    PlanConfig c = h200DecodeConfig(b);
    c.block_size = bs;
    c.ctas_per_sm = 1 + trial % 4;
    c.min_chunk_tokens = trial % 2 ? 512 : 0;
    c.causal = prefill;
    c.window_left = trial % 5 == 4 ? 3000 : -1;
    std::vector<int32_t> buf;
    Status s = planInto(c, inputsOf(b), &buf);
    ASSERT_TRUE(s.ok()) << "trial " << trial << ": " << s.message();
    checkPlan(c, b, PlanView{buf.data()});
  }
}

TEST(PlanBalance, RandomSkewedBatches98PercentWithinTenPercent) {
  // 400 skewed decode batches (16-255 requests, one in 2-31 long, 132 or 528
  // CTAs, 512-key or default minimum chunks), counted where the work leaves
  // room for balance: every CTA's share is at least three minimum pieces and
  // no tile too short to split costs over half of it. Measured: 3 of 362
  // such batches stay over 1.10 (worst 1.154; the walks are greedy and no
  // optimum is computed), so the test bounds that share and the worst. The
  // previous planner had 109 of 300 random skewed batches over 1.10.
  std::mt19937 rng(1);
  int allowed = 0, over = 0;
  double worst = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 16 + int(rng() % 240);
    const int sm4 = rng() % 3;
    const int longEvery = 2 + int(rng() % 30);
    const int32_t longKv = 4096 + int32_t(rng() % 60000);
    const int32_t shortMax = 256 + int32_t(rng() % 3000);
    std::vector<std::pair<int32_t, int32_t>> lens;
    for (int i = 0; i < n; ++i)
      lens.push_back({1, rng() % longEvery == 0 ? longKv + int32_t(rng() % 1000)
                                                 : 1 + int32_t(rng() % shortMax)});
    Batch b = makeBatch(lens, 16, trial);
    PlanConfig c = h200DecodeConfig(b);
    c.ctas_per_sm = sm4 == 0 ? 1 : 4;
    c.min_chunk_tokens = sm4 == 2 ? 0 : 512;
    std::vector<int32_t> buf;
    ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok()) << trial;
    PlanView v{buf.data()};
    checkPlan(c, b, v);
    const int64_t minChunk = c.min_chunk_tokens ? c.min_chunk_tokens : 128;
    int64_t wholeOnly = 0, total = 0;
    for (auto [qo, kv] : lens)
      if (kv < 2 * minChunk)
        wholeOnly = std::max<int64_t>(wholeOnly, 128 + kv);
    std::vector<int64_t> costs(v.numCtas());
    planCtaCosts(c, v, costs.data());
    for (int64_t x : costs)
      total += x;
    const double mean = double(total) / (c.num_sms * c.ctas_per_sm);
    if (mean < 3.0 * (128 + minChunk) || 2 * wholeOnly > mean)
      continue;
    ++allowed;
    const double r = gridImbalance(c, v);
    over += r > 1.10;
    worst = std::max(worst, r);
  }
  EXPECT_GE(allowed, 200);
  EXPECT_LE(over, allowed / 50) << "batches over 1.10 of " << allowed;
  EXPECT_LE(worst, 1.25);
}

TEST(PlanSplitPolicy, FailedNoSplitTrialLeavesAWholeSplitPlan) {
  // 224 tiles of equal cost on 132 CTAs pass the trial's gates (largest tile
  // within 9/8 of the target, no tile over twice the mean), but whole tiles
  // put two on the first CTA (2/1.7 of the target): the trial stops there and
  // the split plan overwrites what it wrote.
  Batch b = makeBatch(uniform(28, 1, 2048), 16, 3);
  PlanConfig c = defaultDecodeConfig(b);
  std::vector<int32_t> buf;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  PlanView v{buf.data()};
  checkPlan(c, b, v);
  EXPECT_GT(v.numMergeUnits(), 0);
  EXPECT_LE(imbalance(c, v), 1.10);
}

TEST(PlanDeterminism, ReusedWorkspaceGivesTheSamePlan) {
  // The plan's arrays are rewritten up to their counts whatever the
  // workspace held (a previous plan, a failed no-split trial).
  Batch first = makeBatch(skewedDecode(), 16, 3);
  Batch second = makeBatch(uniform(28, 1, 2048), 16, 3);
  PlanConfig c = defaultDecodeConfig(first);
  std::vector<int32_t> fresh, reused;
  ASSERT_TRUE(planInto(c, inputsOf(second), &fresh).ok());
  ASSERT_TRUE(planInto(c, inputsOf(first), &reused).ok());
  ASSERT_TRUE(plan(c, inputsOf(second), reused.data(), reused.size() * 4).ok());
  PlanView a{fresh.data()}, d{reused.data()};
  ASSERT_TRUE(std::equal(fresh.begin(), fresh.begin() + kPlanHeaderWords,
                         reused.begin()));
  ASSERT_TRUE(std::equal(a.ctaIndptr(), a.ctaIndptr() + a.copyCtas() + 1,
                         d.ctaIndptr()));
  for (int32_t i = 0; i < a.copyItems(); ++i)
    ASSERT_EQ(0, std::memcmp(&a.items()[i], &d.items()[i], sizeof(WorkItem)))
        << i;
  ASSERT_TRUE(std::equal(a.mergeIndptr(),
                         a.mergeIndptr() + a.copyUnits() + 1,
                         d.mergeIndptr()));
  for (int32_t u = 0; u < a.copyUnits(); ++u)
    ASSERT_EQ(0, std::memcmp(&a.mergeUnits()[u], &d.mergeUnits()[u],
                             sizeof(MergeUnit)))
        << u;
}

TEST(PlanSplitPolicy, DisableSplitStillPlansEverything) {
  Batch b = makeBatch(skewedDecode(), 16, 3);
  PlanConfig c = h200DecodeConfig(b);
  c.disable_split = 1;
  std::vector<int32_t> buf;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  PlanView v{buf.data()};
  checkPlan(c, b, v);
  EXPECT_EQ(v.numMergeUnits(), 0);
  EXPECT_EQ(v.numItems(), 64 * 8);
}

/// The prefill kernels' manifest values on sm_90a (one CTA per SM, 128-row
/// tiles packing the GQA group of 4 over 128-key tiles, cost 256 + 1 per key).
PlanConfig h200PrefillConfig(const Batch &b) {
  PlanConfig c = makeConfig(32, 8, 128, b.block_size, 132, 128, 128, 4, b);
  c.causal = 1;
  c.candidates[0] = {128, 128, 4, 256, 1, 1, 0};
  return c;
}

/// CTA `cta`'s consecutive items, pairs (item i - 1, item i), copies applied.
std::vector<std::pair<WorkItem, WorkItem>> consecutiveItems(const PlanView &v,
                                                           int32_t cta) {
  int32_t first, last;
  v.ctaItems(cta, &first, &last);
  std::vector<std::pair<WorkItem, WorkItem>> out;
  for (int32_t i = first + 1; i < last; ++i)
    out.push_back({v.item(i - 1), v.item(i)});
  return out;
}

/// The most distinct (request, head group) pairs among the CTAs' i-th items,
/// over every i: the K/V the items running at once read when the CTAs keep
/// pace.
int32_t pairsInFlight(const PlanView &v) {
  int32_t most = 0;
  for (int32_t i = 0;; ++i) {
    std::set<std::pair<int32_t, int32_t>> pairs;
    for (int32_t cta = 0; cta < v.numCtas(); ++cta) {
      int32_t first, last;
      v.ctaItems(cta, &first, &last);
      if (first + i < last)
        pairs.insert({v.item(first + i).request, v.item(first + i).head_group});
    }
    if (pairs.empty())
      return most;
    most = std::max(most, int32_t(pairs.size()));
  }
}

TEST(PlanLongestFirst, PrefillWorkloadsBalancedWithoutSplitting) {
  // P1 (one causal 8192-token request) and P2 (16 ragged causal requests):
  // tiles from 288 to 8448 (P2: 4352) in cost, all far below a CTA's share.
  // The request-order walk left P1's largest CTA 1.12x the mean (128 short
  // tiles on the first CTA, 8 long ones on the last) and split 79 of P2's
  // tiles; longest first keeps every tile whole and every CTA within 1% of
  // the mean.
  struct W {
    const char *name;
    std::vector<std::pair<int32_t, int32_t>> lens;
    int32_t blockSize, pairs;
  };
  std::vector<std::pair<int32_t, int32_t>> p2;
  for (int n : {1024, 256, 3840, 2048, 512, 3072, 1536, 4096, 768, 2816, 1280,
                3584, 1792, 2304, 3328, 2560})
    p2.push_back({n, n});
  std::vector<W> ws = {{"P1", uniform(1, 8192, 8192), 1, 4}, {"P2", p2, 16, 47}};
  for (const W &w : ws) {
    Batch b = makeBatch(w.lens, w.blockSize, 5);
    PlanConfig c = h200PrefillConfig(b);
    std::vector<int32_t> buf;
    ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok()) << w.name;
    PlanView v{buf.data()};
    checkPlan(c, b, v);
    EXPECT_EQ(v.numMergeUnits(), 0) << w.name;
    EXPECT_EQ(v.numCtas(), 132) << w.name;
    EXPECT_LE(imbalance(c, v), 1.01) << w.name;
    // The head groups rotate over the CTAs and each CTA runs them in order:
    // the items running at once read few (request, KV head) pairs' K/V (P2:
    // 47 of 128; with group 0 to the least loaded CTA each time, 84).
    EXPECT_LE(pairsInFlight(v), w.pairs) << w.name;
    // Each CTA runs its tiles head group by head group, longest first in
    // each.
    const TileCandidate &t = c.candidates[0];
    for (int32_t cta = 0; cta < v.numCtas(); ++cta)
      for (auto [a, z] : consecutiveItems(v, cta)) {
        ASSERT_LE(a.head_group, z.head_group) << w.name << " CTA " << cta;
        if (a.head_group == z.head_group) {
          ASSERT_GE(itemCost(t, a.kv_end - a.kv_begin),
                    itemCost(t, z.kv_end - z.kv_begin))
              << w.name << " CTA " << cta;
        }
      }
  }
}

TEST(PlanLongestFirst, TilesWithinTwiceEachOtherKeepTheWalk) {
  // P5 (16 chunks of 512 over 4096-token caches): tiles of 3872-4352, so
  // the request-order walk is within a tile of the mean and keeps each CTA
  // in one request (faster on the H200 than longest first).
  Batch b = makeBatch(uniform(16, 512, 4096), 16, 5);
  PlanConfig c = h200PrefillConfig(b);
  std::vector<int32_t> buf;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  PlanView v{buf.data()};
  checkPlan(c, b, v);
  EXPECT_EQ(v.numMergeUnits(), 0);
  EXPECT_LE(imbalance(c, v, 132), 1.05); // 15.5 tiles per CTA
  // The walk's order within each head group; the groups one after another,
  // so that the items running at once share K/V: of the 128 (request, KV
  // head) pairs, at most 2 heads of the 16 requests at a time (the walk's
  // own order: 72).
  for (int32_t cta = 0; cta < v.numCtas(); ++cta)
    for (auto [a, z] : consecutiveItems(v, cta)) {
      ASSERT_LE(a.head_group, z.head_group) << "CTA " << cta;
      if (a.head_group == z.head_group) {
        ASSERT_LE(std::pair(a.request, a.row_begin),
                  std::pair(z.request, z.row_begin))
            << "walk order, CTA " << cta;
      }
    }
  EXPECT_LE(pairsInFlight(v), 32);
}

TEST(PlanLongestFirst, UnmaskedPrefillSharesKV) {
  // P5's shape without the mask (bidirectional chunks, a cascade's prefix
  // level): the tiles of a request read the same K/V, so the planner walks
  // every head group rather than one (head-group symmetry would give each
  // group's CTAs their own requests at once) and orders the CTAs' items by
  // head group: 72 of the 128 (request, KV head) pairs in flight before.
  Batch b = makeBatch(uniform(16, 512, 4096), 16, 5);
  PlanConfig c = h200PrefillConfig(b);
  c.causal = 0;
  std::vector<int32_t> buf;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  PlanView v{buf.data()};
  checkPlan(c, b, v);
  EXPECT_LE(imbalance(c, v, 132), 1.05);
  EXPECT_LE(pairsInFlight(v), 32);
}

TEST(PlanLongestFirst, GraphModeAndDisabledSplitKeepTheGrid) {
  Batch b = makeBatch(uniform(1, 8192, 8192), 1, 5);
  PlanConfig c = h200PrefillConfig(b);
  c.graph_mode = 1;
  c.disable_split = 1;
  std::vector<int32_t> buf;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  PlanView v{buf.data()};
  checkPlan(c, b, v);
  EXPECT_EQ(v.numCtas(), 132);
  EXPECT_EQ(v.numMergeUnits(), 0);
  EXPECT_LE(imbalance(c, v), 1.01);
}

TEST(PlanLongestFirst, CoarseTilesStayWholeUnlessSplittingBalancesBetter) {
  // 280 causal tiles of one 4480-token request on 132 CTAs: longest first
  // leaves the largest CTA 1.08x the mean, outside its tolerance; the
  // splitting plans balance no better (1.19x), so the tiles stay whole.
  Batch b = makeBatch(uniform(1, 4480, 4480), 1, 5);
  PlanConfig c = h200PrefillConfig(b);
  c.num_qo_heads = 8;
  c.num_kv_heads = 8;
  c.candidates[0].gqa_pack = 1;
  std::vector<int32_t> buf;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  PlanView v{buf.data()};
  checkPlan(c, b, v);
  EXPECT_EQ(v.numMergeUnits(), 0);
  EXPECT_LE(imbalance(c, v), 1.09);
  // 2048 tokens (128 tiles, fewer than the CTAs) are split: whole tiles
  // would leave the largest CTA 1.77x the mean.
  b = makeBatch(uniform(1, 2048, 2048), 1, 5);
  c.max_total_q_rows = 2048;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  PlanView s{buf.data()};
  checkPlan(c, b, s);
  EXPECT_GT(s.numMergeUnits(), 0);
  EXPECT_LE(imbalance(c, s, 132), 1.10);
}

TEST(PlanDeterminism, SameInputsSameBytes) {
  Batch b = makeBatch(randomLens(100, 5, 5000, 9), 16, 3);
  PlanConfig c = defaultDecodeConfig(b);
  std::vector<int32_t> a, d;
  ASSERT_TRUE(planInto(c, inputsOf(b), &a).ok());
  ASSERT_TRUE(planInto(c, inputsOf(b), &d).ok());
  size_t words = PlanView{a.data()}.bytes() / 4;
  ASSERT_TRUE(std::equal(a.begin(), a.begin() + words, d.begin()));
}

TEST(PlanGraphMode, GridAndLayoutFixedAcrossPlans) {
  Batch small = makeBatch({{1, 10}, {1, 20}}, 16, 1);
  Batch big = makeBatch(skewedDecode(), 16, 2);
  PlanConfig c = defaultDecodeConfig(big);
  c.graph_mode = 1;
  c.candidates[1] = {64, 64, 4, 32, 4};
  c.num_candidates = 2;
  std::vector<int32_t> a, d;
  ASSERT_TRUE(planInto(c, inputsOf(small), &a).ok());
  ASSERT_TRUE(planInto(c, inputsOf(big), &d).ok());
  PlanView va{a.data()}, vd{d.data()};
  EXPECT_EQ(va.numCtas(), vd.numCtas());
  EXPECT_EQ(va.candidate(), 0);
  EXPECT_EQ(vd.candidate(), 0);
  for (int f = kHdrMaxCtas; f <= kHdrSlotRows; ++f)
    EXPECT_EQ(va.header(PlanHeaderField(f)), vd.header(PlanHeaderField(f))) << f;
  EXPECT_EQ(va.partialOOffset(), vd.partialOOffset());
}

TEST(PlanIndexArrays, ThePlanCarriesTheInputsAtOffsetsOfTheConfig) {
  // The kernels read qo_indptr, kv_indptr and kv_last_len from the plan, at
  // offsets graph mode's captured pointers hold across batches: the
  // inputs as given, kv_last_len from kv_lens when only they are given, 0
  // for an empty request (whose given last length is never checked).
  Batch small = makeBatch({{1, 10}, {1, 0}, {1, 33}}, 16, 1);
  small.kv_last_len[1] = -5;
  Batch big = makeBatch(skewedDecode(), 16, 2);
  PlanConfig c = defaultDecodeConfig(big);
  c.graph_mode = 1;
  std::vector<int32_t> a, d;
  ASSERT_TRUE(planInto(c, inputsOf(small), &a).ok());
  ASSERT_TRUE(planInto(c, inputsOf(big), &d).ok());
  for (PlanHeaderField f : {kHdrOffQoIndptr, kHdrOffKvIndptr, kHdrOffKvLastLen,
                            kHdrMaxBatch})
    EXPECT_EQ(a[f], d[f]) << f;
  EXPECT_EQ(a[kHdrOffKvIndptr] - a[kHdrOffQoIndptr], c.max_batch + 1);
  checkPlan(c, small, PlanView{a.data()});
  checkPlan(c, big, PlanView{d.data()});

  PlanInputs byLens = inputsOf(small);
  byLens.kv_last_len = nullptr;
  byLens.kv_lens = small.kv_lens.data();
  ASSERT_TRUE(planInto(c, byLens, &a).ok());
  PlanView v{a.data()};
  EXPECT_EQ(v.kvLastLen()[0], 10);
  EXPECT_EQ(v.kvLastLen()[1], 0);
  EXPECT_EQ(v.kvLastLen()[2], 1);
}

TEST(PlanIndexArrays, RaggedPlansHoldZeroLastLengths) {
  Batch b = makeBatch({{5, 40}, {3, 7}}, 16, 1);
  b.kv_indptr = {0, 40, 47}; // tokens
  PlanConfig c = defaultDecodeConfig(b);
  c.indexing = KVIndexing::Ragged;
  PlanInputs in = inputsOf(b);
  in.kv_last_len = nullptr;
  in.kv_indices = nullptr;
  std::vector<int32_t> ws;
  ASSERT_TRUE(planInto(c, in, &ws).ok());
  checkPlan(c, b, PlanView{ws.data()});
}

TEST(PlanUpload, TheSpansAloneMakeTheWholePlan) {
  // Graph mode lays the plan out for its maxima (4096 or 65536 requests
  // here), so a batch uses a small part of it; a device image holding only
  // the spans, garbage elsewhere, must be the same plan to every reader.
  // Under 65536 requests the index arrays' unused tails (256 KiB each) part
  // them into spans of their own.
  Batch one = makeBatch({{1, 300}}, 16, 1);
  Batch skewed = makeBatch(skewedDecode(), 16, 2);
  PlanConfig c = h200DecodeConfig(skewed);
  c.graph_mode = 1;
  for (int32_t maxBatch : {4096, 65536})
  for (const Batch *b : {&one, &skewed}) {
    c.max_batch = maxBatch;
    c.max_total_q_rows = maxBatch;
    std::vector<int32_t> host;
    ASSERT_TRUE(planInto(c, inputsOf(*b), &host).ok());
    PlanView v{host.data()};
    PlanSpan spans[kMaxPlanSpans];
    int32_t n = planUploadSpans(v, spans);
    ASSERT_GE(n, 1);
    ASSERT_LE(n, kMaxPlanSpans);
    EXPECT_EQ(spans[0].offset, 0u);
    size_t copied = 0, end = 0;
    std::vector<int32_t> device(v.bytes() / 4, int32_t(0xABABABAB));
    for (int32_t i = 0; i < n; ++i) {
      EXPECT_GE(spans[i].offset, end);
      EXPECT_EQ(spans[i].offset % 4, 0u);
      end = spans[i].offset + spans[i].bytes;
      ASSERT_LE(end, v.bytes());
      if (i > 0)
        EXPECT_GE(spans[i].offset - (spans[i - 1].offset + spans[i - 1].bytes),
                  kPlanUploadGapBytes);
      std::memcpy(device.data() + spans[i].offset / 4,
                  host.data() + spans[i].offset / 4, spans[i].bytes);
      copied += spans[i].bytes;
    }
    EXPECT_LT(copied * 4, v.bytes()) << "the maxima's layout is mostly unused";
    PlanView d;
    Status s = viewPlan(device.data(), device.size() * 4, &d);
    ASSERT_TRUE(s.ok()) << s.message();
    checkPlan(c, *b, d);
    EXPECT_EQ(d.numMergeUnits(), v.numMergeUnits());
    if (b == &skewed)
      EXPECT_GT(v.numMergeUnits(), 0) << "the merge spans are tested";
    // One span for the header, index arrays and work list (their gaps are
    // small under 4096 requests, 4 spans under 65536), two more for the
    // merge arrays of the skewed batch.
    const int32_t front = maxBatch == 4096 ? 1 : 4;
    EXPECT_EQ(n, front + (b == &skewed ? 2 : 0)) << "max_batch " << maxBatch;
  }
}

TEST(PlanCandidates, TheTileFollowsTheAveragePackedQueryLength) {
  // GQA group 4, every candidate packing the whole group: decode (1 token x
  // 4 heads = 4 rows) fits the 16-row tile, speculative verification of 8
  // tokens (32 rows) the 64-row tile, prefill (2048 rows) none, so the
  // tallest.
  Batch decode = makeBatch(uniform(32, 1, 1000), 16, 1);
  Batch verify = makeBatch(uniform(16, 8, 2048), 16, 1);
  Batch exact = makeBatch(uniform(16, 16, 2048), 16, 1);
  Batch prefill = makeBatch(uniform(4, 512, 512), 16, 1);
  for (auto [batch, expect] : {std::pair{&decode, 0}, std::pair{&verify, 1},
                               std::pair{&exact, 1}, std::pair{&prefill, 2}}) {
    PlanConfig c = makeConfig(32, 8, 128, 16, 132, 16, 64, 4, *batch);
    c.num_candidates = 3;
    c.candidates[0] = {16, 16, 4, 128, 1, 4, 512};
    c.candidates[1] = {64, 64, 4, 128, 1, 2, 0};
    c.candidates[2] = {128, 64, 4, 128, 1, 1, 0};
    std::vector<int32_t> ws;
    ASSERT_TRUE(planInto(c, inputsOf(*batch), &ws).ok());
    PlanView v{ws.data()};
    EXPECT_EQ(v.candidate(), expect);
    EXPECT_EQ(v.tileQ(), c.candidates[expect].q_rows);
    // The grid is the chosen kernel's: num_sms * its CTAs per SM; the
    // layout has room for the largest.
    EXPECT_LE(v.numCtas(), 132 * c.candidates[expect].ctas_per_sm);
    EXPECT_EQ(v.header(kHdrMaxCtas), 132 * 4);
    int64_t covered = 0;
    for (int32_t i = 0; i < v.numItems(); ++i)
      covered += v.item(i).row_count;
    EXPECT_GT(covered, 0);
  }
}

TEST(PlanCandidates, PartialSlotsAreThePickedTilesRows) {
  // The partial buffers hold what the neediest single candidate needs (its
  // items times its q_rows), not the most items of any candidate times the
  // tallest tile; each plan's slots are its own tile's rows.
  Batch b = makeBatch(uniform(5, 528, 600), 16, 1);
  PlanConfig c = makeConfig(32, 8, 128, 16, 132, 16, 64, 4, b);
  c.num_candidates = 3;
  c.candidates[0] = {16, 16, 4, 128, 1, 4, 512};
  c.candidates[1] = {64, 64, 4, 128, 1, 2, 0};
  c.candidates[2] = {128, 64, 4, 128, 1, 1, 0};
  PlanLayout all;
  ASSERT_TRUE(computePlanLayout(c, &all).ok());
  int64_t neediest = 0;
  for (int32_t i = 0; i < 3; ++i) {
    PlanConfig one = c;
    one.num_candidates = 1;
    one.candidates[0] = c.candidates[i];
    PlanLayout l;
    ASSERT_TRUE(computePlanLayout(one, &l).ok());
    neediest = std::max(neediest, l.partial_rows);
  }
  EXPECT_EQ(all.partial_rows, neediest);
  std::vector<int32_t> ws;
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  PlanView v{ws.data()};
  const TileCandidate &t = c.candidates[v.candidate()];
  EXPECT_EQ(v.slotRows(), t.q_rows);
  EXPECT_EQ(int64_t(v.header(kHdrMaxSlots)) * t.q_rows, all.partial_rows / t.q_rows * t.q_rows);
  EXPECT_LE(v.header(kHdrNumSlots), v.header(kHdrMaxSlots));
}

TEST(PlanCandidates, SelectionRuleIsTheSmallestTileHoldingTheAverage) {
  TileCandidate t[3] = {{128, 64, 1, 0, 1, 0, 0},
                        {16, 16, 4, 0, 1, 0, 0},
                        {64, 64, 2, 0, 1, 0, 0}};
  EXPECT_EQ(selectTileCandidate(t, 3, /*rows=*/4, /*batch=*/4), 1);   // 4
  EXPECT_EQ(selectTileCandidate(t, 3, 16, 4), 1);                     // 16
  EXPECT_EQ(selectTileCandidate(t, 3, 17, 4), 2);                     // 10
  EXPECT_EQ(selectTileCandidate(t, 3, 128, 4), 2);                    // 64
  EXPECT_EQ(selectTileCandidate(t, 3, 129, 4), 0);                    // 65
  EXPECT_EQ(selectTileCandidate(t, 3, 1 << 20, 4), 0);                // tallest
  EXPECT_EQ(selectTileCandidate(t, 3, 0, 0), 1);                      // empty
}

TEST(PlanCandidates, MinimumChunkIsTheCandidates) {
  // One long decode request split over the grid: chunks of the candidate's
  // minimum (512) rather than two granules (32).
  Batch b = makeBatch({{1, 8192}}, 16, 1);
  PlanConfig c = makeConfig(32, 8, 128, 16, 132, 16, 16, 4, b);
  c.candidates[0].min_chunk_tokens = 512;
  std::vector<int32_t> ws;
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  PlanView v{ws.data()};
  for (int32_t i = 0; i < v.numItems(); ++i) {
    const WorkItem w = v.item(i);
    if (!(w.flags & kItemLastChunk))
      EXPECT_GE(w.kv_end - w.kv_begin, 512) << i;
  }
}

TEST(PlanTrim, SmallBatchUsesFewCtasOutsideGraphMode) {
  Batch b = makeBatch({{1, 40}}, 16, 1);
  PlanConfig c = makeConfig(8, 8, 128, 16, 132, 16, 64, 1, b);
  std::vector<int32_t> ws;
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  PlanView v{ws.data()};
  EXPECT_EQ(v.numItems(), 8);
  EXPECT_LE(v.numCtas(), 8);
  EXPECT_EQ(v.numMergeUnits(), 0);
}

TEST(PlanEmpty, NoRequests) {
  Batch b = makeBatch({}, 16, 1);
  PlanConfig c = makeConfig(8, 8, 128, 16, 4, 16, 64, 1, b);
  std::vector<int32_t> ws;
  Status s = planInto(c, inputsOf(b), &ws);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(PlanView{ws.data()}.numItems(), 0);
  EXPECT_EQ(PlanView{ws.data()}.numCtas(), 0);
  c.graph_mode = 1;
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  EXPECT_EQ(PlanView{ws.data()}.numCtas(), 4);
}

//===----------------------------------------------------------------------===//
// Batch-invariant plans: fixed_split_tokens and disable_split
//===----------------------------------------------------------------------===//

namespace {

/// The key ranges request `r` is computed over, per head group, in the order
/// its partials are merged (a direct item: its one range).
std::vector<std::vector<std::pair<int32_t, int32_t>>>
chunksOf(const PlanView &v, int32_t r, int32_t groups) {
  std::vector<std::vector<std::pair<int32_t, int32_t>>> out(groups);
  std::map<int32_t, WorkItem> bySlot;
  for (int32_t i = 0; i < v.numItems(); ++i) {
    const WorkItem it = v.item(i);
    if (it.request != r)
      continue;
    if (it.flags & kItemDirect)
      out[it.head_group].push_back({it.kv_begin, it.kv_end});
    else
      bySlot[it.slot] = it;
  }
  for (int32_t u = 0; u < v.numMergeUnits(); ++u) {
    const MergeUnit m = v.unit(u);
    if (m.request != r)
      continue;
    int32_t s0, s1;
    v.unitSlots(u, &s0, &s1);
    for (int32_t s = s0; s < s1; ++s) {
      const WorkItem &it = bySlot.at(s);
      EXPECT_EQ(it.head_group, m.head_group);
      out[m.head_group].push_back({it.kv_begin, it.kv_end});
    }
  }
  return out;
}

/// A decode batch holding (1, 5000) at `at` among skewed others, or alone.
std::vector<std::pair<int32_t, int32_t>> withProbe(bool alone, int32_t at) {
  if (alone)
    return {{1, 5000}};
  std::vector<std::pair<int32_t, int32_t>> lens = skewedDecode();
  lens.insert(lens.begin() + at, {1, 5000});
  return lens;
}

int64_t kvTokens(const Batch &b) {
  int64_t n = 0;
  for (int32_t len : b.kv_lens)
    n += len;
  return n;
}

/// The probe request's ranges under `mode` (fixed split of 1000 tokens, or
/// no split), eager or in graph mode (fixed maxima), alone or in a batch.
std::vector<std::vector<std::pair<int32_t, int32_t>>>
probeChunks(bool fixed, bool graph, bool alone) {
  const int32_t at = 7;
  Batch b = makeBatch(withProbe(alone, at), 16, 5);
  PlanConfig c = h200DecodeConfig(b);
  if (fixed)
    c.fixed_split_tokens = 1000; // rounded up to the 64-key granule: 1024
  else
    c.disable_split = 1;
  c.max_kv_tokens = kvTokens(b);
  if (graph) {
    c.graph_mode = 1;
    c.max_batch = 128;
    c.max_total_q_rows = 128;
    c.max_kv_tokens = 128 * 40000;
  }
  std::vector<int32_t> buf;
  Status s = planInto(c, inputsOf(b), &buf);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok())
    return {};
  PlanView v{buf.data()};
  checkPlan(c, b, v);
  if (graph) {
    EXPECT_EQ(v.numCtas(), 132 * 4); // the fixed grid
  }
  return chunksOf(v, alone ? 0 : at, 32 / 4);
}

} // namespace

TEST(PlanBatchInvariant, FixedSplitCutsEveryRequestAtTheSameKeys) {
  // The probe's chunks are the multiples of 1024 (1000 rounded up to the
  // granule) whatever else the batch holds, merged in key order.
  std::vector<std::pair<int32_t, int32_t>> want = {
      {0, 1024}, {1024, 2048}, {2048, 3072}, {3072, 4096}, {4096, 5000}};
  for (bool graph : {false, true}) {
    auto alone = probeChunks(true, graph, true);
    auto inBatch = probeChunks(true, graph, false);
    ASSERT_EQ(alone.size(), 8u);
    for (int g = 0; g < 8; ++g) {
      EXPECT_EQ(alone[g], want) << "graph " << graph << " group " << g;
      EXPECT_EQ(inBatch[g], want) << "graph " << graph << " group " << g;
    }
  }
}

TEST(PlanBatchInvariant, DisableSplitKeepsEveryRequestWhole) {
  for (bool graph : {false, true}) {
    auto alone = probeChunks(false, graph, true);
    auto inBatch = probeChunks(false, graph, false);
    ASSERT_EQ(alone.size(), 8u);
    for (int g = 0; g < 8; ++g) {
      EXPECT_EQ(alone[g], (std::vector<std::pair<int32_t, int32_t>>{{0, 5000}}));
      EXPECT_EQ(inBatch[g], alone[g]);
    }
  }
}

TEST(PlanBatchInvariant, FixedSplitSkewedBatchCoveredAndBalanced) {
  // D3 with chunks of 2048: every range covered once, the chunks spread over
  // the grid (the long requests' 16 chunks each are what the CTAs share).
  Batch b = makeBatch(skewedDecode(), 16, 3);
  PlanConfig c = h200DecodeConfig(b);
  c.fixed_split_tokens = 2048;
  c.max_kv_tokens = kvTokens(b);
  std::vector<int32_t> buf;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  PlanView v{buf.data()};
  checkPlan(c, b, v);
  EXPECT_EQ(v.numItems(), (60 + 4 * 16) * 8);
  EXPECT_EQ(v.numMergeUnits(), 4 * 8);
  EXPECT_LT(imbalance(c, v), 2.0);
}

TEST(PlanBatchInvariant, FixedSplitLimitsAreChecked) {
  Batch b = makeBatch({{1, 5000}, {1, 300}}, 16, 2);
  PlanConfig c = h200DecodeConfig(b);
  c.fixed_split_tokens = -1;
  std::vector<int32_t> buf;
  Status s = planInto(c, inputsOf(b), &buf);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("fixed_split_tokens"), std::string::npos) << s.message();
  c.fixed_split_tokens = 512;
  c.max_kv_tokens = -5;
  EXPECT_EQ(planInto(c, inputsOf(b), &buf).code(), StatusCode::InvalidArgument);
  // A bound below the batch's keys: the work list cannot hold its chunks.
  c.max_kv_tokens = 1000;
  s = planInto(c, inputsOf(b), &buf);
  EXPECT_EQ(s.code(), StatusCode::GraphMaximaExceeded);
  EXPECT_NE(s.message().find("max_kv_tokens"), std::string::npos) << s.message();
  // The layout grows with the bound, in 64 bits: 2^40 keys in chunks of 512
  // make more work items than a plan can hold.
  c.max_kv_tokens = int64_t(1) << 40;
  PlanLayout l;
  s = computePlanLayout(c, &l);
  EXPECT_EQ(s.code(), StatusCode::GraphMaximaExceeded);
  EXPECT_NE(s.message().find("fixed_split_tokens"), std::string::npos) << s.message();
  c.max_kv_tokens = 5300;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  PlanView v{buf.data()};
  checkPlan(c, b, v);
  EXPECT_EQ(v.numItems(), (10 + 1) * 8);
  // disable_split wins over a fixed split.
  c.disable_split = 1;
  ASSERT_TRUE(planInto(c, inputsOf(b), &buf).ok());
  EXPECT_EQ(PlanView{buf.data()}.numMergeUnits(), 0);
}
