//===- PlanLimitsTest.cpp - Planner limits, plan-buffer checks, adversaries ===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Issue #15's runtime findings as tests: sizes that overflow int32 words or
// size_t bytes are refused with the field's name (they used to give Ok with
// no work, loop forever or under-size the workspace); viewPlan refuses every
// corrupted header field and array it relies on; the device workspace size
// is checked before an upload; and thousands of seeded random and
// adversarial planner inputs, through the C++ and C APIs, give either an
// error or a plan that passes checkPlan.
//
//===----------------------------------------------------------------------===//

#include "PlanCheck.h"
#include "TestUtil.h"

#include "attn-c/Runtime.h"
#include "attn/Runtime/Launcher.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

using namespace attnrt;
using namespace attnrt::test;

namespace {

constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
/// Host workspaces above this are not allocated by the random tests.
constexpr size_t kMaxTestBytes = size_t(64) << 20;

/// One head, one candidate, ragged KV: the smallest config to vary.
PlanConfig tinyConfig(int32_t qRows, int32_t pack = 1) {
  PlanConfig c;
  c.num_qo_heads = pack;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.indexing = KVIndexing::Ragged;
  c.num_sms = 4;
  c.max_batch = 2;
  c.max_total_q_rows = 64;
  c.num_candidates = 1;
  c.candidates[0] = {qRows, 64, pack, 32, 1, 0, 0};
  return c;
}

void expectRefused(const PlanConfig &c, const char *needle) {
  PlanLayout l;
  Status s = computePlanLayout(c, &l);
  EXPECT_FALSE(s.ok()) << "accepted; host " << l.host_bytes << " device "
                       << l.device_bytes;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  EXPECT_EQ(planHostWorkspaceBytes(c), 0u);
  EXPECT_EQ(planDeviceWorkspaceBytes(c), 0u);
}

/// The batch of ragged inputs, as checkPlan reads it.
Batch raggedBatch(const std::vector<int32_t> &qo, const std::vector<int32_t> &kv) {
  Batch b;
  for (size_t i = 0; i + 1 < qo.size(); ++i) {
    b.qo_indptr.push_back(qo[i + 1]);
    b.kv_indptr.push_back(kv[i + 1]);
    b.kv_lens.push_back(kv[i + 1] - kv[i]);
  }
  return b;
}

PlanInputs raggedInputs(const Batch &b) {
  PlanInputs in;
  in.batch = b.size();
  in.qo_indptr = b.qo_indptr.data();
  in.kv_indptr = b.kv_indptr.data();
  return in;
}

} // namespace

//===----------------------------------------------------------------------===//
// 64-bit limits of the config and the batch
//===----------------------------------------------------------------------===//

TEST(PlanLimits, PackedRowsOverInt32AreRefused) {
  // Issue #15: q=128 / gqa_pack=8, 8 query heads on 1 KV head, 2^28 query
  // tokens: 2^31 packed rows wrapped to 0 and planned Ok with no work items.
  PlanConfig c = tinyConfig(128, 8);
  c.max_batch = 1;
  c.max_total_q_rows = 1 << 28;
  expectRefused(c, "max_total_q_rows");
  attnRtPlanConfig cc;
  std::memcpy(&cc, &c, sizeof(cc));
  static_assert(sizeof(cc) == sizeof(c));
  size_t host = 1, device = 1;
  EXPECT_EQ(attnRtPlanWorkspaceSize(&cc, &host, &device),
            ATTN_RT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnRtLastError()).find("gqa_pack"), std::string::npos)
      << attnRtLastError();
}

TEST(PlanLimits, RowTilesNearInt32TerminateAndCover) {
  // Issue #15: a 2^30-row candidate over 2^31-1 rows: r += Q wrapped and the
  // planner never returned. Now two tiles, the second of 2^30-1 rows.
  PlanConfig c = tinyConfig(1 << 30);
  c.head_dim = 1;
  c.max_batch = 1;
  c.max_total_q_rows = kI32Max;
  Batch b = raggedBatch({0, kI32Max}, {0, 100});
  std::vector<int32_t> ws;
  Status s = planInto(c, raggedInputs(b), &ws);
  ASSERT_TRUE(s.ok()) << s.message();
  PlanView v;
  ASSERT_TRUE(viewPlan(ws.data(), ws.size() * 4, &v).ok());
  EXPECT_EQ(v.numItems(), 2);
  checkPlan(c, b, v);
}

