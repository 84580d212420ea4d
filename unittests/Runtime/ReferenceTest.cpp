//===- ReferenceTest.cpp - The CPU reference follows docs/Semantics.md ----===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Hand-computed cases for each semantic rule (causal alignment, window, soft-cap,
// ALiBi, sinks, RoPE, masks, base-2 LSE, rows with no visible key) and
// equivalences between formats: NHD vs HND, paged vs ragged, block size 1 vs 16,
// composed (cascade) views vs one view, bit-packed vs boolean masks.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace attnrt;
using namespace attnrt::test;

namespace {

constexpr double kLog2e = 1.4426950408889634;
const double kNegInf = -std::numeric_limits<double>::infinity();

/// A single-request ragged problem with Hq = Hkv = 1 and explicit vectors.
struct Tiny {
  std::vector<int32_t> qo{0, 0}, kv{0, 0};
  std::vector<double> q, k, v;
  AttentionProblem p;
  Tiny(int32_t qoLen, std::vector<double> qs, std::vector<double> ks,
       std::vector<double> vs, int32_t d)
      : q(std::move(qs)), k(std::move(ks)), v(std::move(vs)) {
    qo[1] = qoLen;
    kv[1] = int32_t(k.size()) / d;
    p.batch = 1;
    p.qo_indptr = qo.data();
    p.num_qo_heads = p.num_kv_heads = 1;
    p.head_dim = d;
    p.q = q.data();
    p.kv.indexing = KVIndexing::Ragged;
    p.kv.indptr = kv.data();
    p.kv.k = k.data();
    p.kv.v = v.data();
  }
};

} // namespace

TEST(Reference, SingleKeyGivesItsValueAndBase2Lse) {
  Tiny t(1, {2.0, 0.0}, {1.5, 7.0}, {3.0, -4.0}, 2);
  t.p.variant.sm_scale = 0.5;
  double o[2], lse;
  ASSERT_TRUE(referenceAttention(t.p, o, &lse).ok());
  EXPECT_DOUBLE_EQ(o[0], 3.0);
  EXPECT_DOUBLE_EQ(o[1], -4.0);
  EXPECT_NEAR(lse, 1.5 * kLog2e, 1e-12); // s = 2*1.5*0.5
}

TEST(Reference, DefaultScaleIsInverseSqrtHeadDim) {
  Tiny t(1, {1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0, 0}, {1, 1, 1, 1, 0, 0, 0, 0}, 4);
  double o[4], lse;
  ASSERT_TRUE(referenceAttention(t.p, o, &lse).ok());
  double s = 4 / 2.0, w = std::exp(s) / (std::exp(s) + 1);
  EXPECT_NEAR(o[0], w, 1e-12);
  EXPECT_NEAR(lse, std::log2(std::exp(s) + 1), 1e-12);
}

TEST(Reference, CausalIsBottomRightAligned) {
  // 2 queries over 3 keys: row 0 sits at position 1 (sees keys 0,1), row 1 at 2.
  Tiny t(2, {0, 0}, {0, 0, 0}, {1, 10, 100}, 1);
  t.p.variant.causal = 1;
  double o[2], lse[2];
  ASSERT_TRUE(referenceAttention(t.p, o, lse).ok());
  EXPECT_NEAR(o[0], 5.5, 1e-12);
  EXPECT_NEAR(o[1], 37.0, 1e-12);
  EXPECT_NEAR(lse[0], 1.0, 1e-12);
  EXPECT_NEAR(lse[1], std::log2(3.0), 1e-12);
}

TEST(Reference, RowWithNoVisibleKeyIsZeroAndMinusInf) {
  // qo_len > kv_len with causal: row 0 at position -1 sees nothing.
  Tiny t(2, {1, 1}, {1}, {5}, 1);
  t.p.variant.causal = 1;
  double o[2], lse[2];
  ASSERT_TRUE(referenceAttention(t.p, o, lse).ok());
  EXPECT_EQ(o[0], 0.0);
  EXPECT_EQ(lse[0], kNegInf);
  EXPECT_EQ(o[1], 5.0);
  // And a request with no KV at all.
  Tiny e(1, {1}, {}, {}, 1);
  ASSERT_TRUE(referenceAttention(e.p, o, lse).ok());
  EXPECT_EQ(o[0], 0.0);
  EXPECT_EQ(lse[0], kNegInf);
}

