//===- HostCallsTest.cpp - the attnRtHost* entries' argument checks -------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// What attn-lower-host-calls' generated code calls, refused before the
// driver: null pointers, sizes that disagree with the manifest, kernels
// absent from it or of another role. Without a GPU, a call that passes
// every check ends in CudaUnavailable (its first driver use), never Ok.
//
//===----------------------------------------------------------------------===//

#include "attn-c/Runtime.h"
#include "attn/Runtime/HostCalls.h"
#include "attn/Runtime/Launcher.h"

#include <gtest/gtest.h>

#include <string>

using namespace attnrt;

namespace {

// Decode (GQA 32/8, head_dim 128, pages of 16), its merge, two row kernels.
const char *kManifest = R"json({"attn_manifest_version": 1, "arch": "sm_90a", "kernels": [
  {"name": "attn_decode", "role": "attention", "threads": 96, "shared_bytes": 0,
   "tile": {"q": 16, "kv": 16, "gqa_pack": 4},
   "format": {"block_rows": 1, "block_cols": 16, "layout": "NHD", "indexing": "paged"},
   "dtype": "bf16", "head_dim": 128, "num_qo_heads": 32, "num_kv_heads": 8,
   "args": [{"name": "cta_indptr", "kind": "ptr"}, {"name": "work_items", "kind": "ptr"},
            {"name": "partial_o", "kind": "ptr"}, {"name": "partial_lse", "kind": "ptr"}]},
  {"name": "attn_merge", "role": "merge", "threads": 256, "shared_bytes": 0,
   "dtype": "bf16", "head_dim": 128, "num_qo_heads": 32, "num_kv_heads": 8,
   "args": [{"name": "plan", "kind": "ptr"}, {"name": "merge_indptr", "kind": "ptr"},
            {"name": "merge_units", "kind": "ptr"}, {"name": "partial_o", "kind": "ptr"},
            {"name": "partial_lse", "kind": "ptr"}]},
  {"name": "attn_merge_states_bf16_d128_n2", "role": "merge_states",
   "threads": 256, "shared_bytes": 0, "ctas_per_sm": 32, "rows_per_cta": 16,
   "dtype": "bf16", "head_dim": 128, "num_qo_heads": 0, "num_kv_heads": 0,
   "args": [{"name": "num_rows", "kind": "i32"}, {"name": "heads", "kind": "i32"},
            {"name": "v0", "kind": "ptr"}, {"name": "v1", "kind": "ptr"},
            {"name": "v_stride", "kind": "i64"},
            {"name": "s0", "kind": "ptr"}, {"name": "s1", "kind": "ptr"},
            {"name": "s_stride", "kind": "i64"}, {"name": "o", "kind": "ptr"},
            {"name": "o_stride", "kind": "i64"}, {"name": "lse", "kind": "ptr"},
            {"name": "lse_stride", "kind": "i64"}]},
  {"name": "attn_append_kv_bf16_d128_p16", "role": "append_kv",
   "threads": 256, "shared_bytes": 0, "ctas_per_sm": 32, "rows_per_cta": 16,
   "dtype": "bf16", "head_dim": 128, "num_qo_heads": 0, "num_kv_heads": 0,
   "format": {"block_rows": 1, "block_cols": 16, "layout": "NHD", "indexing": "paged"},
   "args": [{"name": "num_rows", "kind": "i32"}, {"name": "heads", "kind": "i32"}]}
]})json";

constexpr uint64_t kPtr = 0x1000; // never dereferenced: checks come first

/// A decode batch of 2 requests, 2 query rows, 4 pages, that passes every
/// check.
struct Decode {
  attnRtEmbeddedModule module{"not a cubin", 11, kManifest, nullptr};
  const char *kernels = "attn_decode", *merges = "attn_merge";
  int64_t q = 2 * 32 * 128, k = 4 * 16 * 8 * 128, o = q, lse = 2 * 32;
  int64_t indptr = 3, indices = 4, lastLen = 2;
  uint64_t qPtr = kPtr, kvIndices = kPtr;
  float scale = 0.088f;

  attnRtStatus call() {
    return attnRtHostAttention(&module, kernels, merges, /*causal=*/1, -1, qPtr,
                               q, kPtr, k, kPtr, k, kPtr, o, kPtr, lse, kPtr,
                               indptr, kPtr, indptr, kvIndices, indices, kPtr,
                               lastLen, scale, 0, 0, 0);
  }
};