TEST(PlanLimits, DeviceWorkspaceOver64BitsIsRefused) {
  // Issue #15: head_dim = q_rows = 2^30 sized the workspace at 16 GiB where
  // it needs over 2^64 bytes.
  PlanConfig c = tinyConfig(1 << 30);
  c.head_dim = 1 << 30;
  c.max_total_q_rows = 1 << 30;
  expectRefused(c, "head_dim");
  c.head_dim = kI32Max;
  c.candidates[0].q_rows = kI32Max;
  expectRefused(c, "device workspace");
}

TEST(PlanLimits, EachMaximumNamesItsField) {
  {
    PlanConfig c = tinyConfig(1);
    c.max_total_q_rows = kI32Max; // 2^31 row tiles
    expectRefused(c, "max_total_q_rows");
  }
  {
    PlanConfig c = tinyConfig(16);
    c.max_batch = kI32Max;
    expectRefused(c, "max_batch");
  }
  {
    PlanConfig c = tinyConfig(16);
    c.num_qo_heads = kI32Max;
    c.num_kv_heads = 1;
    expectRefused(c, "num_qo_heads");
  }
  {
    PlanConfig c = tinyConfig(16);
    c.num_sms = kI32Max;
    c.ctas_per_sm = 2;
    expectRefused(c, "num_sms");
    c.ctas_per_sm = kI32Max;
    c.num_sms = 1 << 16;
    expectRefused(c, "ctas_per_sm");
  }
  {
    // A chunk granule of whole blocks past 2^31-1 keys.
    PlanConfig c = tinyConfig(16);
    c.indexing = KVIndexing::Paged;
    c.block_size = (1 << 30) + 1;
    c.candidates[0].kv_tile = kI32Max;
    expectRefused(c, "kv_tile");
  }
  {
    // Plenty of each, together over the plan's words.
    PlanConfig c = tinyConfig(16, 8);
    c.num_qo_heads = 64;
    c.num_kv_heads = 8;
    c.candidates[0].gqa_pack = 8;
    c.max_batch = 1 << 22;
    c.max_total_q_rows = 1 << 24;
    expectRefused(c, "max_batch");
  }
}

TEST(PlanLimits, HugeCostsAreRefusedNotWrapped) {
  // Issue #15: cost sums overflowed (UBSan). 2^20 query rows of 2^31-1 keys
  // each, at 2^31-1 per key: far over 2^63.
  PlanConfig c = tinyConfig(16);
  c.max_batch = 1;
  c.max_total_q_rows = 1 << 20;
  c.candidates[0].cost_per_kv_token = kI32Max;
  c.candidates[0].cost_per_item = kI32Max;
  Batch b = raggedBatch({0, 1 << 20}, {0, kI32Max});
  std::vector<int32_t> ws;
  for (int causal : {0, 1}) {
    c.causal = causal;
    Status s = planInto(c, raggedInputs(b), &ws);
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument) << s.message();
    EXPECT_NE(s.message().find("cost_per_kv_token"), std::string::npos)
        << s.message();
  }
}

TEST(PlanLimits, LooseCostBoundFallsBackToTheExactSum) {
  // The O(1) bound (every tile over the batch's longest KV) is over the
  // limit, the true cost is not: planned, and every invariant holds.
  PlanConfig c = tinyConfig(16);
  c.max_total_q_rows = (1 << 20) + 1;
  c.candidates[0].cost_per_kv_token = 1 << 20;
  Batch b = raggedBatch({0, 1, (1 << 20) + 1}, {0, kI32Max - 1, kI32Max});
  for (int causal : {0, 1}) {
    c.causal = causal;
    std::vector<int32_t> ws;
    Status s = planInto(c, raggedInputs(b), &ws);
    ASSERT_TRUE(s.ok()) << s.message();
    PlanView v;
    ASSERT_TRUE(viewPlan(ws.data(), ws.size() * 4, &v).ok());
    checkPlan(c, b, v);
  }
}