TEST(Reference, SlidingWindow) {
  // Decode at position 3 with window 1 sees keys 2 and 3.
  Tiny t(1, {0}, {0, 0, 0, 0}, {1, 2, 3, 5}, 1);
  t.p.variant.causal = 1;
  t.p.variant.window_left = 1;
  double o, lse;
  ASSERT_TRUE(referenceAttention(t.p, &o, &lse).ok());
  EXPECT_NEAR(o, 4.0, 1e-12);
  // Without causal the window adds no upper bound: prefill row 0 (position 2 of
  // 4 keys... qo=2) sees keys >= 1 including the future key 3.
  Tiny u(2, {0, 0}, {0, 0, 0, 0}, {1, 2, 3, 5}, 1);
  u.p.variant.window_left = 1;
  double o2[2], l2[2];
  ASSERT_TRUE(referenceAttention(u.p, o2, l2).ok());
  EXPECT_NEAR(o2[0], (2 + 3 + 5) / 3.0, 1e-12);
}

TEST(Reference, SoftCapOnScaledLogits) {
  Tiny t(1, {2}, {3, 0}, {1, 0}, 1);
  t.p.variant.sm_scale = 0.5;
  t.p.variant.logits_soft_cap = 2.0;
  double o, lse;
  ASSERT_TRUE(referenceAttention(t.p, &o, &lse).ok());
  double s0 = 2.0 * std::tanh(3.0 / 2.0), s1 = 0.0;
  double e0 = std::exp(s0), e1 = std::exp(s1);
  EXPECT_NEAR(o, e0 / (e0 + e1), 1e-12);
  EXPECT_NEAR(lse, std::log2(e0 + e1), 1e-12);
}

TEST(Reference, AlibiSlopesFollowThePaper) {
  EXPECT_DOUBLE_EQ(alibiSlope(0, 8), std::exp2(-1.0));
  EXPECT_DOUBLE_EQ(alibiSlope(7, 8), std::exp2(-8.0));
  // 12 heads: n = 8 for the first 8, then 2^(-4(2k+1)/8).
  EXPECT_DOUBLE_EQ(alibiSlope(7, 12), std::exp2(-8.0));
  EXPECT_DOUBLE_EQ(alibiSlope(8, 12), std::exp2(-0.5));
  EXPECT_DOUBLE_EQ(alibiSlope(11, 12), std::exp2(-3.5));
}

TEST(Reference, AlibiBiasIsNotScaled) {
  // One head (slope 2^-8): keys at 0 and 1, decode at 1; logits 0 and 0 before
  // bias; bias slope*(k - p) = -slope for key 0.
  Tiny t(1, {0}, {0, 0}, {1, 0}, 1);
  t.p.variant.alibi = 1;
  t.p.variant.sm_scale = 10.0;
  double o, lse;
  ASSERT_TRUE(referenceAttention(t.p, &o, &lse).ok());
  double slope = std::exp2(-8.0), e0 = std::exp(-slope);
  EXPECT_NEAR(o, e0 / (e0 + 1), 1e-12);
}

TEST(Reference, SinkJoinsTheDenominatorAndTheLse) {
  Tiny t(1, {0}, {0}, {4}, 1);
  double sink = 0.7;
  t.p.variant.sinks = &sink;
  double o, lse;
  ASSERT_TRUE(referenceAttention(t.p, &o, &lse).ok());
  EXPECT_NEAR(o, 4 / (1 + std::exp(0.7)), 1e-12);
  EXPECT_NEAR(lse, std::log2(1 + std::exp(0.7)), 1e-12);
}

