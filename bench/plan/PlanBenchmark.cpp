//===- PlanBenchmark.cpp - Planner speed for 1..1024 requests -------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Times plan() (validation included, kv_indices validation excluded as a
// serving engine that trusts its page table would) on the docs/Benchmarks.md workload
// shape: 32 query / 8 KV heads, head_dim 128, page size 16, an H200's 132 SMs,
// two candidate tiles. Decode batches are skewed like D3 (1 in 16 requests
// long), or uniform like D1 (2048 keys each: the no-split trial holds);
// prefill batches causal. Target: under 20 us at 256 requests.
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/Plan.h"

#include <benchmark/benchmark.h>

#include <algorithm>

#include <random>
#include <vector>

using namespace attnrt;

namespace {

struct Fixture {
  std::vector<int32_t> qo{0}, kv{0}, last, indices;
  PlanConfig config;
  std::vector<int32_t> ws;

  Fixture(int32_t n, bool prefill, bool graph, bool validateIndices,
          bool uniform) {
    std::mt19937 rng(n);
    int32_t blocks = 0;
    for (int32_t i = 0; i < n; ++i) {
      int32_t q = prefill ? 64 + int32_t(rng() % 1024) : 1;
      int32_t k = prefill ? q : (i % 16 == 3 ? 32768 : 256 + int32_t(rng() % 1024));
      if (uniform)
        k = 2048;
      int32_t nb = (k + 15) / 16;
      qo.push_back(qo.back() + q);
      kv.push_back(kv.back() + nb);
      last.push_back(k - (nb - 1) * 16);
      blocks += nb;
    }
    if (validateIndices)
      for (int32_t i = 0; i < blocks; ++i)
        indices.push_back(i);
    config.num_qo_heads = 32;
    config.num_kv_heads = 8;
    config.head_dim = 128;
    config.block_size = 16;
    config.causal = prefill;
    config.num_sms = 132;
    config.ctas_per_sm = 1;
    config.graph_mode = graph;
    config.max_batch = n;
    config.max_total_q_rows = qo.back();
    config.num_candidates = 2;
    config.candidates[0] = {16, 64, 4, 256, 1};
    config.candidates[1] = {128, 64, 1, 256, 2};
    ws.resize(planHostWorkspaceBytes(config) / 4);
  }