TEST(PlanLimits, SelectTileCandidateRefusesOutOfRangeCounts) {
  attnRtTileCandidate t[2] = {{16, 64, 4, 32, 1, 0, 0}, {128, 64, 4, 32, 1, 0, 0}};
  EXPECT_EQ(attnRtSelectTileCandidate(t, 2, 4, 4), 0);
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(attnRtSelectTileCandidate(t, 2, big, 1), -1);
  EXPECT_EQ(attnRtSelectTileCandidate(t, 2, 1, big), -1);
  EXPECT_EQ(attnRtSelectTileCandidate(t, 2, -1, 1), -1);
  EXPECT_EQ(attnRtSelectTileCandidate(t, 9, 1, 1), -1);
}

//===----------------------------------------------------------------------===//
// viewPlan: every field it relies on
//===----------------------------------------------------------------------===//

namespace {

/// A plan with split tiles and merge units (D3's skew on 16 CTAs).
struct SplitPlan {
  Batch b;
  PlanConfig c;
  std::vector<int32_t> ws;
  SplitPlan() {
    std::vector<std::pair<int32_t, int32_t>> lens(12, {1, 300});
    lens[3].second = 9000;
    lens[7] = {4, 4000}; // one row tile a request: head groups copied
    b = makeBatch(lens, 16, 3);
    c = makeConfig(8, 2, 64, 16, 16, 16, 64, 4, b);
    Status s = planInto(c, inputsOf(b), &ws);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  PlanView view() const { return PlanView{ws.data()}; }
};

} // namespace

TEST(PlanView, RefusesEachCorruptedField) {
  SplitPlan p;
  PlanView v0 = p.view();
  ASSERT_GT(v0.numMergeUnits(), 0) << "the fixture must split";
  ASSERT_GT(v0.copies(), 1) << "the fixture must store one head group's work";
  ASSERT_TRUE(viewPlan(p.ws.data(), p.ws.size() * 4, &v0).ok());
  const int32_t offItems = p.ws[kHdrOffItems], offCta = p.ws[kHdrOffCtaIndptr],
                offMi = p.ws[kHdrOffMergeIndptr], offMu = p.ws[kHdrOffMergeUnits];
  const int32_t offQo = p.ws[kHdrOffQoIndptr], offKv = p.ws[kHdrOffKvIndptr],
                offLast = p.ws[kHdrOffKvLastLen];
  // Index of a split item (slot >= 0).
  int32_t split = -1;
  for (int32_t i = 0; i < v0.copyItems() && split < 0; ++i)
    if (v0.items()[i].slot >= 0)
      split = i;
  ASSERT_GE(split, 0);
  auto itemWord = [&](int32_t i, int32_t w) { return offItems + i * kWorkItemWords + w; };
  struct Mutation {
    const char *name;
    int32_t word, value;
    const char *needle;
  };
  const std::vector<Mutation> cases = {
      {"num_items over max", kHdrNumItems, p.ws[kHdrMaxItems] + 1, "num_items"},
      {"negative num_ctas", kHdrNumCtas, -1, "num_ctas"},
      {"negative merge units", kHdrNumMergeUnits, -5, "num_merge_units"},
      {"slots over max", kHdrNumSlots, p.ws[kHdrMaxSlots] + 1, "num_slots"},
      {"total_words past the buffer", kHdrTotalWords, int32_t(p.ws.size()) + 1,
       "total_words"},
      {"items before the CTA index", kHdrOffItems, offCta, "off_items"},
      {"merge units past total_words", kHdrOffMergeUnits, p.ws[kHdrTotalWords],
       "total_words"},
      {"cta index at 0", kHdrOffCtaIndptr, 0, "off_cta_indptr"},
      {"qo_indptr inside the header", kHdrOffQoIndptr, kHdrReserved, "off_qo_indptr"},
      {"kv_indptr over qo_indptr", kHdrOffKvIndptr, offQo + 1, "off_kv_indptr"},
      {"kv_last_len over kv_indptr", kHdrOffKvLastLen, offKv, "off_kv_last_len"},
      {"batch over max_batch", kHdrBatch, p.ws[kHdrMaxBatch] + 1, "batch"},
      {"negative max_batch", kHdrMaxBatch, -1, "max_batch"},
      {"qo_indptr from 1", offQo, 1, "qo_indptr"},
      {"qo_indptr ends short", offQo + v0.batch(), v0.header(kHdrTotalQRows) - 1,
       "qo_indptr"},
      {"qo_indptr decreases", offQo + 2, -1, "decreases"},
      {"kv_indptr from 1", offKv, 1, "kv_indptr"},
      {"kv_indptr decreases", offKv + 3, 0, "decreases"},
      {"negative kv_last_len", offLast + 1, -1, "kv_last_len"},
      {"partial_o 2^52", kHdrPartialOOffsetHi, 1 << 20, "partial_o"},
      {"partial_lse misaligned", kHdrPartialLseOffsetLo,
       p.ws[kHdrPartialLseOffsetLo] + 4, "partial_lse"},
      {"partial_lse inside partial_o", kHdrPartialLseOffsetLo,
       p.ws[kHdrPartialOOffsetLo], "partial_lse"},
      {"zero tile", kHdrTileQ, 0, "tile_q"},
      {"slot rows under the tile", kHdrSlotRows, p.ws[kHdrTileQ] - 1, "slot_rows"},
      {"head groups disagree", kHdrNumHeadGroups, p.ws[kHdrNumHeadGroups] + 1,
       "num_head_groups"},
      {"candidate 8", kHdrCandidate, 8, "candidate"},
      {"graph mode 2", kHdrGraphMode, 2, "graph_mode"},
      {"cta_indptr starts at 1", offCta, 1, "cta_indptr"},
      {"cta_indptr decreases", offCta + 1, p.ws[offCta + 2] + 1, "cta_indptr"},
      {"cta_indptr ends short", offCta + v0.copyCtas(), v0.copyItems() - 1,
       "cta_indptr"},
      {"merge_indptr ends short", offMi + v0.copyUnits(),
       v0.header(kHdrCopySlots) - 1, "merge_indptr"},
      {"no copies", kHdrCopies, 0, "copies"},
      {"copies past the head groups", kHdrCopies,
       v0.header(kHdrNumHeadGroups) + 1, "copies"},
      {"copies not dividing the items", kHdrCopies, v0.copies() + 1, "copies"},
      {"copy CTAs past the grid", kHdrCopyCtas, v0.numCtas() + 1, "copy"},
      {"copy groups past the head groups", kHdrCopyGroups,
       v0.header(kHdrNumHeadGroups) / v0.copies() + 1, "copy"},
      {"copy units disagree", kHdrCopyUnits, v0.copyUnits() - 1, "copy"},
      {"copy slots disagree", kHdrCopySlots, v0.header(kHdrCopySlots) + 1,
       "copy"},
      {"merge unit request", offMu, v0.header(kHdrBatch), "merge unit 0"},
      {"merge unit rows", offMu + 3, 0, "merge unit 0"},
      {"item request past the batch", itemWord(0, 0), v0.header(kHdrBatch),
       "work item 0"},
      {"item negative head group", itemWord(0, 1), -1, "work item 0"},
      {"item zero rows", itemWord(0, 3), 0, "work item 0"},
      {"item rows past the tile", itemWord(0, 3), v0.tileQ() + 1, "work item 0"},
      {"item rows past the batch", itemWord(0, 2), kI32Max - 1, "work item 0"},
      {"item keys reversed", itemWord(0, 4), v0.items()[0].kv_end + 1,
       "key range"},
      {"item negative keys", itemWord(0, 4), -3, "key range"},
      {"item slot past its copy's slots", itemWord(split, 6),
       v0.header(kHdrCopySlots), "partial slot"},
      {"split item without slot", itemWord(split, 6), -1, "partial slot"},
      {"direct item with a slot", itemWord(0, 6), 0, "direct item"},
      {"unknown flag", itemWord(0, 7), 8 | 7, "flags"},
  };
  for (const Mutation &m : cases) {
    std::vector<int32_t> bad = p.ws;
    if (m.word == itemWord(0, 6) && (bad[itemWord(0, 7)] & kItemDirect) == 0)
      continue; // item 0 is split: the direct-item case does not apply
    bad[m.word] = m.value;
    PlanView v;
    Status s = viewPlan(bad.data(), bad.size() * 4, &v);
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument) << m.name;
    EXPECT_NE(s.message().find(m.needle), std::string::npos)
        << m.name << ": " << s.message();
  }
  // A buffer shorter than the plan's words.
  PlanView v;
  EXPECT_FALSE(viewPlan(p.ws.data(), size_t(p.ws[kHdrTotalWords]) * 4 - 4, &v).ok());
  EXPECT_FALSE(viewPlan(p.ws.data(), 64, &v).ok());
  // Foreign bytes.
  std::vector<int32_t> foreign(p.ws.size(), 0x41414141);
  EXPECT_FALSE(viewPlan(foreign.data(), foreign.size() * 4, &v).ok());
}