TEST(Reference, RopeDependsOnlyOnRelativePosition) {
  // Request A: keys [k0, k1], decode at 1. Request B: [x, x, k0, k1] with the
  // first two masked, decode at 3. Same relative positions: same output.
  const int32_t D = 8;
  std::vector<double> q = randn(D, 1), k0 = randn(D, 2), k1 = randn(D, 3),
                      x = randn(D, 4), v0 = randn(D, 5), v1 = randn(D, 6);
  auto cat = [](std::initializer_list<std::vector<double>> parts) {
    std::vector<double> r;
    for (auto &p : parts)
      r.insert(r.end(), p.begin(), p.end());
    return r;
  };
  for (RopeMode mode : {RopeMode::Standard, RopeMode::Llama31}) {
    Tiny a(1, q, cat({k0, k1}), cat({v0, v1}), D);
    Tiny b(1, q, cat({x, x, k0, k1}), cat({x, x, v0, v1}), D);
    uint8_t mask[4] = {0, 0, 1, 1};
    for (Tiny *t : {&a, &b}) {
      t->p.variant.rope = mode;
      t->p.variant.rope_theta = 10.0; // fast rotation: positions matter
    }
    b.p.variant.custom_mask = mask;
    double oa[D], ob[D], la, lb;
    ASSERT_TRUE(referenceAttention(a.p, oa, &la).ok());
    ASSERT_TRUE(referenceAttention(b.p, ob, &lb).ok());
    EXPECT_LE(maxAbsDiff(oa, ob, D), 1e-12);
    EXPECT_NEAR(la, lb, 1e-12);
    // And RoPE does change the answer compared with no RoPE.
    a.p.variant.rope = RopeMode::None;
    double on[D], ln;
    ASSERT_TRUE(referenceAttention(a.p, on, &ln).ok());
    EXPECT_GT(std::abs(ln - la), 1e-6);
  }
}

TEST(Reference, Llama31ScalingDiffersFromStandardAtLongRange) {
  const int32_t D = 16;
  std::vector<double> q = randn(D, 1);
  std::vector<double> k = randn(size_t(D) * 20000, 2), v = randn(size_t(D) * 20000, 3);
  Tiny s(1, q, k, v, D), l(1, q, k, v, D);
  s.p.variant.rope = RopeMode::Standard;
  l.p.variant.rope = RopeMode::Llama31;
  s.p.variant.rope_theta = l.p.variant.rope_theta = 500000.0;
  double os[D], ol[D], ls, ll;
  ASSERT_TRUE(referenceAttention(s.p, os, &ls).ok());
  ASSERT_TRUE(referenceAttention(l.p, ol, &ll).ok());
  EXPECT_GT(maxAbsDiff(os, ol, D), 1e-6);
}

TEST(Reference, CustomMaskReplacesCausalAndPackedEqualsBoolean) {
  Batch b = makeBatch({{3, 20}, {2, 9}, {1, 5}}, 4, 1);
  Tensors t(b, 2, 1, 4, 8);
  std::mt19937 rng(1);
  std::vector<uint8_t> boolMask, packed;
  for (int32_t r = 0; r < b.size(); ++r) {
    size_t n = size_t(b.qo_indptr[r + 1] - b.qo_indptr[r]) * b.kv_lens[r];
    std::vector<uint8_t> bits((n + 7) / 8, 0);
    for (size_t i = 0; i < n; ++i) {
      uint8_t x = rng() & 1;
      boolMask.push_back(x);
      bits[i / 8] |= uint8_t(x << (i % 8));
    }
    packed.insert(packed.end(), bits.begin(), bits.end());
  }
  size_t rows = size_t(b.totalRows()) * 2;
  std::vector<double> o1(rows * 4), l1(rows), o2(rows * 4), l2(rows), o3(rows * 4),
      l3(rows);
  t.problem.variant.custom_mask = boolMask.data();
  ASSERT_TRUE(referenceAttention(t.problem, o1.data(), l1.data()).ok());
  t.problem.variant.custom_mask = packed.data();
  t.problem.variant.mask_bit_packed = 1;
  ASSERT_TRUE(referenceAttention(t.problem, o2.data(), l2.data()).ok());
  EXPECT_EQ(maxAbsDiff(o1.data(), o2.data(), o1.size()), 0.0);
  EXPECT_EQ(maxAbsDiff(l1.data(), l2.data(), l1.size()), 0.0);
  t.problem.variant.causal = 1; // ignored under a custom mask
  ASSERT_TRUE(referenceAttention(t.problem, o3.data(), l3.data()).ok());
  EXPECT_EQ(maxAbsDiff(o1.data(), o3.data(), o1.size()), 0.0);
}

