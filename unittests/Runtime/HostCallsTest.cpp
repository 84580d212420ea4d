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
#include <vector>

using namespace attnrt;

namespace {

// Decode (GQA 32/8, head_dim 128, pages of 16), its merge, two row kernels.
const char *kManifest = R"json({"attn_manifest_version": 1, "arch": "sm_90a", "kernels": [
  {"name": "attn_decode", "role": "attention", "threads": 96, "shared_bytes": 0,
   "tile": {"q": 16, "kv": 16, "gqa_pack": 4},
   "format": {"block_rows": 1, "block_cols": 16, "layout": "NHD", "indexing": "paged"},
   "dtype": "bf16", "head_dim": 128, "num_qo_heads": 32, "num_kv_heads": 8,
   "args": [{"name": "plan", "kind": "ptr"}, {"name": "cta_indptr", "kind": "ptr"}, {"name": "work_items", "kind": "ptr"},
            {"name": "partial_o", "kind": "ptr"}, {"name": "partial_lse", "kind": "ptr"}]},
  {"name": "attn_merge", "role": "merge", "threads": 256, "shared_bytes": 0,
   "dtype": "bf16", "head_dim": 128, "num_qo_heads": 32, "num_kv_heads": 8,
   "args": [{"name": "plan", "kind": "ptr"}, {"name": "merge_indptr", "kind": "ptr"},
            {"name": "merge_units", "kind": "ptr"}, {"name": "partial_o", "kind": "ptr"},
            {"name": "partial_lse", "kind": "ptr"}]},
  {"name": "attn_prefill_masked", "role": "attention", "threads": 256, "shared_bytes": 0,
   "tile": {"q": 128, "kv": 64, "gqa_pack": 1},
   "format": {"block_rows": 128, "block_cols": 16, "layout": "NHD", "indexing": "paged"},
   "dtype": "bf16", "head_dim": 128, "num_qo_heads": 32, "num_kv_heads": 8,
   "variant_params": [{"name": "cap", "type": "f32"}, {"name": "window_left", "type": "i32"}],
   "args": [{"name": "plan", "kind": "ptr"}, {"name": "cta_indptr", "kind": "ptr"}, {"name": "work_items", "kind": "ptr"},
            {"name": "partial_o", "kind": "ptr"}, {"name": "partial_lse", "kind": "ptr"},
            {"name": "custom_mask", "kind": "ptr"},
            {"name": "mask_indptr", "kind": "ptr"}, {"name": "cap", "kind": "f32"},
            {"name": "window_left", "kind": "i32"}]},
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
  uint64_t qPtr = kPtr, kvIndices = kPtr, mask = 0;
  int64_t maskBytes = 0;
  float scale = 0.088f;
  int32_t numParams = 0;
  const char *paramNames = nullptr;
  uint64_t paramValues[4] = {};

  attnRtStatus call() {
    return attnRtHostAttention(&module, kernels, merges, /*causal=*/1, -1, qPtr,
                               q, kPtr, k, kPtr, k, kPtr, o, kPtr, lse, kPtr,
                               indptr, kPtr, indptr, kvIndices, indices, kPtr,
                               lastLen, mask, maskBytes, scale, numParams,
                               paramNames, paramValues, 0, 0, 0);
  }
};