TEST(PlanView, RandomWordMutationsAreRefusedOrSafe) {
  // Any single-word change either fails viewPlan or leaves a plan whose
  // arrays a consumer can walk inside the buffer (ASan checks the walk).
  SplitPlan p;
  const int32_t words = p.ws[kHdrTotalWords];
  std::mt19937 rng(15);
  const int32_t values[] = {-1, 0, 1, 2, 7, 255, kI32Max, -kI32Max - 1, 1 << 20};
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<int32_t> bad(p.ws.begin(), p.ws.begin() + words);
    int32_t at = iter < 4000 ? iter % kPlanHeaderWords : int32_t(rng() % words);
    uint32_t pick = rng() % 12;
    bad[at] = pick < 9 ? values[pick] : bad[at] + int32_t(pick) - 10 + (pick == 10);
    PlanView v;
    if (!viewPlan(bad.data(), bad.size() * 4, &v).ok())
      continue;
    ++accepted;
    int64_t sum = 0;
    for (int32_t c = 0; c < v.numCtas(); ++c) {
      int32_t first, last;
      v.ctaItems(c, &first, &last);
      for (int32_t i = first; i < last; ++i)
        sum += v.item(i).kv_end - v.item(i).kv_begin;
    }
    for (int32_t u = 0; u < v.numMergeUnits(); ++u) {
      int32_t s0, s1;
      v.unitSlots(u, &s0, &s1);
      sum += v.unit(u).row_count + s1 - s0;
    }
    EXPECT_LE(v.deviceBytes(), planDeviceWorkspaceBytes(p.c) + (size_t(1) << 48));
    EXPECT_GE(sum, 0);
  }
  EXPECT_GT(accepted, 0); // e.g. key ranges and reserved words
}