/// Rebuilds the same logical cache under another block size or layout.
static std::pair<std::vector<double>, std::vector<double>>
relayout(const Batch &from, const Tensors &t, const Batch &to, KVLayout layout,
         int32_t hkv, int32_t d) {
  std::vector<double> k(size_t(to.num_blocks) * to.block_size * hkv * d),
      v(k.size());
  for (int32_t r = 0; r < from.size(); ++r)
    for (int32_t pos = 0; pos < from.kv_lens[r]; ++pos)
      for (int32_t h = 0; h < hkv; ++h) {
        size_t src = ((size_t(from.kv_indices[from.kv_indptr[r] + pos / from.block_size]) *
                           from.block_size + pos % from.block_size) * hkv + h) * d;
        size_t blk = to.kv_indices[to.kv_indptr[r] + pos / to.block_size];
        size_t off = pos % to.block_size;
        size_t dst = layout == KVLayout::NHD
                         ? ((blk * to.block_size + off) * hkv + h) * d
                         : ((blk * hkv + h) * to.block_size + off) * d;
        std::copy_n(&t.k[src], d, &k[dst]);
        std::copy_n(&t.v[src], d, &v[dst]);
      }
  return {k, v};
}

TEST(Reference, FormatsAgree) {
  std::vector<std::pair<int32_t, int32_t>> lens = {{3, 40}, {1, 17}, {5, 5}, {2, 64}};
  const int32_t hq = 4, hkv = 2, d = 8;
  Batch b16 = makeBatch(lens, 16, 1);
  Tensors t(b16, hq, hkv, d, 3);
  t.problem.variant.causal = 1;
  size_t rows = size_t(b16.totalRows()) * hq;
  std::vector<double> oRef(rows * d), lRef(rows);
  ASSERT_TRUE(referenceAttention(t.problem, oRef.data(), lRef.data()).ok());

  for (int32_t bs : {1, 16, 64})
    for (KVLayout layout : {KVLayout::NHD, KVLayout::HND}) {
      Batch other = makeBatch(lens, bs, 99);
      auto [k, v] = relayout(b16, t, other, layout, hkv, d);
      AttentionProblem p = t.problem;
      p.kv.layout = layout;
      p.kv.block_size = bs;
      p.kv.indptr = other.kv_indptr.data();
      p.kv.indices = other.kv_indices.data();
      p.kv.last_len = other.kv_last_len.data();
      p.kv.num_blocks = other.num_blocks;
      p.kv.k = k.data();
      p.kv.v = v.data();
      std::vector<double> o(rows * d), l(rows);
      ASSERT_TRUE(referenceAttention(p, o.data(), l.data()).ok());
      EXPECT_LE(maxAbsDiff(o.data(), oRef.data(), o.size()), 1e-13) << bs;
      EXPECT_LE(maxAbsDiff(l.data(), lRef.data(), l.size()), 1e-13) << bs;
    }

  // Ragged: contiguous tokens per request.
  Batch ragged = makeBatch(lens, 1, 0, 0);
  std::iota(ragged.kv_indices.begin(), ragged.kv_indices.end(), 0);
  auto [k, v] = relayout(b16, t, ragged, KVLayout::NHD, hkv, d);
  AttentionProblem p = t.problem;
  p.kv.indexing = KVIndexing::Ragged;
  p.kv.indptr = ragged.kv_indptr.data();
  p.kv.k = k.data();
  p.kv.v = v.data();
  std::vector<double> o(rows * d), l(rows);
  ASSERT_TRUE(referenceAttention(p, o.data(), l.data()).ok());
  EXPECT_LE(maxAbsDiff(o.data(), oRef.data(), o.size()), 1e-13);
}

