//===- CAPITest.cpp - The C API: sizing, plan, errors ---------------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//

#include "attn-c/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace {

attnRtPlanConfig decodeConfig() {
  attnRtPlanConfig c = {};
  c.num_qo_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.indexing = ATTN_RT_KV_PAGED;
  c.block_size = 16;
  c.window_left = -1;
  c.num_sms = 132;
  c.ctas_per_sm = 1;
  c.max_batch = 8;
  c.max_total_q_rows = 8;
  c.num_candidates = 1;
  c.candidates[0] = {16, 64, 4, 32, 1};
  return c;
}

} // namespace

TEST(CAPI, SizesPlansAndSummarizes) {
  attnRtPlanConfig c = decodeConfig();
  size_t host = 0, device = 0;
  ASSERT_EQ(attnRtPlanWorkspaceSize(&c, &host, &device), ATTN_RT_OK);
  EXPECT_GT(host, 0u);
  EXPECT_GT(device, host);
  std::vector<int32_t> qo = {0, 1, 2}, kv = {0, 100, 2100}, last = {16, 16};
  attnRtPlanInputs in = {};
  in.batch = 2;
  in.qo_indptr = qo.data();
  in.kv_indptr = kv.data();
  in.kv_last_len = last.data();
  std::vector<int32_t> ws(host / 4);
  attnRtPlanSummary sum;
  ASSERT_EQ(attnRtPlan(&c, &in, ws.data(), host, &sum), ATTN_RT_OK)
      << attnRtLastError();
  EXPECT_GT(sum.num_items, 16);
  EXPECT_GT(sum.num_merge_units, 0);
  EXPECT_EQ(sum.tile_q, 16);
  // The upload copies the flat plan, not the planner's scratch after it.
  EXPECT_GT(sum.plan_bytes, 0u);
  EXPECT_LT(sum.plan_bytes, host);
  EXPECT_STREQ(attnRtLastError(), "");
}

TEST(CAPI, ErrorsCarryCodeAndMessage) {
  attnRtPlanConfig c = decodeConfig();
  size_t host = 0;
  ASSERT_EQ(attnRtPlanWorkspaceSize(&c, &host, nullptr), ATTN_RT_OK);
  std::vector<int32_t> ws(host / 4);
  std::vector<int32_t> qo = {0, 1, 0}, kv = {0, 1, 2}, last = {3, 3};
  attnRtPlanInputs in = {};
  in.batch = 2;
  in.qo_indptr = qo.data();
  in.kv_indptr = kv.data();
  in.kv_last_len = last.data();
  EXPECT_EQ(attnRtPlan(&c, &in, ws.data(), host, nullptr),
            ATTN_RT_NON_MONOTONE_INDPTR);
  EXPECT_NE(std::string(attnRtLastError()).find("qo_indptr"), std::string::npos);
  EXPECT_STREQ(attnRtStatusName(ATTN_RT_NON_MONOTONE_INDPTR), "NonMonotoneIndptr");
  qo = {0, 1, 2};
  EXPECT_EQ(attnRtPlan(&c, &in, ws.data(), host - 4, nullptr),
            ATTN_RT_WORKSPACE_TOO_SMALL);
  EXPECT_EQ(attnRtPlan(nullptr, &in, ws.data(), host, nullptr),
            ATTN_RT_INVALID_ARGUMENT);
  c.num_candidates = 99;
  EXPECT_EQ(attnRtPlanWorkspaceSize(&c, &host, nullptr), ATTN_RT_INVALID_ARGUMENT);
  // Uploading garbage is refused before touching the driver.
  std::vector<int32_t> junk(64, 0);
  EXPECT_EQ(attnRtUploadPlan(junk.data(), junk.size() * 4, 0x1000, 0),
            ATTN_RT_INVALID_ARGUMENT);
  attnRtModule_t m = nullptr;
  attnRtStatus s = attnRtModuleLoad("x", 1, "{not json", &m);
  EXPECT_EQ(s, ATTN_RT_MANIFEST_PARSE_ERROR);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(attnRtModuleLoadFiles("/nonexistent.cubin", "/nonexistent.json", &m),
            ATTN_RT_NOT_FOUND);
}

TEST(CAPI, PlanAndUploadPlansAsPlanThenChecksTheDeviceWorkspace) {
  // attnRtPlanAndUpload writes attnRtPlan's plan and refuses, before any
  // copy (so with or without a GPU), a null or too small device workspace;
  // the planner's own errors come first.
  attnRtPlanConfig c = decodeConfig();
  c.max_batch = c.max_total_q_rows = 16;
  size_t host = 0, device = 0;
  ASSERT_EQ(attnRtPlanWorkspaceSize(&c, &host, &device), ATTN_RT_OK);
  std::vector<int32_t> qo(17), kv(17), last(16, 16);
  for (int i = 0; i <= 16; ++i)
    qo[i] = i, kv[i] = 2048 * i; // 16 x 32768 keys
  attnRtPlanInputs in = {};
  in.batch = 16;
  in.qo_indptr = qo.data();
  in.kv_indptr = kv.data();
  in.kv_last_len = last.data();
  std::vector<int32_t> planned(host / 4), both(host / 4);
  attnRtPlanSummary a, b;
  ASSERT_EQ(attnRtPlan(&c, &in, planned.data(), host, &a), ATTN_RT_OK);
  ASSERT_GT(a.plan_bytes, 1024u);
  EXPECT_EQ(attnRtPlanAndUpload(&c, &in, both.data(), host, 0x10000, 1024, 0, &b),
            ATTN_RT_WORKSPACE_TOO_SMALL);
  EXPECT_NE(std::string(attnRtLastError()).find("device workspace"),
            std::string::npos)
      << attnRtLastError();
  EXPECT_TRUE(std::equal(planned.begin(), planned.begin() + a.plan_bytes / 4,
                         both.begin()));
  EXPECT_EQ(attnRtPlanAndUpload(&c, &in, both.data(), host, 0, device, 0, &b),
            ATTN_RT_INVALID_ARGUMENT);
  kv[3] = 1; // kv_indptr decreases: the planner's error, nothing copied
  EXPECT_NE(attnRtPlanAndUpload(&c, &in, both.data(), host, 0x10000, device, 0,
                                &b),
            ATTN_RT_OK);
  EXPECT_NE(std::string(attnRtLastError()).find("kv_indptr"), std::string::npos)
      << attnRtLastError();
}