TEST(PlanView, DeviceWorkspaceSizeIsChecked) {
  SplitPlan p;
  PlanView v;
  ASSERT_TRUE(viewPlan(p.ws.data(), p.ws.size() * 4, &v).ok());
  const size_t need = planDeviceWorkspaceBytes(p.c);
  EXPECT_LE(v.deviceBytes(), need);
  EXPECT_GT(v.deviceBytes(), v.partialLseOffset());
  EXPECT_TRUE(checkDeviceWorkspace(v, 0x10000, need).ok());
  Status s = checkDeviceWorkspace(v, 0x10000, v.deviceBytes() - 1);
  EXPECT_EQ(s.code(), StatusCode::WorkspaceTooSmall);
  EXPECT_NE(s.message().find(std::to_string(v.deviceBytes())), std::string::npos)
      << s.message();
  EXPECT_EQ(checkDeviceWorkspace(v, 0, need).code(), StatusCode::InvalidArgument);
  EXPECT_EQ(checkDeviceWorkspace(v, 0x10004, need).code(),
            StatusCode::InvalidArgument);
  // Through the C API: refused before any copy, with or without a GPU.
  EXPECT_EQ(attnRtUploadPlanSized(p.ws.data(), p.ws.size() * 4, 0x10000,
                                  v.deviceBytes() - 1, 0),
            ATTN_RT_WORKSPACE_TOO_SMALL);
  EXPECT_NE(std::string(attnRtLastError()).find("device workspace"),
            std::string::npos);
  std::vector<int32_t> bad = p.ws;
  bad[kHdrNumItems] = -1;
  EXPECT_EQ(attnRtUploadPlanSized(bad.data(), bad.size() * 4, 0x10000, need, 0),
            ATTN_RT_INVALID_ARGUMENT);
  EXPECT_EQ(attnRtRunSized(nullptr, "a", nullptr, p.ws.data(), p.ws.size() * 4,
                           0x10000, need, nullptr, 0, 0),
            ATTN_RT_INVALID_ARGUMENT);
  EXPECT_EQ(attnRtMergeSized(nullptr, "m", p.ws.data(), p.ws.size() * 4,
                             0x10000, need, nullptr, 0, 0),
            ATTN_RT_INVALID_ARGUMENT);
}

