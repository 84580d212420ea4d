//===- LauncherTest.cpp - Driver loading and module refusal (device) ------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Device tests: without libcuda.so.1 or a GPU they report SKIPPED, never a
// pass. The end-to-end GPU run (real kernels, CUDA-graph replay) is the rig in
// bench/rig, which needs nvcc.
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/Launcher.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <vector>

using namespace attnrt;

namespace {

void skipWithoutGpu() {
  if (!launcherCompiledIn())
    GTEST_SKIP() << "runtime built without CUDA headers";
  Status s = cudaAvailable();
  if (!s.ok())
    GTEST_SKIP() << "no GPU: " << s.message();
}

const char *kManifest = R"json({"attn_manifest_version": 1, "arch": "sm_50",
  "kernels": [{"name": "m", "role": "merge", "threads": 32, "shared_bytes": 0,
  "dtype": "f32", "head_dim": 8, "num_qo_heads": 1, "num_kv_heads": 1,
  "args": [{"name": "plan", "kind": "ptr"}, {"name": "merge_indptr", "kind": "ptr"},
  {"name": "merge_units", "kind": "ptr"}, {"name": "partial_o", "kind": "ptr"},
  {"name": "partial_lse", "kind": "ptr"}]}]})json";

} // namespace

TEST(LauncherDevice, ReportsTheDevice) {
  skipWithoutGpu();
  if (IsSkipped())
    return;
  DeviceInfo d;
  Status s = currentDevice(&d);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_GT(d.num_sms, 0);
  EXPECT_GE(d.compute_capability, 50);
}

TEST(LauncherDevice, RefusesAnImageThatIsNotAModule) {
  skipWithoutGpu();
  if (IsSkipped())
    return;
  std::unique_ptr<Module> m;
  const char junk[] = "this is not PTX";
  Status s = Module::load(junk, sizeof(junk), kManifest, &m);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::CudaError) << s.message();
}

TEST(LauncherDevice, RefusesAModuleLackingAManifestKernel) {
  skipWithoutGpu();
  if (IsSkipped())
    return;
  const char ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n"
                     ".visible .entry other() { ret; }\n";
  std::unique_ptr<Module> m;
  Status s = Module::load(ptx, sizeof(ptx) - 1, kManifest, &m);
  EXPECT_EQ(s.code(), StatusCode::ManifestMismatch) << s.message();
  EXPECT_NE(s.message().find("\"m\""), std::string::npos) << s.message();
}

/// PTX of a kernel "m" with the given parameter types (.u64, .u32, ...).
std::string ptxWithParams(const std::vector<const char *> &types) {
  std::string p = ".version 7.0\n.target sm_50\n.address_size 64\n"
                  ".visible .entry m(";
  for (size_t i = 0; i < types.size(); ++i)
    p += std::string(i ? ", " : "") + ".param " + types[i] + " p" +
         std::to_string(i);
  return p + ") { ret; }\n";
}

TEST(LauncherDevice, ChecksParametersAgainstTheManifest) {
  // Issue #15: a manifest edited to disagree with its cubin (argument count
  // or sizes) was accepted. The driver's cuFuncGetParamInfo (CUDA 12.4+)
  // tells; older drivers skip the check.
  skipWithoutGpu();
  if (IsSkipped())
    return;
  std::unique_ptr<Module> m;
  std::string ok = ptxWithParams({".u64", ".u64", ".u64", ".u64", ".u64"});
  Status s = Module::load(ok.data(), ok.size(), kManifest, &m);
  ASSERT_TRUE(s.ok()) << s.message();
  std::string fewer = ptxWithParams({".u64", ".u64", ".u64", ".u64"});
  s = Module::load(fewer.data(), fewer.size(), kManifest, &m);
  if (s.ok())
    GTEST_SKIP() << "the driver does not report parameters (cuFuncGetParamInfo)";
  EXPECT_EQ(s.code(), StatusCode::ManifestMismatch) << s.message();
  EXPECT_NE(s.message().find("takes 4 parameters"), std::string::npos)
      << s.message();
  // Extra trailing parameters are not looked for: the driver answers a
  // query past the last with an API error, which compute-sanitizer reports.
  std::string narrow = ptxWithParams({".u64", ".u64", ".u32", ".u64", ".u64"});
  s = Module::load(narrow.data(), narrow.size(), kManifest, &m);
  EXPECT_EQ(s.code(), StatusCode::ManifestMismatch) << s.message();
  EXPECT_NE(s.message().find("\"merge_units\""), std::string::npos) << s.message();
}