TEST(HostCalls, AttentionPassesTheChecksThenNeedsTheDriver) {
  Decode d;
  attnRtStatus s = d.call();
  if (cudaAvailable().ok())
    GTEST_SKIP() << "a GPU is present; the integration test runs this";
  EXPECT_EQ(s, ATTN_RT_CUDA_UNAVAILABLE) << attnRtLastError();
  const char *message = nullptr;
  EXPECT_EQ(attnRtHostTakeStatus(&message), ATTN_RT_CUDA_UNAVAILABLE);
  EXPECT_EQ(attnRtHostTakeStatus(&message), ATTN_RT_OK); // taken
}

TEST(HostCalls, AttentionRefusesNulls) {
  Decode d;
  EXPECT_EQ(attnRtHostAttention(nullptr, "attn_decode", "attn_merge", 0, -1, 0,
                                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                0, 1.f, 0, 0, 0),
            ATTN_RT_INVALID_ARGUMENT);
  d.qPtr = 0;
  EXPECT_EQ(d.call(), ATTN_RT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnRtLastError()).find("q is null"),
            std::string::npos);
  Decode paged;
  paged.kvIndices = 0; // a paged kernel needs its page table
  EXPECT_EQ(paged.call(), ATTN_RT_INVALID_ARGUMENT);
  attnRtHostTakeStatus(nullptr);
}

TEST(HostCalls, AttentionRefusesAnEmptyCacheWithPagesToRead) {
  // num_pages = 0: a bad index would have no page 0 to fall back on.
  Decode empty;
  empty.k = 0;
  EXPECT_EQ(empty.call(), ATTN_RT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnRtLastError()).find("no pages"), std::string::npos)
      << attnRtLastError();
  attnRtHostTakeStatus(nullptr);
}

TEST(HostCalls, TakeStatusWithNoFailureIsOk) {
  // No index_error word is set (none exists without a GPU).
  attnRtHostTakeStatus(nullptr);
  const char *message = nullptr;
  EXPECT_EQ(attnRtHostTakeStatus(&message), ATTN_RT_OK);
  ASSERT_NE(message, nullptr);
  EXPECT_EQ(std::string(message), "");
  EXPECT_TRUE(takeIndexErrors().ok());
}

TEST(HostCalls, AttentionRefusesSizesTheManifestDisagreesWith) {
  Decode rows;
  rows.q = 2 * 32 * 128 + 64; // not whole rows of 32 heads x 128
  EXPECT_EQ(rows.call(), ATTN_RT_MANIFEST_MISMATCH);
  EXPECT_NE(std::string(attnRtLastError()).find("not whole rows of 4096"),
            std::string::npos)
      << attnRtLastError();
  Decode lse;
  lse.lse = 3 * 32;
  EXPECT_EQ(lse.call(), ATTN_RT_MANIFEST_MISMATCH);
  Decode cache;
  cache.k = 4 * 16 * 8 * 128 + 1;
  EXPECT_EQ(cache.call(), ATTN_RT_MANIFEST_MISMATCH);
  Decode lastLen;
  lastLen.lastLen = 3;
  EXPECT_EQ(lastLen.call(), ATTN_RT_INVALID_ARGUMENT);
  Decode scale;
  scale.scale = 0;
  EXPECT_EQ(scale.call(), ATTN_RT_INVALID_ARGUMENT);
  attnRtHostTakeStatus(nullptr);
}

TEST(HostCalls, AttentionRefusesUnknownKernels) {
  Decode missing;
  missing.kernels = "attn_prefill";
  EXPECT_EQ(missing.call(), ATTN_RT_NOT_FOUND);
  Decode role;
  role.kernels = "attn_merge";
  EXPECT_EQ(role.call(), ATTN_RT_INVALID_ARGUMENT);
  Decode count;
  count.merges = "attn_merge,attn_merge";
  EXPECT_EQ(count.call(), ATTN_RT_INVALID_ARGUMENT);
  attnRtHostTakeStatus(nullptr);
}

TEST(HostCalls, ABadManifestIsAParseError) {
  Decode d;
  d.module.manifest_json = "{";
  EXPECT_EQ(d.call(), ATTN_RT_MANIFEST_PARSE_ERROR);
  attnRtHostTakeStatus(nullptr);
}