//===----------------------------------------------------------------------===//
// Adversarial planner inputs
//===----------------------------------------------------------------------===//

namespace {

/// a + b wrapping like the hardware (no signed overflow in the test).
int32_t wrapAdd(int32_t a, int32_t b) { return int32_t(uint32_t(a) + uint32_t(b)); }

/// Random config and inputs, some valid, most broken in one or more ways.
struct Adversary {
  std::mt19937 rng;
  explicit Adversary(uint32_t seed) : rng(seed) {}

  int32_t pick(std::initializer_list<int32_t> v) {
    return *(v.begin() + rng() % v.size());
  }
  int32_t uniform(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  }
  bool chance(int percent) { return int(rng() % 100) < percent; }
  /// A value near the edges or anywhere.
  int32_t wild() {
    return pick({-1, 0, 1, 2, 3, 16, 17, 1 << 16, 1 << 28, 1 << 30, kI32Max,
                 -kI32Max - 1, int32_t(rng())});
  }

  PlanConfig config() {
    PlanConfig c;
    const int32_t hkv = pick({1, 2, 8}), group = pick({1, 2, 4, 8});
    c.num_qo_heads = hkv * group;
    c.num_kv_heads = hkv;
    c.head_dim = pick({8, 64, 128});
    c.indexing = chance(60) ? KVIndexing::Paged : KVIndexing::Ragged;
    c.block_size = pick({1, 4, 16});
    c.causal = chance(50);
    c.window_left = chance(25) ? uniform(0, 300) : -1;
    c.has_custom_mask = chance(10);
    c.num_sms = uniform(1, 40);
    c.ctas_per_sm = uniform(1, 3);
    c.max_batch = uniform(0, 24);
    c.max_total_q_rows = uniform(0, 600);
    c.min_chunk_tokens = chance(30) ? uniform(0, 300) : 0;
    c.disable_split = chance(15);
    c.num_candidates = uniform(1, 3);
    for (int32_t i = 0; i < c.num_candidates; ++i) {
      const int32_t pack = pick({1, 2, 4, 8});
      c.candidates[i] = {pick({1, 16, 64, 128}), pick({16, 64, 128}),
                         group % pack == 0 ? pack : 1, uniform(0, 64),
                         uniform(1, 4), uniform(0, 2), chance(20) ? uniform(0, 200) : 0};
    }
    c.graph_mode = chance(20);
    c.graph_candidate = uniform(0, c.num_candidates - 1);
    // A cap on the split scratch (issue #13): fewer tiles split, never an
    // error.
    if (chance(20))
      c.max_partial_rows = uniform(0, 3000);
    // Break the config now and then.
    if (chance(8)) {
      int32_t *fields[] = {&c.num_qo_heads, &c.num_kv_heads, &c.head_dim,
                           &c.block_size, &c.num_sms, &c.ctas_per_sm,
                           &c.max_batch, &c.max_total_q_rows, &c.graph_candidate,
                           &c.num_candidates, &c.candidates[0].q_rows,
                           &c.candidates[0].gqa_pack, &c.candidates[0].kv_tile,
                           &c.candidates[0].cost_per_kv_token,
                           &c.candidates[0].cost_per_item,
                           &c.candidates[0].ctas_per_sm};
      *fields[rng() % (sizeof(fields) / sizeof(fields[0]))] = wild();
    }
    return c;
  }

