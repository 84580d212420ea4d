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
  capturing = true; // the per-thread default stream asks the driver
  s = streamIsCapturing(/*CU_STREAM_PER_THREAD=*/2, &capturing);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(capturing);
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