TEST(LauncherNoDevice, EntryPointsFailCleanlyWithoutCuda) {
  if (launcherCompiledIn() && cudaAvailable().ok())
    GTEST_SKIP() << "a GPU is present; this checks the CPU-only path";
  std::unique_ptr<Module> m;
  const char ptx[] = "x";
  Status s = Module::load(ptx, 1, kManifest, &m);
  EXPECT_EQ(s.code(), StatusCode::CudaUnavailable) << s.message();
  int32_t words[64] = {};
  PlanView v{words};
  EXPECT_EQ(uploadPlan(v, 0x1000, 0).code(), StatusCode::CudaUnavailable);
}

TEST(LauncherDevice, UploadFenceRecordsAndWaits) {
  skipWithoutGpu();
  if (IsSkipped())
    return;
  UploadFence fence;
  ASSERT_TRUE(fence.wait().ok()); // nothing recorded yet: returns at once
  Status s = fence.record(/*stream=*/0);
  ASSERT_TRUE(s.ok()) << s.message();
  s = fence.wait();
  EXPECT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(fence.record(0).ok()); // the event is reused
  EXPECT_TRUE(fence.wait().ok());
  bool capturing = true;
  s = streamIsCapturing(0, &capturing);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(capturing);
}

namespace {

/// Driver calls the copy test needs beyond the runtime's, resolved from
/// libcuda.so.1 (the tests include no CUDA headers).
struct CopyTestDriver {
  int (*alloc)(uint64_t *, size_t) = nullptr;
  int (*free)(uint64_t) = nullptr;
  int (*hostAlloc)(void **, size_t, unsigned) = nullptr;
  int (*hostFree)(void *) = nullptr;
  int (*memsetAsync)(uint64_t, unsigned, size_t, void *) = nullptr;
  int (*dtoh)(void *, uint64_t, size_t) = nullptr;
  int (*sync)() = nullptr;
  bool load() {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
      return false;
    alloc = reinterpret_cast<decltype(alloc)>(dlsym(h, "cuMemAlloc_v2"));
    free = reinterpret_cast<decltype(free)>(dlsym(h, "cuMemFree_v2"));
    hostAlloc = reinterpret_cast<decltype(hostAlloc)>(dlsym(h, "cuMemHostAlloc"));
    hostFree = reinterpret_cast<decltype(hostFree)>(dlsym(h, "cuMemFreeHost"));
    memsetAsync = reinterpret_cast<decltype(memsetAsync)>(dlsym(h, "cuMemsetD32Async"));
    dtoh = reinterpret_cast<decltype(dtoh)>(dlsym(h, "cuMemcpyDtoH_v2"));
    sync = reinterpret_cast<decltype(sync)>(dlsym(h, "cuCtxSynchronize"));
    return alloc && free && hostAlloc && hostFree && memsetAsync && dtoh && sync;
  }
};

} // namespace