  /// Inputs owned by `store`; `batch` may claim more requests than the
  /// arrays hold only when it exceeds max_batch (the planner must refuse
  /// before reading).
  struct Store {
    std::vector<int32_t> qo, kv, last, lens, idx;
  };
  PlanInputs inputs(const PlanConfig &c, Store *s) {
    const int32_t n = uniform(0, std::clamp(c.max_batch, 1, 40));
    s->qo.assign(1, 0);
    s->kv.assign(1, 0);
    s->last.clear();
    s->lens.clear();
    const int32_t bs = std::max(1, c.block_size);
    for (int32_t b = 0; b < n; ++b) {
      const int32_t q = chance(70) ? uniform(0, 4) : uniform(0, 200);
      const int32_t tokens = chance(80) ? uniform(0, 700) : uniform(0, 5000);
      const int32_t blocks = int32_t((int64_t(tokens) + bs - 1) / bs);
      s->qo.push_back(s->qo.back() + q);
      if (c.indexing == KVIndexing::Ragged) {
        s->kv.push_back(s->kv.back() + tokens);
      } else {
        s->kv.push_back(s->kv.back() + blocks);
        s->last.push_back(blocks ? int32_t(tokens - int64_t(blocks - 1) * bs) : 0);
      }
      s->lens.push_back(tokens);
    }
    PlanInputs in;
    in.batch = n;
    in.qo_indptr = s->qo.data();
    in.kv_indptr = s->kv.data();
    in.kv_last_len = c.indexing == KVIndexing::Paged ? s->last.data() : nullptr;
    if (c.indexing == KVIndexing::Paged && chance(30))
      in.kv_lens = s->lens.data();
    if (c.indexing == KVIndexing::Paged && chance(60)) {
      in.num_cache_blocks = s->kv.back() + uniform(0, 5);
      s->idx.resize(s->kv.back());
      for (int32_t &x : s->idx)
        x = uniform(0, std::max(0, in.num_cache_blocks - 1));
      in.kv_indices = s->idx.data();
    }
    // Corruptions, each in range of the arrays.
    const int corruptions = chance(40) ? 0 : uniform(1, 3);
    for (int k = 0; k < corruptions; ++k) {
      switch (rng() % 11) {
      case 0: // non-monotone or huge indptr entries
        if (n > 0)
          s->qo[uniform(1, n)] = wild();
        break;
      case 1:
        if (n > 0)
          s->kv[uniform(0, n)] = wild();
        break;
      case 2: // negative or out-of-range last lengths
        if (!s->last.empty())
          s->last[rng() % s->last.size()] = pick({0, -1, wrapAdd(bs, 1), kI32Max});
        break;
      case 3: // kv_lens that disagree with the blocks
        if (!s->lens.empty()) {
          int32_t &len = s->lens[rng() % s->lens.size()];
          len = wrapAdd(len, pick({-bs, -1, 1, bs, kI32Max / 2}));
          if (c.indexing == KVIndexing::Paged)
            in.kv_lens = s->lens.data();
        }
        break;
      case 4: // block indices out of range
        if (!s->idx.empty())
          s->idx[rng() % s->idx.size()] = pick({-1, in.num_cache_blocks, kI32Max});
        break;
      case 5:
        in.num_cache_blocks = pick({0, -1});
        break;
      case 6: // more requests than max_batch (nothing past the arrays is read)
        in.batch = int32_t(std::min<int64_t>(
            int64_t(c.max_batch) + uniform(1, 1 << 20), kI32Max));
        if (in.batch <= c.max_batch)
          in.batch = n; // max_batch is 2^31-1: nothing above it
        break;
      case 7:
        in.batch = pick({-1, -kI32Max - 1});
        break;
      case 8:
        in.qo_indptr = nullptr;
        break;
      case 9:
        in.kv_last_len = nullptr;
        if (chance(50))
          in.kv_lens = nullptr;
        break;
      case 10: // the last query row past max_total_q_rows
        s->qo.back() = wrapAdd(c.max_total_q_rows, uniform(1, 100));
        break;
      }
    }
    // kv_indices holds kv_indptr[batch] entries (the caller's contract: the
    // planner cannot see the array's length).
    if (in.kv_indices && n >= 0 && s->kv[n] > int32_t(s->idx.size())) {
      if (s->kv[n] <= (1 << 20)) {
        s->idx.resize(s->kv[n], 0);
        in.kv_indices = s->idx.data();
      } else {
        in.kv_indices = nullptr;
      }
    }
    return in;
  }
};

/// The batch plan() accepted, as checkPlan reads it.
Batch batchOf(const PlanConfig &c, const PlanInputs &in) {
  Batch b;
  b.block_size = c.block_size;
  for (int32_t r = 0; r < in.batch; ++r) {
    b.qo_indptr.push_back(in.qo_indptr[r + 1]);
    b.kv_indptr.push_back(in.kv_indptr[r + 1]);
    const int32_t n = in.kv_indptr[r + 1] - in.kv_indptr[r];
    int32_t len = n;
    if (c.indexing == KVIndexing::Paged)
      len = in.kv_lens ? in.kv_lens[r]
                       : (n == 0 ? 0 : (n - 1) * c.block_size + in.kv_last_len[r]);
    b.kv_lens.push_back(len);
  }
  return b;
}

} // namespace