TEST(CAPI, PlanAndUploadWithChecksAsPlanAndUpload) {
  // The options change how the copies are queued, not what is refused first:
  // a null or too small device workspace, before any copy; and an unknown
  // copy kernel is named (a null module: the driver's copies).
  attnRtPlanConfig c = decodeConfig();
  c.max_batch = c.max_total_q_rows = 4;
  size_t host = 0, device = 0;
  ASSERT_EQ(attnRtPlanWorkspaceSize(&c, &host, &device), ATTN_RT_OK);
  std::vector<int32_t> qo = {0, 1, 2, 3, 4}, kv = {0, 8, 16, 24, 32}, last(4, 16);
  attnRtPlanInputs in = {};
  in.batch = 4;
  in.qo_indptr = qo.data();
  in.kv_indptr = kv.data();
  in.kv_last_len = last.data();
  std::vector<int32_t> ws(host / 4);
  attnRtUploadOptions o = {};
  o.kv_indptr_dst = 0x20000;
  attnRtPlanSummary s;
  EXPECT_EQ(attnRtPlanAndUploadWith(&c, &in, ws.data(), host, 0, device, &o, 0, &s),
            ATTN_RT_INVALID_ARGUMENT);
  EXPECT_EQ(attnRtPlanAndUploadWith(&c, &in, ws.data(), host, 0x10000, 64, &o, 0, &s),
            ATTN_RT_WORKSPACE_TOO_SMALL);
  EXPECT_EQ(attnRtPlanAndUploadWith(&c, &in, ws.data(), host, 0x10000, 64, nullptr, 0,
                                    &s),
            ATTN_RT_WORKSPACE_TOO_SMALL);
}

TEST(CAPI, HostMappingIsAnAnswerNotAnError) {
  int32_t mapped = 7;
  EXPECT_EQ(attnRtHostIsDeviceMapped(&mapped, 4, nullptr), ATTN_RT_INVALID_ARGUMENT);
  // Pageable memory: no (OK with a driver, CUDA_UNAVAILABLE without one).
  std::vector<int32_t> pageable(64);
  attnRtStatus st = attnRtHostIsDeviceMapped(pageable.data(), 256, &mapped);
  EXPECT_TRUE(st == ATTN_RT_OK || st == ATTN_RT_CUDA_UNAVAILABLE) << st;
  EXPECT_EQ(mapped, 0);
  EXPECT_EQ(attnRtHostIsDeviceMapped(nullptr, 0, &mapped), ATTN_RT_OK);
  EXPECT_EQ(mapped, 0);
}

TEST(CAPI, UploadFenceRefusesNullArguments) {
  EXPECT_EQ(attnRtFenceCreate(nullptr), ATTN_RT_INVALID_ARGUMENT);
  EXPECT_EQ(attnRtFenceRecord(nullptr, 0), ATTN_RT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnRtLastError()).find("fence is null"), std::string::npos);
  EXPECT_EQ(attnRtFenceWait(nullptr), ATTN_RT_INVALID_ARGUMENT);
  EXPECT_EQ(attnRtStreamIsCapturing(0, nullptr), ATTN_RT_INVALID_ARGUMENT);
  attnRtFence_t f = nullptr;
  ASSERT_EQ(attnRtFenceCreate(&f), ATTN_RT_OK); // no device needed until a record
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(attnRtFenceWait(f), ATTN_RT_OK);
  attnRtFenceDestroy(f);
  attnRtFenceDestroy(nullptr);
}

TEST(CAPI, CopiesRefuseNullPointersAndSkipEmptyOnes) {
  EXPECT_EQ(attnRtCopyOnDevice(0, 64, 256, 0), ATTN_RT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnRtLastError()).find("source or destination is null"),
            std::string::npos);
  EXPECT_EQ(attnRtCopyOnDevice(256, 64, 0, 0), ATTN_RT_INVALID_ARGUMENT);
  EXPECT_EQ(attnRtCopyToDevice(nullptr, 64, 256, 0), ATTN_RT_INVALID_ARGUMENT);
  // Nothing to copy: no device needed.
  EXPECT_EQ(attnRtCopyOnDevice(0, 0, 0, 0), ATTN_RT_OK);
  EXPECT_EQ(attnRtCopyToDevice(nullptr, 0, 0, 0), ATTN_RT_OK);
}
