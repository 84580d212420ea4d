//===- PlanWorkspaceTest.cpp - Split-KV scratch bounded by the grid -------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Issue #13, "A workspace that fits": the partial buffers (split-KV scratch)
// are sized by the grid (kSplitSlotsPerCta x CTAs x q_rows), not by the
// batch's query rows; the planner never uses more slots than the workspace
// holds, and under a tighter cap (PlanConfig::max_partial_rows) it splits
// fewer tiles, still covering every row's keys exactly once.
//
//===----------------------------------------------------------------------===//

#include "PlanCheck.h"
#include "TestUtil.h"

#include "attn-c/Runtime.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

using namespace attnrt;
using namespace attnrt::test;

namespace {

/// The sm_90a kernels' launch contracts as plan() from Python reads them
/// (32 query / 8 KV heads, head_dim 128, 16-token pages, 132 SMs): decode's
/// one 16-row candidate (528 CTAs, 16-key tiles, 512-key chunks), prefill's
/// three (16 rows on 528 CTAs, 64 on 264, 128 on 132).
PlanConfig sm90a(bool prefill, int32_t maxBatch, int32_t maxRows) {
  PlanConfig c;
  c.num_qo_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.block_size = 16;
  c.causal = prefill;
  c.num_sms = 132;
  c.max_batch = maxBatch;
  c.max_total_q_rows = maxRows;
  c.num_candidates = prefill ? 3 : 1;
  c.candidates[0] = {16, 16, 4, 128, 1, 4, 512};
  c.candidates[1] = {64, 64, 4, 128, 1, 2, 0};
  c.candidates[2] = {128, 128, 4, 128, 1, 1, 0};
  return c;
}

PlanLayout layoutOf(const PlanConfig &c) {
  PlanLayout l;
  Status s = computePlanLayout(c, &l);
  EXPECT_TRUE(s.ok()) << s.message();
  return l;
}

/// The grid's slot bound of candidate i, in rows.
int64_t gridRows(const PlanConfig &c, int32_t i) {
  return kSplitSlotsPerCta * getCandidateCtas(c, c.candidates[i]) *
         c.candidates[i].q_rows;
}

std::vector<std::pair<int32_t, int32_t>> uniformLens(int n, int qo, int kv) {
  return std::vector<std::pair<int32_t, int32_t>>(n, {qo, kv});
}

/// Decode and prefill batches that split: skewed decode (D3), long requests
/// on few tiles (D2, D4), bench/harness/sweeps.py's skew sweep (the
/// fixed-target search and its fillers), causal prefill of a few long
/// requests and a mix.
std::vector<std::pair<std::string, std::vector<std::pair<int32_t, int32_t>>>>
splittingBatches() {
  std::vector<std::pair<std::string, std::vector<std::pair<int32_t, int32_t>>>>
      out;
  std::vector<std::pair<int32_t, int32_t>> d3(64, {1, 512});
  for (int i : {4, 17, 33, 58})
    d3[i].second = 32768;
  out.push_back({"D3", d3});
  out.push_back({"D2", uniformLens(16, 1, 32768)});
  out.push_back({"D4", uniformLens(1, 1, 131072)});
  out.push_back({"50x2048", uniformLens(50, 1, 2048)});
  for (double share : {0.25, 0.5, 0.9}) {
    const int32_t total = 64 * 2048;
    const int32_t longKeys = int32_t(total * share / 4) / 16 * 16;
    const int32_t shortKeys = (total - 4 * longKeys) / 60;
    std::vector<std::pair<int32_t, int32_t>> lens(64, {1, shortKeys});
    for (int i = 0; i < 4; ++i)
      lens[i * 16].second = longKeys;
    out.push_back({"skew" + std::to_string(share), lens});
  }
  out.push_back({"prefill 2x4096", uniformLens(2, 4096, 4096)});
  out.push_back({"prefill 1x8192", uniformLens(1, 8192, 8192)});
  out.push_back({"append 4x64 over 30000", uniformLens(4, 64, 30000)});
  std::vector<std::pair<int32_t, int32_t>> mix;
  for (int i = 0; i < 40; ++i)
    mix.push_back({i % 5 == 0 ? 300 : 1, 100 + 997 * i});
  out.push_back({"mix", mix});
  return out;
}

} // namespace