TEST(PlanAdversarial, RandomAndBrokenInputsGiveAnErrorOrAValidPlan) {
  Adversary adv(20240615);
  int ok = 0, refused = 0;
  std::map<StatusCode, int> codes;
  std::vector<int32_t> ws;
  for (int iter = 0; iter < 6000; ++iter) {
    const PlanConfig c = adv.config();
    Adversary::Store store;
    const PlanInputs in = adv.inputs(c, &store);
    const size_t bytes = planHostWorkspaceBytes(c);
    if (bytes > kMaxTestBytes) {
      // A valid config of a huge plan: a small buffer is refused (not filled).
      ws.assign(256, -7);
      ASSERT_EQ(plan(c, in, ws.data(), ws.size() * 4).code(),
                StatusCode::WorkspaceTooSmall);
      continue;
    }
    ws.assign(bytes / 4 + 1, -7);
    Status s = plan(c, in, ws.data(), bytes);
    if (!s.ok()) {
      ++refused;
      ++codes[s.code()];
      ASSERT_FALSE(s.message().empty()) << "iteration " << iter;
      continue;
    }
    ++ok;
    PlanView v;
    Status vs = viewPlan(ws.data(), bytes, &v);
    ASSERT_TRUE(vs.ok()) << "iteration " << iter << ": " << vs.message();
    ASSERT_LE(v.deviceBytes(), planDeviceWorkspaceBytes(c));
    const Batch b = batchOf(c, in);
    checkPlan(c, b, v);
    if (::testing::Test::HasFatalFailure()) {
      ADD_FAILURE() << "iteration " << iter;
      return;
    }
  }
  // Both outcomes well represented, and several distinct errors.
  EXPECT_GT(ok, 1000);
  EXPECT_GT(refused, 1000);
  EXPECT_GE(codes.size(), 5u);
  RecordProperty("planned", ok);
  RecordProperty("refused", refused);
}

TEST(PlanAdversarial, TheCApiAgreesWithTheCppApi) {
  Adversary adv(77);
  std::vector<int32_t> a, b;
  for (int iter = 0; iter < 2000; ++iter) {
    PlanConfig c = adv.config();
    Adversary::Store store;
    const PlanInputs in = adv.inputs(c, &store);
    attnRtPlanConfig cc;
    std::memcpy(&cc, &c, sizeof(cc));
    attnRtPlanInputs ci = {in.batch,       in.qo_indptr, in.kv_indptr,
                           in.kv_last_len, in.kv_lens,   in.kv_indices,
                           in.num_cache_blocks};
    size_t host = 0, device = 0;
    attnRtStatus sz = attnRtPlanWorkspaceSize(&cc, &host, &device);
    PlanLayout l;
    EXPECT_EQ(int(sz), int(computePlanLayout(c, &l).code()));
    if (host > kMaxTestBytes)
      host = 1024;
    a.assign(host / 4 + 1, 0);
    b.assign(host / 4 + 1, 0);
    attnRtPlanSummary sum;
    attnRtStatus cs = attnRtPlan(&cc, &ci, a.data(), host, &sum);
    Status s = plan(c, in, b.data(), host);
    ASSERT_EQ(int(cs), int(s.code())) << attnRtLastError() << " / " << s.message();
    if (s.ok()) {
      const size_t words = size_t(b[kHdrTotalWords]);
      EXPECT_TRUE(std::equal(a.begin(), a.begin() + words, b.begin()))
          << "iteration " << iter;
      EXPECT_EQ(sum.num_items, PlanView{b.data()}.numItems());
    } else if (c.num_candidates >= 0 && c.num_candidates <= kMaxTileCandidates) {
      // (The C API words a bad candidate count its own way.)
      EXPECT_EQ(std::string(attnRtLastError()), s.message());
    }
  }
}