  PlanInputs inputs() const {
    PlanInputs in;
    in.batch = int32_t(last.size());
    in.qo_indptr = qo.data();
    in.kv_indptr = kv.data();
    in.kv_last_len = last.data();
    if (!indices.empty()) {
      in.kv_indices = indices.data();
      in.num_cache_blocks = int32_t(indices.size());
    }
    return in;
  }
};

void run(benchmark::State &state, bool prefill, bool graph, bool indices,
         bool uniform = false, int32_t fixedSplit = 0, bool sm90a = false) {
  Fixture f(int32_t(state.range(0)), prefill, graph, indices, uniform);
  if (sm90a) {
    // The sm_90a decode kernel's launch contract as plan() from Python reads
    // it (its manifest): one candidate, 16 rows packing the GQA group of 4
    // over 16-key tiles, 4 CTAs per SM (528), chunks of at least 512 keys.
    f.config.num_candidates = 1;
    f.config.candidates[0] = {16, 16, 4, 128, 1, 4, 512};
    f.ws.resize(planHostWorkspaceBytes(f.config) / 4);
  }
  if (fixedSplit) {
    // Batch-invariant decode: chunks of fixedSplit keys, the work list sized
    // for the batch's keys.
    f.config.fixed_split_tokens = fixedSplit;
    for (size_t i = 0; i < f.last.size(); ++i)
      f.config.max_kv_tokens += int64_t(f.kv[i + 1] - f.kv[i]) * 16;
    f.ws.resize(planHostWorkspaceBytes(f.config) / 4);
  }
  PlanInputs in = f.inputs();
  for (auto _ : state) {
    Status s = plan(f.config, in, f.ws.data(), f.ws.size() * 4);
    if (!s.ok())
      state.SkipWithError(s.message().c_str());
    benchmark::DoNotOptimize(f.ws.data());
  }
  PlanView v{f.ws.data()};
  state.counters["items"] = v.numItems();
  state.counters["merges"] = v.numMergeUnits();
  state.counters["plan_KiB"] = double(v.bytes()) / 1024;
  // What an upload copies: its host-to-device copies and their bytes.
  PlanSpan spans[kMaxPlanSpans];
  const int32_t n = planUploadSpans(v, spans);
  size_t upload = 0;
  for (int32_t i = 0; i < n; ++i)
    upload += spans[i].bytes;
  state.counters["upload_copies"] = n;
  state.counters["upload_KiB"] = double(upload) / 1024;
  // Balance: the largest CTA's cost over the mean of the whole grid.
  std::vector<int64_t> costs(v.numCtas());
  planCtaCosts(f.config, v, costs.data());
  int64_t total = 0, big = 0;
  for (int64_t x : costs)
    total += x, big = std::max(big, x);
  const int64_t grid =
      getCandidateCtas(f.config, f.config.candidates[v.candidate()]);
  state.counters["max_over_mean"] = total ? double(big) * grid / total : 0;
}

void BM_PlanDecodeSkewed(benchmark::State &s) { run(s, false, false, false); }
void BM_PlanDecodeSkewedGraph(benchmark::State &s) { run(s, false, true, false); }
void BM_PlanDecodeSkewedCheckIndices(benchmark::State &s) { run(s, false, false, true); }
void BM_PlanDecodeUniform(benchmark::State &s) {
  run(s, false, false, false, true);
}
/// The skewed decode batches under the sm_90a decode kernel's contract: the
/// C++ share of the Python decode plan() of bench/harness/plan_overhead.py.
void BM_PlanDecodeSkewedSm90a(benchmark::State &s) {
  run(s, false, false, false, false, 0, true);
}
/// The same in graph mode (CUDAGraphBatchDecodeWithPagedKVCacheWrapper's).
void BM_PlanDecodeSkewedSm90aGraph(benchmark::State &s) {
  run(s, false, true, false, false, 0, true);
}
void BM_PlanDecodeUniformSm90a(benchmark::State &s) {
  run(s, false, false, false, true, 0, true);
}
/// The skewed decode batches with fixed_split_tokens 2048 (vLLM's
/// batch-invariant decode): every request cut at the same keys in any batch.
void BM_PlanDecodeSkewedFixedSplit(benchmark::State &s) {
  run(s, false, false, false, false, 2048);
}
void BM_PlanPrefillCausal(benchmark::State &s) { run(s, true, false, false); }

/// What upload, run and merge add to a plan before any copy: viewPlan()'s
/// full validation of the flat plan (header, CTA index, every merge unit and
/// work item), on the sm_90a skewed decode plans.
void BM_ViewPlanDecodeSkewedSm90a(benchmark::State &state) {
  Fixture f(int32_t(state.range(0)), false, false, false, false);
  f.config.num_candidates = 1;
  f.config.candidates[0] = {16, 16, 4, 128, 1, 4, 512};
  f.ws.resize(planHostWorkspaceBytes(f.config) / 4);
  if (Status s = plan(f.config, f.inputs(), f.ws.data(), f.ws.size() * 4);
      !s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  for (auto _ : state) {
    PlanView v;
    Status s = viewPlan(f.ws.data(), f.ws.size() * 4, &v);
    if (!s.ok())
      state.SkipWithError(s.message().c_str());
    benchmark::DoNotOptimize(v);
  }
  PlanView v{f.ws.data()};
  state.counters["items"] = v.numItems();
  state.counters["plan_KiB"] = double(v.bytes()) / 1024;
  // What the upload moves of it (the stored head-group copy).
  PlanSpan spans[kMaxPlanSpans];
  size_t upload = 0;
  for (int32_t i = 0, n = planUploadSpans(v, spans); i < n; ++i)
    upload += spans[i].bytes;
  state.counters["upload_KiB"] = double(upload) / 1024;
}

/// docs/Benchmarks.md P1 (range 1: one causal 8192-token request) and P2
/// (range 16: 16 causal requests of 256-4096 tokens) on the sm_90a prefill
/// candidate (128 rows packing 4 heads, 128-key tiles): the longest-first
/// assignment.
void BM_PlanPrefillLongestFirst(benchmark::State &state) {
  const int32_t p2[] = {1024, 256, 3840, 2048, 512, 3072, 1536, 4096,
                        768,  2816, 1280, 3584, 1792, 2304, 3328, 2560};
  std::vector<int32_t> qo{0}, kv{0};
  const int32_t n = int32_t(state.range(0));
  for (int32_t i = 0; i < n; ++i) {
    int32_t len = n == 1 ? 8192 : p2[i % 16];
    qo.push_back(qo.back() + len);
    kv.push_back(kv.back() + len);
  }
  PlanConfig c;
  c.num_qo_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.indexing = KVIndexing::Ragged;
  c.causal = 1;
  c.num_sms = 132;
  c.max_batch = n;
  c.max_total_q_rows = qo.back();
  c.num_candidates = 1;
  c.candidates[0] = {128, 128, 4, 256, 1, 1, 0};
  std::vector<int32_t> ws(planHostWorkspaceBytes(c) / 4);
  PlanInputs in;
  in.batch = n;
  in.qo_indptr = qo.data();
  in.kv_indptr = kv.data();
  for (auto _ : state) {
    Status s = plan(c, in, ws.data(), ws.size() * 4);
    if (!s.ok())
      state.SkipWithError(s.message().c_str());
    benchmark::DoNotOptimize(ws.data());
  }
  PlanView v{ws.data()};
  state.counters["items"] = v.numItems();
  state.counters["merges"] = v.numMergeUnits();
}

} // namespace

BENCHMARK(BM_PlanDecodeSkewed)->Arg(1)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanDecodeSkewedGraph)->Arg(1)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanDecodeSkewedCheckIndices)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanDecodeUniform)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanDecodeSkewedFixedSplit)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanDecodeSkewedSm90a)->Arg(1)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanDecodeSkewedSm90aGraph)->Arg(1)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanDecodeUniformSm90a)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ViewPlanDecodeSkewedSm90a)->Arg(1)->Arg(256)->Arg(1024)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanPrefillCausal)->Arg(1)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlanPrefillLongestFirst)->Arg(1)->Arg(16)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