TEST(PlanWorkspace, PartialRowsFollowTheGridNotTheQueryRows) {
  // 128 requests: the partial buffers stay at the grid's bound from 2048
  // to 131072 query rows (before: items x q_rows, 330 MiB at 16256 rows);
  // only the flat plan (work list, merge map) grows with the tiles.
  const PlanConfig base = sm90a(true, 128, 2048);
  int64_t bound = 0;
  for (int32_t i = 0; i < base.num_candidates; ++i)
    bound = std::max(bound, gridRows(base, i));
  EXPECT_EQ(bound, 2 * 264 * 64); // = 2 x 132 x 128
  for (int32_t rows : {2048, 16256, 131072}) {
    for (int graph : {0, 1}) {
      PlanConfig c = sm90a(true, 128, rows);
      c.graph_mode = graph;
      const PlanLayout l = layoutOf(c);
      EXPECT_EQ(l.partial_rows, bound) << rows;
      const size_t partial = l.device_bytes - l.partial_o_offset;
      EXPECT_EQ(partial, size_t(bound) * (128 + 1) * 4) << rows;
      EXPECT_EQ(l.partial_o_offset, (size_t(l.total_words) * 4 + 255) / 256 * 256);
    }
  }
  // Fewer items than the bound (one decode request): the items bound it.
  PlanConfig one = sm90a(false, 1, 1);
  const PlanLayout l1 = layoutOf(one);
  EXPECT_EQ(l1.partial_rows, int64_t(l1.max_items) * 16);
  EXPECT_LT(l1.partial_rows, gridRows(one, 0));
  // Without splitting nothing is reserved.
  PlanConfig noSplit = sm90a(true, 128, 16256);
  noSplit.disable_split = 1;
  EXPECT_EQ(layoutOf(noSplit).partial_rows, 0);
}

TEST(PlanWorkspace, FlashInferTestConfigsFit256MiB) {
  // The sizes FlashInfer's tests allocate for (256 MiB float workspace),
  // eager and graph mode: decode batches, 128 x 127 query rows, 16 x 512
  // over 4096, one causal 8192-row request, 64 x 512 chunked prefill.
  struct Case {
    const char *name;
    bool prefill;
    int32_t batch, rows;
  };
  const Case cases[] = {{"decode 256", false, 256, 256},
                        {"decode 1024", false, 1024, 1024},
                        {"prefill 128x127", true, 128, 16256},
                        {"prefill 16x512", true, 16, 8192},
                        {"prefill 1x8192", true, 1, 8192},
                        {"prefill 64x512", true, 64, 32768}};
  for (const Case &k : cases)
    for (int graph : {0, 1}) {
      PlanConfig c = sm90a(k.prefill, k.batch, k.rows);
      c.graph_mode = graph;
      const size_t bytes = planDeviceWorkspaceBytes(c);
      EXPECT_GT(bytes, 0u) << k.name;
      EXPECT_LE(bytes, size_t(256) << 20) << k.name << " graph " << graph;
      if (!graph)
        std::printf("[ workspace ] %-16s %10zu bytes (%.1f MiB)\n", k.name,
                    bytes, double(bytes) / (1 << 20));
    }
}