TEST(LauncherDevice, CopyGraphQueuesUpdatesAndRebuilds) {
  // A CUDA-graph plan's copies: three from pinned host memory and one
  // device to device, behind a 256 MB memset of the same destinations on the
  // legacy stream (they must land after it); then a step that changes one
  // source and one size (the nodes set again), then one with a copy fewer
  // (the graph built anew).
  skipWithoutGpu();
  if (IsSkipped())
    return;
  CopyTestDriver d;
  ASSERT_TRUE(d.load());
  constexpr size_t kWords = 64 << 20, kN = 1000, kB = kN * 4;
  uint64_t big = 0, table = 0;
  ASSERT_EQ(d.alloc(&big, kWords * 4), 0);
  ASSERT_EQ(d.alloc(&table, 2 * kB), 0);
  void *pinned = nullptr;
  ASSERT_EQ(d.hostAlloc(&pinned, 4 * kB, 0), 0);
  auto *host = static_cast<int32_t *>(pinned);
  for (size_t i = 0; i < 4 * kN; ++i)
    host[i] = int32_t(i + 1);
  const uint64_t h = uint64_t(reinterpret_cast<uintptr_t>(host));
  CopyGraph fill; // two copies: queued one by one
  CopyRequest toTable[2] = {{h, table, kB}, {h + kB, table + kB, kB}};
  ASSERT_TRUE(fill.launch(toTable, 2, 0).ok());
  const uint64_t at[4] = {big, big + kWords * 2, big + kWords * 4 - kB, big + 4 * kB};
  // Reads back copy c's destination: its first and last words.
  auto check = [&](int c, int32_t first, size_t words, const char *step) {
    std::vector<int32_t> got(words);
    ASSERT_EQ(d.dtoh(got.data(), at[c], words * 4), 0);
    EXPECT_EQ(got[0], first) << step << ", copy " << c;
    EXPECT_EQ(got[words - 1], first + int32_t(words) - 1) << step << ", copy " << c;
  };
  CopyGraph graph;
  CopyRequest step[4] = {{h, at[0], kB}, {h + kB, at[1], kB}, {h + 2 * kB, at[2], kB},
                         {table, at[3], kB}};
  for (int round = 0; round < 2; ++round) { // the second launch reuses the graph as is
    ASSERT_EQ(d.memsetAsync(big, 7, kWords, nullptr), 0);
    Status s = graph.launch(step, 4, 0);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(d.sync(), 0);
    for (int c = 0; c < 3; ++c)
      check(c, int32_t(c * kN + 1), kN, "first step");
    check(3, 1, kN, "first step");
  }
  // A new batch: another host source, a shorter copy, the page table's other half.
  step[0] = {h + 3 * kB, at[0], kB};
  step[2] = {h + 2 * kB, at[2], kB / 2};
  step[3] = {table + kB, at[3], kB};
  ASSERT_EQ(d.memsetAsync(big, 7, kWords, nullptr), 0);
  Status s = graph.launch(step, 4, 0);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(d.sync(), 0);
  check(0, int32_t(3 * kN + 1), kN, "second step");
  check(1, int32_t(kN + 1), kN, "second step");
  check(2, int32_t(2 * kN + 1), kN / 2, "second step");
  check(3, int32_t(kN + 1), kN, "second step");
  std::vector<int32_t> tail(1);
  ASSERT_EQ(d.dtoh(tail.data(), at[2] + kB / 2, 4), 0);
  EXPECT_EQ(tail[0], 7) << "the shorter copy stopped at its size";
  // A step with three copies: a new graph.
  ASSERT_EQ(d.memsetAsync(big, 7, kWords, nullptr), 0);
  s = graph.launch(step + 1, 3, 0);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(d.sync(), 0);
  check(1, int32_t(kN + 1), kN, "third step");
  check(3, int32_t(kN + 1), kN, "third step");
  ASSERT_EQ(d.dtoh(tail.data(), at[0], 4), 0);
  EXPECT_EQ(tail[0], 7) << "the copy left out of the third step";
  d.hostFree(pinned);
  d.free(big);
  d.free(table);
}

TEST(LauncherNoDevice, UploadFenceWithoutCuda) {
  if (launcherCompiledIn() && cudaAvailable().ok())
    GTEST_SKIP() << "a GPU is present; this checks the CPU-only path";
  UploadFence fence;
  EXPECT_TRUE(fence.wait().ok()); // a fence never recorded holds nothing back
  EXPECT_EQ(fence.record(0).code(), StatusCode::CudaUnavailable);
  bool capturing = false;
  EXPECT_EQ(streamIsCapturing(0, &capturing).code(), StatusCode::CudaUnavailable);
}