TEST(HostCalls, MergeStatesChecks) {
  attnRtEmbeddedModule module{"x", 1, kManifest, nullptr};
  uint64_t states[2] = {kPtr, kPtr}, lses[2] = {kPtr, kPtr};
  const char *kernel = "attn_merge_states_bf16_d128_n2";
  EXPECT_EQ(attnRtHostMergeStates(&module, kernel, 3, states, lses, 4, 32, 128,
                                  kPtr, kPtr, 0, 0),
            ATTN_RT_MANIFEST_MISMATCH); // the kernel merges 2
  EXPECT_EQ(attnRtHostMergeStates(&module, kernel, 2, states, lses, 4, 32, 64,
                                  kPtr, kPtr, 0, 0),
            ATTN_RT_MANIFEST_MISMATCH); // head dim
  EXPECT_EQ(attnRtHostMergeStates(&module, kernel, 2, nullptr, lses, 4, 32,
                                  128, kPtr, kPtr, 0, 0),
            ATTN_RT_INVALID_ARGUMENT);
  EXPECT_EQ(attnRtHostMergeStates(&module, kernel, 2, states, lses, 4, 32, 128,
                                  kPtr, kPtr, kPtr, 0),
            ATTN_RT_MANIFEST_MISMATCH); // a mask for the unmasked kernel
  EXPECT_EQ(attnRtHostMergeStates(&module, "attn_append_kv_bf16_d128_p16", 2,
                                  states, lses, 4, 32, 128, kPtr, kPtr, 0, 0),
            ATTN_RT_INVALID_ARGUMENT); // role
  if (!cudaAvailable().ok())
    EXPECT_EQ(attnRtHostMergeStates(&module, kernel, 2, states, lses, 4, 32,
                                    128, kPtr, kPtr, 0, 0),
              ATTN_RT_CUDA_UNAVAILABLE);
  attnRtHostTakeStatus(nullptr);
}

TEST(HostCalls, AppendKVChecks) {
  attnRtEmbeddedModule module{"x", 1, kManifest, nullptr};
  const char *kernel = "attn_append_kv_bf16_d128_p16";
  EXPECT_EQ(attnRtHostAppendKV(&module, kernel, kPtr, kPtr, 4, 8, 128, kPtr, 0,
                               16, 0, kPtr, kPtr, kPtr, 3, kPtr, 4, 0),
            ATTN_RT_INVALID_ARGUMENT); // null value cache
  EXPECT_EQ(attnRtHostAppendKV(&module, kernel, kPtr, kPtr, 4, 8, 64, kPtr,
                               kPtr, 16, 0, kPtr, kPtr, kPtr, 3, kPtr, 4, 0),
            ATTN_RT_MANIFEST_MISMATCH); // head dim
  EXPECT_EQ(attnRtHostAppendKV(&module, kernel, kPtr, kPtr, 4, 8, 128, kPtr,
                               kPtr, 16, 0, kPtr, kPtr, kPtr, 0, kPtr, 4, 0),
            ATTN_RT_INVALID_ARGUMENT); // kv_indptr without batch+1 entries
  EXPECT_EQ(attnRtHostAppendKV(&module, "nope", kPtr, kPtr, 4, 8, 128, kPtr,
                               kPtr, 16, 0, kPtr, kPtr, kPtr, 3, kPtr, 4, 0),
            ATTN_RT_NOT_FOUND);
  if (!cudaAvailable().ok())
    EXPECT_EQ(attnRtHostAppendKV(&module, kernel, kPtr, kPtr, 4, 8, 128, kPtr,
                                 kPtr, 16, 0, kPtr, kPtr, kPtr, 3, kPtr, 4, 0),
              ATTN_RT_CUDA_UNAVAILABLE);
  attnRtHostTakeStatus(nullptr);
}

TEST(HostCalls, DeviceMemoryWithoutAGpu) {
  if (cudaAvailable().ok())
    GTEST_SKIP() << "a GPU is present";
  uint64_t ptr = 1;
  EXPECT_EQ(attnRtDeviceAllocManaged(64, &ptr), ATTN_RT_CUDA_UNAVAILABLE);
  EXPECT_EQ(ptr, 0u);
  EXPECT_EQ(attnRtDeviceAllocManaged(64, nullptr), ATTN_RT_INVALID_ARGUMENT);
  EXPECT_EQ(attnRtDeviceFree(0), ATTN_RT_OK);
}

} // namespace