TEST(PlanWorkspace, PlansNeverPassTheReservedSlots) {
  // Every splitting batch, decode and prefill contracts, eager and graph:
  // the plan covers every tile exactly (checkPlan) and its slots stay
  // within max_slots, which is the grid's bound (no tile had to be kept
  // whole for it: a plan's pieces are at most 2 x (CTAs - 1)).
  for (auto &[name, lens] : splittingBatches()) {
    Batch b = makeBatch(lens, 16, 3);
    for (bool prefill : {false, true})
      for (int graph : {0, 1}) {
        PlanConfig c = sm90a(prefill, b.size(), b.totalRows());
        c.graph_mode = graph;
        c.graph_candidate = 0;
        std::vector<int32_t> ws;
        Status s = planInto(c, inputsOf(b), &ws);
        ASSERT_TRUE(s.ok()) << name << ": " << s.message();
        PlanView v{ws.data()};
        SCOPED_TRACE(name + (prefill ? " prefill" : " decode") +
                     (graph ? " graph" : ""));
        checkPlan(c, b, v);
        const int64_t C = getCandidateCtas(c, c.candidates[v.candidate()]);
        EXPECT_LE(v.numSlots(), v.header(kHdrMaxSlots));
        EXPECT_LE(v.numSlots(), 2 * (C - 1));
      }
  }
}

TEST(PlanWorkspace, ATightCapSplitsFewerTilesAndCoversEveryRow) {
  // max_partial_rows below the grid's bound, down to under one slot: the
  // planner keeps tiles whole instead of splitting them (never fails), and
  // each plan still covers every tile's keys once and stays within its
  // slots. Decode (16-row slots) and prefill contracts, eager and graph.
  for (auto &[name, lens] : splittingBatches()) {
    Batch b = makeBatch(lens, 16, 5);
    for (bool prefill : {false, true})
      for (int graph : {0, 1})
        for (int64_t slots : {0, 1, 2, 3, 5, 16, 64, 300}) {
          PlanConfig c = sm90a(prefill, b.size(), b.totalRows());
          c.graph_mode = graph;
          // Rows for `slots` slots of the candidate the batch picks, plus a
          // few (a partial slot's rows are not usable).
          const int32_t cand = selectTileCandidate(
              c.candidates, c.num_candidates, b.totalRows(), b.size());
          const int32_t Q = c.candidates[graph ? 0 : cand].q_rows;
          c.graph_candidate = 0;
          c.max_partial_rows = slots * Q + Q / 2 + 1;
          const PlanLayout l = layoutOf(c);
          EXPECT_LE(l.partial_rows, c.max_partial_rows);
          std::vector<int32_t> ws;
          Status s = planInto(c, inputsOf(b), &ws);
          ASSERT_TRUE(s.ok()) << name << " slots " << slots << ": "
                              << s.message();
          PlanView v{ws.data()};
          SCOPED_TRACE(name + (prefill ? " prefill" : " decode") +
                       (graph ? " graph" : "") + " slots " +
                       std::to_string(slots));
          checkPlan(c, b, v);
          // Within the grid's bound the cap decides the slots.
          EXPECT_EQ(v.header(kHdrMaxSlots), l.partial_rows / Q);
          EXPECT_LE(v.header(kHdrMaxSlots), slots);
          EXPECT_LE(v.numSlots(), slots);
          if (slots < 2)
            EXPECT_EQ(v.numMergeUnits(), 0);
          if (graph)
            EXPECT_EQ(v.numCtas(), getCandidateCtas(c, c.candidates[0]));
          EXPECT_LE(v.deviceBytes(), l.device_bytes);
        }
  }
}

TEST(PlanWorkspace, TheCapOnlyChangesPlansThatNeedMore) {
  // A cap at or above a plan's slots gives the same plan, byte for byte.
  Batch b = makeBatch(splittingBatches()[0].second, 16, 9);
  PlanConfig c = sm90a(false, b.size(), b.totalRows());
  std::vector<int32_t> free, capped;
  ASSERT_TRUE(planInto(c, inputsOf(b), &free).ok());
  PlanView v{free.data()};
  ASSERT_GT(v.numSlots(), 0);
  c.max_partial_rows = int64_t(v.numSlots()) * 16;
  ASSERT_TRUE(planInto(c, inputsOf(b), &capped).ok());
  PlanView w{capped.data()};
  ASSERT_EQ(v.bytes(), w.bytes());
  // The header's max_slots and partial_lse offset follow the cap; the work
  // list is the same.
  const int32_t from = v.header(kHdrOffCtaIndptr);
  EXPECT_TRUE(std::equal(free.begin() + from,
                         free.begin() + v.header(kHdrTotalWords),
                         capped.begin() + from));
  EXPECT_EQ(w.header(kHdrMaxSlots), v.numSlots());
}