TEST(Reference, ComposedViewsEqualOneView) {
  // Cascade: 3 decode requests share a 40-token prefix (stored once) and have
  // their own 5..9 tokens. One view over [prefix, own] equals the LSE merge of a
  // prefix view and an own-tokens view.
  const int32_t hq = 2, hkv = 1, d = 4, prefix = 40;
  std::vector<int32_t> own = {5, 9, 7};
  Batch full = makeBatch({{1, prefix + own[0]}, {1, prefix + own[1]},
                          {1, prefix + own[2]}}, 1, 0, 0);
  // Token pool: prefix tokens 0..39, then each request's own tokens.
  int32_t pool = prefix + own[0] + own[1] + own[2];
  std::vector<double> k = randn(size_t(pool) * hkv * d, 1),
                      v = randn(size_t(pool) * hkv * d, 2),
                      q = randn(size_t(3) * hq * d, 3);
  full.kv_indices.clear();
  Batch pre = makeBatch({{1, prefix}, {1, prefix}, {1, prefix}}, 1, 0, 0);
  Batch mine = makeBatch({{1, own[0]}, {1, own[1]}, {1, own[2]}}, 1, 0, 0);
  pre.kv_indices.clear();
  mine.kv_indices.clear();
  int32_t next = prefix;
  for (int r = 0; r < 3; ++r) {
    for (int32_t i = 0; i < prefix; ++i) {
      full.kv_indices.push_back(i);
      pre.kv_indices.push_back(i);
    }
    for (int32_t i = 0; i < own[r]; ++i) {
      full.kv_indices.push_back(next + i);
      mine.kv_indices.push_back(next + i);
    }
    next += own[r];
  }
  auto view = [&](const Batch &b) {
    AttentionProblem p;
    p.batch = 3;
    p.qo_indptr = b.qo_indptr.data();
    p.num_qo_heads = hq;
    p.num_kv_heads = hkv;
    p.head_dim = d;
    p.q = q.data();
    p.kv.block_size = 1;
    p.kv.indptr = b.kv_indptr.data();
    p.kv.indices = b.kv_indices.data();
    p.kv.last_len = b.kv_last_len.data();
    p.kv.num_blocks = pool;
    p.kv.k = k.data();
    p.kv.v = v.data();
    return p;
  };
  std::vector<double> o1(3 * hq * d), l1(3 * hq), o2(o1.size()), l2(l1.size());
  ASSERT_TRUE(referenceAttention(view(full), o1.data(), l1.data()).ok());
  ASSERT_TRUE(referenceComposed({view(pre), view(mine)}, o2.data(), l2.data()).ok());
  EXPECT_LE(maxAbsDiff(o1.data(), o2.data(), o1.size()), 1e-12);
  EXPECT_LE(maxAbsDiff(l1.data(), l2.data(), l1.size()), 1e-12);
}

TEST(Reference, MergeOfEmptyStatesIsZeroAndMinusInf) {
  double a[2] = {1, 2}, b[2] = {3, 4}, o[2];
  const double *os[2] = {a, b};
  double ls[2] = {kNegInf, kNegInf}, lse;
  referenceMergeStates(2, 2, os, ls, o, &lse);
  EXPECT_EQ(o[0], 0.0);
  EXPECT_EQ(lse, kNegInf);
  ls[1] = 1.0;
  referenceMergeStates(2, 2, os, ls, o, &lse);
  EXPECT_EQ(o[0], 3.0);
  EXPECT_EQ(lse, 1.0);
}

TEST(Reference, RefusesBadProblems) {
  Batch b = makeBatch({{1, 20}, {2, 5}}, 16, 1);
  Tensors t(b, 4, 2, 4, 1);
  std::vector<double> o(3 * 4 * 4), l(12);
  b.kv_indices[0] = b.num_blocks + 5;
  Status s = referenceAttention(t.problem, o.data(), l.data());
  EXPECT_EQ(s.code(), StatusCode::BlockIndexOutOfRange) << s.message();
  b.kv_indices[0] = 0;
  b.kv_last_len[1] = 0;
  s = referenceAttention(t.problem, o.data(), l.data());
  EXPECT_EQ(s.code(), StatusCode::LastBlockLenOutOfRange) << s.message();
  b.kv_last_len[1] = 5;
  t.problem.num_kv_heads = 3;
  s = referenceAttention(t.problem, o.data(), l.data());
  EXPECT_EQ(s.code(), StatusCode::HeadCountMismatch) << s.message();
}