/// The same batch on the masked prefill kernel with a soft cap and a window.
struct MaskedPrefill : Decode {
  MaskedPrefill() {
    kernels = "attn_prefill_masked";
    mask = kPtr;
    maskBytes = 64;
    numParams = 2;
    paramNames = "window_left,cap";
    paramValues[0] = 128;
    paramValues[1] = 0x42480000; // 50.0f
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
                                0, 0, 0, 1.f, 0, nullptr, nullptr, 0, 0, 0),
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

TEST(HostCalls, AttentionRefusesRowsThatAreNot16ByteAligned) {
  // The kernels move 16-byte chunks of q's, K's, V's and o's rows.
  Decode d;
  d.qPtr = kPtr + 8;
  EXPECT_EQ(d.call(), ATTN_RT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnRtLastError()).find("q is not 16-byte aligned"),
            std::string::npos)
      << attnRtLastError();
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

TEST(HostCalls, AttentionBindsVariantParametersByName) {
  // Every check passes; without a GPU the call stops at the driver.
  if (cudaAvailable().ok())
    GTEST_SKIP() << "a GPU is present; the integration test runs this";
  MaskedPrefill ok;
  EXPECT_EQ(ok.call(), ATTN_RT_CUDA_UNAVAILABLE) << attnRtLastError();
  std::vector<const KernelManifest *> kernels, merges;
  std::vector<KernelArg> params;
  Manifest manifest;
  ASSERT_TRUE(parseManifest(kManifest, &manifest).ok());
  HostAttentionCall c;
  c.kernels = "attn_prefill_masked";
  c.merge_kernels = "attn_merge";
  c.num_params = ok.numParams;
  c.param_names = ok.paramNames;
  c.param_values = ok.paramValues;
  c.q = c.o = c.k_cache = c.v_cache = {kPtr, 0};
  c.lse = c.kv_indices = c.kv_last_len = {kPtr, 0};
  c.qo_indptr = c.kv_indptr = {kPtr, 1};
  c.mask = {kPtr, 0};
  c.sm_scale = 1;
  Status s = checkHostAttention(manifest, c, &kernels, &merges, &params);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(params.size(), 2u); // in the manifest's order, typed by it
  EXPECT_STREQ(params[0].name, "cap");
  EXPECT_EQ(params[0].kind, ArgKind::F32);
  EXPECT_EQ(params[0].f32, 50.0f);
  EXPECT_STREQ(params[1].name, "window_left");
  EXPECT_EQ(params[1].kind, ArgKind::I32);
  EXPECT_EQ(params[1].i32, 128);
  attnRtHostTakeStatus(nullptr);
}

TEST(HostCalls, AttentionRefusesMasksAndParametersTheKernelsDisagreeWith) {
  auto expect = [](MaskedPrefill &d, attnRtStatus want, const char *text) {
    EXPECT_EQ(d.call(), want) << attnRtLastError();
    EXPECT_NE(std::string(attnRtLastError()).find(text), std::string::npos)
        << attnRtLastError();
  };
  MaskedPrefill noMask;
  noMask.mask = 0;
  expect(noMask, ATTN_RT_MANIFEST_MISMATCH, "needs a custom mask");
  MaskedPrefill negative;
  negative.maskBytes = -1;
  expect(negative, ATTN_RT_INVALID_ARGUMENT, "mask has a negative size");
  MaskedPrefill missing;
  missing.numParams = 1;
  missing.paramNames = "cap";
  expect(missing, ATTN_RT_MANIFEST_MISMATCH,
         "variant parameter 'window_left', which the call does not give");
  MaskedPrefill unknown;
  unknown.numParams = 3;
  unknown.paramNames = "window_left,cap,scale";
  expect(unknown, ATTN_RT_MANIFEST_MISMATCH, "no variant parameter 'scale'");
  MaskedPrefill twice;
  twice.numParams = 3;
  twice.paramNames = "cap,window_left,cap";
  expect(twice, ATTN_RT_INVALID_ARGUMENT, "'cap' is given twice");
  MaskedPrefill count;
  count.numParams = 3; // but two names
  expect(count, ATTN_RT_INVALID_ARGUMENT, "param_names lists 2");
  Decode plain; // a kernel without a mask or parameters
  plain.mask = kPtr;
  plain.maskBytes = 8;
  EXPECT_EQ(plain.call(), ATTN_RT_MANIFEST_MISMATCH);
  EXPECT_NE(std::string(attnRtLastError()).find("takes no custom mask"),
            std::string::npos);
  Decode extra;
  extra.numParams = 1;
  extra.paramNames = "cap";
  EXPECT_EQ(extra.call(), ATTN_RT_MANIFEST_MISMATCH);
  EXPECT_NE(std::string(attnRtLastError()).find("no variant parameter 'cap'"),
            std::string::npos);
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

// gpu-to-llvm's allocation entries, for the buffers a host-lowered function
// allocates itself: managed memory with a GPU; without one, NULL and the
// failure left for attnRtHostTakeStatus.
TEST(HostCalls, MlirGpuAllocationEntries) {
  const char *message = nullptr;
  attnRtHostTakeStatus(&message); // nothing left from earlier tests
  EXPECT_EQ(mgpuMemAlloc(0, nullptr, true), nullptr);
  EXPECT_EQ(attnRtHostTakeStatus(&message), ATTN_RT_OK);
  void *p = mgpuMemAlloc(256, nullptr, true);
  if (cudaAvailable().ok()) {
    ASSERT_NE(p, nullptr) << attnRtLastError();
    static_cast<volatile char *>(p)[255] = 1; // reachable from the host
    mgpuMemFree(p, nullptr);
    EXPECT_EQ(attnRtHostTakeStatus(&message), ATTN_RT_OK) << message;
    return;
  }
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(attnRtHostTakeStatus(&message), ATTN_RT_CUDA_UNAVAILABLE);
  mgpuMemFree(nullptr, nullptr);
  EXPECT_EQ(attnRtHostTakeStatus(&message), ATTN_RT_OK);
}

} // namespace
