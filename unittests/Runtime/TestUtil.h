//===- TestUtil.h - Random batches and caches for runtime tests -*- C++ -*-===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Builds seeded random batches (uniform, skewed, with empty requests) over a
// paged cache whose pages are a random permutation of the pool, as docs/Benchmarks.md
// describes, plus the PlanConfig/PlanInputs/AttentionProblem that view them.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_UNITTESTS_RUNTIME_TESTUTIL_H
#define ATTN_UNITTESTS_RUNTIME_TESTUTIL_H

#include "attn/Runtime/Plan.h"
#include "attn/Runtime/Reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace attnrt::test {

/// A batch over a paged cache; owns every array.
struct Batch {
  int32_t block_size = 16;
  std::vector<int32_t> qo_indptr{0}, kv_indptr{0}, kv_indices, kv_last_len,
      kv_lens;
  int32_t num_blocks = 0;

  int32_t size() const { return int32_t(kv_lens.size()); }
  int32_t totalRows() const { return qo_indptr.back(); }
};

/// Builds a paged batch from per-request (qo_len, kv_len); pages are a seeded
/// permutation of a pool with `spare` unused blocks.
inline Batch makeBatch(const std::vector<std::pair<int32_t, int32_t>> &lens,
                       int32_t blockSize, uint32_t seed, int32_t spare = 3) {
  Batch b;
  b.block_size = blockSize;
  int32_t blocks = 0;
  for (auto [qo, kv] : lens) {
    int32_t nb = (kv + blockSize - 1) / blockSize;
    b.qo_indptr.push_back(b.qo_indptr.back() + qo);
    b.kv_indptr.push_back(b.kv_indptr.back() + nb);
    b.kv_last_len.push_back(nb == 0 ? 0 : kv - (nb - 1) * blockSize);
    b.kv_lens.push_back(kv);
    blocks += nb;
  }
  b.num_blocks = blocks + spare;
  std::vector<int32_t> perm(b.num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  b.kv_indices.assign(perm.begin(), perm.begin() + blocks);
  return b;
}

inline PlanInputs inputsOf(const Batch &b, bool withIndices = true) {
  PlanInputs in;
  in.batch = b.size();
  in.qo_indptr = b.qo_indptr.data();
  in.kv_indptr = b.kv_indptr.data();
  in.kv_last_len = b.kv_last_len.data();
  if (withIndices) {
    in.kv_indices = b.kv_indices.data();
    in.num_cache_blocks = b.num_blocks;
  }
  return in;
}

/// A config with one candidate (q_rows, kv_tile, gqa_pack).
inline PlanConfig makeConfig(int32_t hq, int32_t hkv, int32_t headDim,
                             int32_t blockSize, int32_t sms, int32_t qRows,
                             int32_t kvTile, int32_t pack, const Batch &b) {
  PlanConfig c;
  c.num_qo_heads = hq;
  c.num_kv_heads = hkv;
  c.head_dim = headDim;
  c.block_size = blockSize;
  c.num_sms = sms;
  c.ctas_per_sm = 1;
  c.max_batch = std::max(1, b.size());
  c.max_total_q_rows = std::max(1, b.totalRows());
  c.num_candidates = 1;
  c.candidates[0] = {qRows, kvTile, pack, 32, 1};
  return c;
}

/// Random N(0,1) float64 values.
inline std::vector<double> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d;
  std::vector<double> v(n);
  for (double &x : v)
    x = d(rng);
  return v;
}

/// Owns Q and a paged NHD K/V cache for a Batch, and the problem that views it.
struct Tensors {
  std::vector<double> q, k, v;
  AttentionProblem problem;
  Tensors(const Batch &b, int32_t hq, int32_t hkv, int32_t d, uint32_t seed) {
    q = randn(size_t(b.totalRows()) * hq * d, seed);
    k = randn(size_t(b.num_blocks) * b.block_size * hkv * d, seed + 1);
    v = randn(size_t(b.num_blocks) * b.block_size * hkv * d, seed + 2);
    problem.batch = b.size();
    problem.qo_indptr = b.qo_indptr.data();
    problem.num_qo_heads = hq;
    problem.num_kv_heads = hkv;
    problem.head_dim = d;
    problem.q = q.data();
    problem.kv.indexing = KVIndexing::Paged;
    problem.kv.layout = KVLayout::NHD;
    problem.kv.block_size = b.block_size;
    problem.kv.indptr = b.kv_indptr.data();
    problem.kv.indices = b.kv_indices.data();
    problem.kv.last_len = b.kv_last_len.data();
    problem.kv.num_blocks = b.num_blocks;
    problem.kv.k = k.data();
    problem.kv.v = v.data();
  }
};

/// Plans into a fresh workspace; returns the status, workspace in `ws`.
inline Status planInto(const PlanConfig &c, const PlanInputs &in,
                       std::vector<int32_t> *ws) {
  ws->assign(planHostWorkspaceBytes(c) / 4 + 1, -7);
  return plan(c, in, ws->data(), ws->size() * 4);
}

/// Maximum |a-b| over n values; inf-aware (equal infinities give 0).
inline double maxAbsDiff(const double *a, const double *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (a[i] == b[i])
      continue;
    double d = std::abs(a[i] - b[i]);
    if (std::isnan(d))
      return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

} // namespace attnrt::test

#endif // ATTN_UNITTESTS_RUNTIME_TESTUTIL_H