TEST(PlanWorkspace, AFixedSplitKeepsItsExactChunksOrIsRefused) {
  // Batch-invariant chunks cannot be traded for scratch: the fixed split's
  // slots stay its own bound (max_kv_tokens), and a cap below what a batch
  // needs is GraphMaximaExceeded naming max_partial_rows, not other chunks.
  Batch b = makeBatch(uniformLens(8, 1, 8192), 16, 2);
  PlanConfig c = sm90a(false, b.size(), b.totalRows());
  c.fixed_split_tokens = 2048;
  c.max_kv_tokens = 8 * 8192;
  const PlanLayout l = layoutOf(c);
  EXPECT_EQ(l.partial_rows, int64_t(l.max_items) * 16);
  std::vector<int32_t> ws;
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  PlanView v{ws.data()};
  checkPlan(c, b, v);
  const int32_t need = v.numSlots();
  EXPECT_EQ(need, 8 * 8 * 4); // 8 requests x 8 head groups x 4 chunks
  c.max_partial_rows = int64_t(need) * 16;
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  c.max_partial_rows = int64_t(need - 1) * 16;
  Status s = planInto(c, inputsOf(b), &ws);
  EXPECT_EQ(s.code(), StatusCode::GraphMaximaExceeded);
  EXPECT_NE(s.message().find("max_partial_rows"), std::string::npos)
      << s.message();
  // disable_split wins and needs no slot.
  c.disable_split = 1;
  c.max_partial_rows = 0;
  EXPECT_EQ(layoutOf(c).partial_rows, 0);
  ASSERT_TRUE(planInto(c, inputsOf(b), &ws).ok());
  EXPECT_EQ(PlanView{ws.data()}.numSlots(), 0);
}

TEST(PlanWorkspace, NegativeCapIsRefusedByName) {
  PlanConfig c = sm90a(false, 4, 4);
  c.max_partial_rows = -1;
  PlanLayout l;
  Status s = computePlanLayout(c, &l);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("max_partial_rows"), std::string::npos);
}

TEST(PlanWorkspace, TheCApiCarriesTheCap) {
  attnRtPlanConfig c = {};
  c.num_qo_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.indexing = ATTN_RT_KV_PAGED;
  c.block_size = 16;
  c.window_left = -1;
  c.num_sms = 132;
  c.ctas_per_sm = 1;
  c.max_batch = 16;
  c.max_total_q_rows = 16;
  c.num_candidates = 1;
  c.candidates[0] = {16, 64, 4, 32, 1, 4, 512};
  size_t host = 0, full = 0, capped = 0;
  ASSERT_EQ(attnRtPlanWorkspaceSize(&c, &host, &full), ATTN_RT_OK);
  c.max_partial_rows = 16 * 8;
  ASSERT_EQ(attnRtPlanWorkspaceSize(&c, &host, &capped), ATTN_RT_OK);
  EXPECT_LT(capped, full);
  std::vector<int32_t> qo(17), kv(17), last(16, 16);
  for (int i = 0; i <= 16; ++i)
    qo[i] = i, kv[i] = 2048 * i; // 16 x 32768 keys: D2, which splits
  attnRtPlanInputs in = {};
  in.batch = 16;
  in.qo_indptr = qo.data();
  in.kv_indptr = kv.data();
  in.kv_last_len = last.data();
  std::vector<int32_t> ws(host / 4);
  attnRtPlanSummary sum;
  ASSERT_EQ(attnRtPlan(&c, &in, ws.data(), host, &sum), ATTN_RT_OK)
      << attnRtLastError();
  EXPECT_GT(sum.num_slots, 0);
  EXPECT_LE(sum.num_slots, 8);
}
