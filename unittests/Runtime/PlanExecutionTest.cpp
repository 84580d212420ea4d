//===- PlanExecutionTest.cpp - Executing a plan equals direct attention ---===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Runs the planner's work list on the CPU exactly as the kernels will (chunk
// partials with the sink on the first chunk, then the LSE merge) and compares
// with direct float64 attention to 1e-9, over random batches (uniform, skewed,
// empty requests), block sizes 1/16/64, GQA 1/4/8 and the built-in variants.
// head_dim is small: the values, not the width, exercise the plan.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <gtest/gtest.h>

using namespace attnrt;
using namespace attnrt::test;

namespace {

struct ExecCase {
  const char *name;
  int32_t blockSize, hq, hkv, pack, qRows, kvTile, sms;
  int32_t causal = 0, window = -1, sinks = 0, softcap = 0, alibi = 0,
          rope = 0, mask = 0; // mask: 1 boolean, 2 bit-packed
  int32_t skewed = 0;
  /// Which assignment the batch must get: split KV (a 3000-key request is
  /// added, over any CTA's share) or longest first (whole tiles, no merge).
  int32_t longestFirst = 0;
};

std::vector<std::pair<int32_t, int32_t>> lensFor(const ExecCase &k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::pair<int32_t, int32_t>> v;
  int n = k.skewed ? 24 : 12;
  for (int i = 0; i < n; ++i) {
    int32_t qo = std::uniform_int_distribution<int32_t>(0, k.skewed ? 2 : 12)(rng);
    int32_t kv = std::uniform_int_distribution<int32_t>(0, 400)(rng);
    if (k.skewed && i % 8 == 3)
      kv = 4000 + i;
    if (k.causal && qo > kv && i % 3)
      kv = qo + 7; // mostly proper prefill; some rows left with no visible key
    v.push_back({qo, kv});
  }
  v.push_back({0, 0});
  v.push_back({3, 0});
  if (!k.longestFirst && !k.skewed)
    v.push_back({2, 3000});
  return v;
}

void PrintTo(const ExecCase &c, std::ostream *os) { *os << c.name; }

class PlanExecution : public ::testing::TestWithParam<ExecCase> {};

TEST_P(PlanExecution, EqualsDirectAttention) {
  const ExecCase &k = GetParam();
  const int32_t D = 8;
  Batch b = makeBatch(lensFor(k, 17), k.blockSize, 23);
  Tensors t(b, k.hq, k.hkv, D, 31);
  Variant &var = t.problem.variant;
  var.causal = k.causal;
  var.window_left = k.window;
  std::vector<double> sinks = randn(k.hq, 5);
  if (k.sinks)
    var.sinks = sinks.data();
  if (k.softcap)
    var.logits_soft_cap = 1.5;
  var.alibi = k.alibi;
  if (k.rope)
    var.rope = k.rope == 2 ? RopeMode::Llama31 : RopeMode::Standard;
  std::vector<uint8_t> mask;
  if (k.mask) {
    std::mt19937 rng(3);
    for (int32_t r = 0; r < b.size(); ++r) {
      size_t n = size_t(b.qo_indptr[r + 1] - b.qo_indptr[r]) * b.kv_lens[r];
      std::vector<uint8_t> m(n);
      for (auto &x : m)
        x = rng() % 3 != 0;
      if (k.mask == 1) {
        mask.insert(mask.end(), m.begin(), m.end());
      } else {
        std::vector<uint8_t> packed((n + 7) / 8, 0);
        for (size_t i = 0; i < n; ++i)
          packed[i / 8] |= uint8_t(m[i] << (i % 8));
        mask.insert(mask.end(), packed.begin(), packed.end());
      }
    }
    mask.push_back(0); // keep data() non-null for empty masks
    var.custom_mask = mask.data();
    var.mask_bit_packed = k.mask == 2;
  }

  PlanConfig c = makeConfig(k.hq, k.hkv, D, k.blockSize, k.sms, k.qRows,
                            k.kvTile, k.pack, b);
  c.causal = k.causal;
  c.window_left = k.window;
  c.has_custom_mask = k.mask != 0;
  std::vector<int32_t> ws;
  Status s = planInto(c, inputsOf(b), &ws);
  ASSERT_TRUE(s.ok()) << s.message();
  PlanView v{ws.data()};
  if (k.longestFirst) {
    ASSERT_EQ(v.numMergeUnits(), 0) << "case should keep every tile whole";
    ASSERT_EQ(v.numCtas(), c.num_sms * c.ctas_per_sm);
  } else if (k.window < 0) {
    ASSERT_GT(v.numMergeUnits(), 0) << "case should exercise split KV";
  }

  size_t rows = size_t(b.totalRows()) * k.hq;
  std::vector<double> o1(rows * D, 99), l1(rows, 99), o2(rows * D, -99),
      l2(rows, -99);
  ASSERT_TRUE(referenceAttention(t.problem, o1.data(), l1.data()).ok());
  s = referenceExecutePlan(t.problem, v, o2.data(), l2.data());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_LE(maxAbsDiff(o1.data(), o2.data(), o1.size()), 1e-9);
  EXPECT_LE(maxAbsDiff(l1.data(), l2.data(), l1.size()), 1e-9);
  for (double x : o2)
    ASSERT_FALSE(std::isnan(x));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, PlanExecution,
    ::testing::Values(
        ExecCase{"plain_bs16_gqa4", 16, 8, 2, 4, 16, 16, 10},
        ExecCase{"plain_bs1_gqa1", 1, 4, 4, 1, 4, 16, 24},
        ExecCase{"plain_bs64_gqa8", 64, 8, 1, 8, 16, 64, 6},
        ExecCase{"gqa8_unpacked", 16, 8, 1, 1, 4, 16, 24},
        ExecCase{"skewed_bs16_gqa4", 16, 8, 2, 4, 16, 16, 16, 0, -1, 0, 0, 0, 0, 0, 1},
        ExecCase{"skewed_bs1_gqa8", 1, 8, 1, 8, 8, 16, 16, 0, -1, 0, 0, 0, 0, 0, 1},
        ExecCase{"causal_bs16_gqa4", 16, 8, 2, 4, 16, 16, 10, 1},
        ExecCase{"causal_window_bs16", 16, 4, 1, 4, 16, 16, 10, 1, 40},
        ExecCase{"window_nocausal_bs64", 64, 4, 2, 2, 8, 64, 10, 0, 100},
        ExecCase{"sinks_split", 16, 8, 2, 4, 16, 16, 10, 1, -1, 1},
        ExecCase{"softcap_alibi", 16, 6, 2, 3, 12, 16, 10, 1, -1, 0, 1, 1},
        ExecCase{"rope_standard", 16, 4, 1, 4, 16, 16, 10, 1, -1, 0, 0, 0, 1},
        ExecCase{"rope_llama31_sinks", 16, 4, 2, 2, 16, 16, 10, 1, -1, 1, 0, 0, 2},
        ExecCase{"custom_mask_bool", 16, 4, 1, 4, 16, 16, 10, 0, -1, 0, 0, 0, 0, 1},
        ExecCase{"custom_mask_packed_window", 1, 4, 2, 2, 8, 16, 10, 0, 30, 0, 0, 0, 0, 2},
        ExecCase{"longest_first_causal", 16, 8, 2, 4, 16, 16, 4, 1, -1, 0, 0, 0, 0, 0, 0, 1},
        ExecCase{"longest_first_sinks_rope", 1, 4, 2, 2, 8, 16, 4, 1, -1, 1, 0, 0, 2, 0, 0, 1},
        ExecCase{"longest_first_mask", 64, 4, 1, 4, 16, 64, 4, 0, -1, 0, 0, 0, 0, 2, 0, 1}),
    [](const auto &info) { return std::string(info.param.name); });

/// The one-request 131072-token decode: executing the plan is still exact.
TEST(PlanExecutionLong, OneRequestOf131072Tokens) {
  Batch b = makeBatch({{1, 131072}}, 16, 3);
  Tensors t(b, 2, 1, 4, 9);
  PlanConfig c = makeConfig(2, 1, 4, 16, 132, 16, 64, 2, b);
  std::vector<int32_t> ws;
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  PlanView v{ws.data()};
  EXPECT_EQ(v.numItems(), 132);
  EXPECT_EQ(v.numMergeUnits(), 1);
  std::vector<double> o1(8), l1(2), o2(8), l2(2);
  ASSERT_TRUE(referenceAttention(t.problem, o1.data(), l1.data()).ok());
  ASSERT_TRUE(referenceExecutePlan(t.problem, v, o2.data(), l2.data()).ok());
  EXPECT_LE(maxAbsDiff(o1.data(), o2.data(), 8), 1e-9);
  EXPECT_LE(maxAbsDiff(l1.data(), l2.data(), 2), 1e-9);
}

/// The decode-vs-skew sweep's skew 0.25 batch at a quarter of the heads and
/// grid (480 short tiles of 1638 keys, 32 of 8192, on 132 CTAs), which the
/// planner balances with the fixed-target walk: short tiles' CTAs topped up
/// with chunks of the long ones. Executing that plan is still exact.
TEST(PlanExecutionLong, FixedTargetWalkOnTheSkewSweep) {
  std::vector<std::pair<int32_t, int32_t>> lens(64, {1, 1638});
  for (int i = 0; i < 4; ++i)
    lens[i * 16].second = 8192;
  Batch b = makeBatch(lens, 16, 5);
  Tensors t(b, 8, 2, 4, 13);
  PlanConfig c = makeConfig(8, 2, 4, 16, 33, 16, 64, 4, b);
  c.ctas_per_sm = 4;
  c.min_chunk_tokens = 512;
  c.candidates[0] = {16, 64, 4, 128, 1};
  std::vector<int32_t> ws;
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  PlanView v{ws.data()};
  // Short tiles share CTAs with chunks of long ones (the top-up): some CTA
  // holds a whole 1638-key tile and a piece of an 8192-key one.
  bool toppedUp = false;
  for (int32_t cta = 0; cta < v.numCtas(); ++cta) {
    bool whole = false, piece = false;
    for (int32_t i = v.ctaIndptr()[cta]; i < v.ctaIndptr()[cta + 1]; ++i) {
      const WorkItem &it = v.items()[i];
      whole |= (it.flags & kItemDirect) && it.kv_end == 1638;
      piece |= !(it.flags & kItemDirect) && b.kv_lens[it.request] == 8192;
    }
    toppedUp |= whole && piece;
  }
  EXPECT_TRUE(toppedUp);
  const size_t rows = size_t(b.totalRows()) * 8;
  std::vector<double> o1(rows * 4), l1(rows), o2(rows * 4), l2(rows);
  ASSERT_TRUE(referenceAttention(t.problem, o1.data(), l1.data()).ok());
  ASSERT_TRUE(referenceExecutePlan(t.problem, v, o2.data(), l2.data()).ok());
  EXPECT_LE(maxAbsDiff(o1.data(), o2.data(), o1.size()), 1e-9);
  EXPECT_LE(maxAbsDiff(l1.data(), l2.data(), l1.size()), 1e-9);
}

} // namespace
