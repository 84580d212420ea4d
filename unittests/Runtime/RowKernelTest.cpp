//===- RowKernelTest.cpp - Row kernels: manifest roles and launch checks --===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// The row kernels (roles merge_states, append_kv and copy_indices: a
// grid-strided loop over num_rows rows, no plan): what the manifest parser accepts and refuses, the
// grid launchRows picks, and every check launchRows makes before it touches
// the driver (checkRowLaunch, and the C API without a module). The launch
// itself needs a GPU.
//
//===----------------------------------------------------------------------===//

#include "attn-c/Runtime.h"
#include "attn/Runtime/Launcher.h"
#include "attn/Runtime/Manifest.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace attnrt;

namespace {

/// A module's row kernels as the compiler writes them (docs/Manifest.md).
const char *kRows = R"json({
  "attn_manifest_version": 1,
  "arch": "sm_90a",
  "kernels": [
    {
      "name": "attn_merge_states_bf16_d128_n2",
      "role": "merge_states",
      "threads": 256, "shared_bytes": 0, "ctas_per_sm": 8, "rows_per_cta": 16,
      "dtype": "bf16", "head_dim": 128, "num_qo_heads": 0, "num_kv_heads": 0,
      "args": [
        {"name": "num_rows", "kind": "i32"}, {"name": "heads", "kind": "i32"},
        {"name": "v0", "kind": "ptr"}, {"name": "s0", "kind": "ptr"},
        {"name": "v1", "kind": "ptr"}, {"name": "s1", "kind": "ptr"},
        {"name": "v_merged", "kind": "ptr"}, {"name": "s_merged", "kind": "ptr"}
      ]
    },
    {
      "name": "attn_append_kv_bf16_d128_p16",
      "role": "append_kv",
      "threads": 128, "shared_bytes": 0, "rows_per_cta": 4,
      "dtype": "bf16", "head_dim": 128, "num_qo_heads": 0, "num_kv_heads": 0,
      "format": {"block_rows": 0, "block_cols": 16, "layout": "HND", "indexing": "paged"},
      "args": [
        {"name": "num_rows", "kind": "i32"}, {"name": "heads", "kind": "i32"},
        {"name": "k", "kind": "ptr"}, {"name": "v", "kind": "ptr"},
        {"name": "k_cache", "kind": "ptr"}, {"name": "v_cache", "kind": "ptr"},
        {"name": "kv_indices", "kind": "ptr"}, {"name": "kv_indptr", "kind": "ptr"},
        {"name": "kv_last_len", "kind": "ptr"}, {"name": "scale", "kind": "f32"}
      ]
    }
  ]
})json";

/// An attention and a merge kernel with the given head counts.
std::string planKernels(const std::string &qo, const std::string &kv) {
  return R"json({"attn_manifest_version": 1, "arch": "sm_90a", "kernels": [
    {"name": "attn_decode", "role": "attention", "threads": 128, "shared_bytes": 0,
     "tile": {"q": 16, "kv": 64, "gqa_pack": 1},
     "format": {"block_rows": 1, "block_cols": 16, "layout": "NHD", "indexing": "paged"},
     "dtype": "bf16", "head_dim": 128, "num_qo_heads": )json" +
         qo + R"json(, "num_kv_heads": )json" + kv + R"json(,
     "args": [{"name": "plan", "kind": "ptr"}, {"name": "cta_indptr", "kind": "ptr"}, {"name": "work_items", "kind": "ptr"},
              {"name": "partial_o", "kind": "ptr"}, {"name": "partial_lse", "kind": "ptr"}]},
    {"name": "attn_merge", "role": "merge", "threads": 128, "shared_bytes": 0,
     "dtype": "bf16", "head_dim": 128, "num_qo_heads": 8, "num_kv_heads": 8,
     "args": [{"name": "plan", "kind": "ptr"}, {"name": "merge_indptr", "kind": "ptr"},
              {"name": "merge_units", "kind": "ptr"}, {"name": "partial_o", "kind": "ptr"},
              {"name": "partial_lse", "kind": "ptr"}]}]})json";
}

std::string replace(std::string s, const std::string &from, const std::string &to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    s.replace(at, from.size(), to);
  return s;
}

void expectError(const Status &s, StatusCode code, const char *needle) {
  EXPECT_EQ(s.code(), code) << s.message();
  EXPECT_NE(s.message().find(needle), std::string::npos)
      << "message: " << s.message() << " lacks " << needle;
}

const KernelManifest &mergeStates(const Manifest &m) {
  return *m.find("attn_merge_states_bf16_d128_n2");
}

/// The arguments of kRows's merge_states kernel, num_rows aside.
std::vector<KernelArg> mergeStatesArgs() {
  return {KernelArg::int32("heads", 32),      KernelArg::pointer("v0", 0x100),
          KernelArg::pointer("s0", 0x200),    KernelArg::pointer("v1", 0x300),
          KernelArg::pointer("s1", 0x400),    KernelArg::pointer("v_merged", 0x500),
          KernelArg::pointer("s_merged", 0x600)};
}

} // namespace

TEST(RowKernels, ParsesBothRoles) {
  Manifest m;
  Status s = parseManifest(kRows, &m);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(m.kernels.size(), 2u);
  const KernelManifest &ms = mergeStates(m);
  EXPECT_EQ(ms.role, KernelRole::MergeStates);
  EXPECT_TRUE(isRowKernel(ms.role));
  EXPECT_STREQ(kernelRoleName(ms.role), "merge_states");
  EXPECT_EQ(ms.threads, 256);
  EXPECT_EQ(ms.rows_per_cta, 16);
  EXPECT_EQ(ms.ctas_per_sm, 8);
  EXPECT_EQ(ms.num_qo_heads, 0);
  EXPECT_EQ(ms.num_kv_heads, 0);
  EXPECT_EQ(ms.argIndex(plan_args::kNumRows), 0);
  const KernelManifest *ap = m.find("attn_append_kv_bf16_d128_p16");
  ASSERT_NE(ap, nullptr);
  EXPECT_EQ(ap->role, KernelRole::AppendKV);
  EXPECT_TRUE(isRowKernel(ap->role));
  EXPECT_STREQ(kernelRoleName(ap->role), "append_kv");
  EXPECT_EQ(ap->rows_per_cta, 4);
  EXPECT_EQ(ap->ctas_per_sm, 1); // optional
  EXPECT_EQ(ap->block_cols, 16);
  EXPECT_EQ(ap->layout, KVLayout::HND);
  EXPECT_EQ(ap->indexing, KVIndexing::Paged);
  EXPECT_FALSE(isRowKernel(KernelRole::Attention));
  EXPECT_FALSE(isRowKernel(KernelRole::Merge));
  // Heads, when a row kernel gives them, still divide.
  std::string heads = replace(kRows, "\"num_qo_heads\": 0, \"num_kv_heads\": 0",
                              "\"num_qo_heads\": 32, \"num_kv_heads\": 8");
  ASSERT_TRUE(parseManifest(heads, &m).ok());
  EXPECT_EQ(mergeStates(m).num_qo_heads, 32);
  // Row kernels never count as tile candidates.
  attnRtTileCandidate c[ATTN_RT_MAX_TILE_CANDIDATES];
  int32_t n = -1;
  ASSERT_EQ(attnRtManifestCandidates(kRows, c, ATTN_RT_MAX_TILE_CANDIDATES, &n),
            ATTN_RT_OK)
      << attnRtLastError();
  EXPECT_EQ(n, 0);
}

TEST(RowKernels, RefusesBadRowKernels) {
  struct Bad {
    std::string json;
    const char *needle;
  };
  const std::string ex = kRows;
  const std::vector<Bad> cases = {
      {replace(ex, "\"rows_per_cta\": 16", "\"rows_per_cta_x\": 16"),
       "missing \"rows_per_cta\""},
      {replace(ex, "\"rows_per_cta\": 16", "\"rows_per_cta\": 0"),
       "rows_per_cta must be >= 1"},
      {replace(ex, "\"rows_per_cta\": 4", "\"rows_per_cta\": -3"),
       "attn_append_kv_bf16_d128_p16"},
      {replace(ex, "\"rows_per_cta\": 16", "\"rows_per_cta\": 1.5"), "integer"},
      {replace(ex, "{\"name\": \"num_rows\", \"kind\": \"i32\"}, {\"name\": \"heads\"",
               "{\"name\": \"heads\""),
       "a merge_states kernel must take argument \"num_rows\""},
      {replace(ex, "{\"name\": \"num_rows\", \"kind\": \"i32\"}",
               "{\"name\": \"num_rows\", \"kind\": \"ptr\"}"),
       "argument \"num_rows\" must be an i32"},
      {replace(ex, "\"role\": \"append_kv\"", "\"role\": \"append_k\""),
       "role must be \"attention\", \"merge\", \"merge_states\", \"append_kv\" or "
       "\"copy_indices\""},
      {replace(ex, "\"dtype\": \"bf16\", \"head_dim\": 128, \"num_qo_heads\": 0",
               "\"dtype\": \"i32\", \"head_dim\": 128, \"num_qo_heads\": 0"),
       "dtype must be bf16, f16 or f32"},
      {replace(ex, "\"ctas_per_sm\": 8", "\"ctas_per_sm\": 65"), "ctas_per_sm"},
      {replace(ex, "\"ctas_per_sm\": 8", "\"ctas_per_sm\": 0"), "ctas_per_sm"},
      {replace(ex, "\"layout\": \"HND\"", "\"layout\": \"XYZ\""), "layout"},
      {replace(ex, "\"block_cols\": 16", "\"block_cols\": 0"), "block_cols"},
      {replace(ex, "\"format\": {", "\"format\": 3, \"unused\": {"),
       "format must be an object"},
      {replace(ex, "\"head_dim\": 128, \"num_qo_heads\": 0",
               "\"head_dim\": 0, \"num_qo_heads\": 0"),
       "head_dim must be positive"},
      {replace(ex, "\"num_qo_heads\": 0, \"num_kv_heads\": 0",
               "\"num_qo_heads\": -1, \"num_kv_heads\": 0"),
       "head counts >= 0"},
      {replace(ex, "\"num_qo_heads\": 0, \"num_kv_heads\": 0",
               "\"num_qo_heads\": 12, \"num_kv_heads\": 8"),
       "multiple of num_kv_heads"},
  };
  for (const Bad &b : cases) {
    Manifest m;
    expectError(parseManifest(b.json, &m), StatusCode::ManifestParseError,
                b.needle);
  }
  // Every message names the kernel.
  Manifest m;
  Status s = parseManifest(replace(ex, "\"rows_per_cta\": 16", "\"rows_per_cta\": 0"), &m);
  EXPECT_NE(s.message().find("attn_merge_states_bf16_d128_n2"), std::string::npos)
      << s.message();
}

/// copy_indices as the compiler writes it: rows are i32 words.
const char *kCopy = R"json({"attn_manifest_version": 1, "arch": "sm_90a", "kernels": [
  {"name": "attn_copy_indices_n1", "role": "copy_indices", "threads": 256,
   "shared_bytes": 0, "ctas_per_sm": 32, "rows_per_cta": 256, "dtype": "i32",
   "head_dim": 1, "num_qo_heads": 0, "num_kv_heads": 0,
   "args": [{"name": "num_rows", "kind": "i32"}, {"name": "n0", "kind": "i32"},
            {"name": "src0", "kind": "ptr"}, {"name": "dst0", "kind": "ptr"}]}]})json";

TEST(RowKernels, ParsesCopyIndices) {
  Manifest m;
  Status s = parseManifest(kCopy, &m);
  ASSERT_TRUE(s.ok()) << s.message();
  const KernelManifest *k = m.find("attn_copy_indices_n1");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->role, KernelRole::CopyIndices);
  EXPECT_TRUE(isRowKernel(k->role));
  EXPECT_STREQ(kernelRoleName(k->role), "copy_indices");
  EXPECT_EQ(k->dtype, "i32");
  EXPECT_EQ(k->rows_per_cta, 256);
  // A word a thread: 1000 words take 4 CTAs, ten million the resident cap.
  EXPECT_EQ(rowGrid(*k, 1000, 132), 4);
  EXPECT_EQ(rowGrid(*k, 10000000, 132), 132 * 32);
  // Its dtype is i32 only.
  expectError(parseManifest(replace(kCopy, "\"dtype\": \"i32\"", "\"dtype\": \"bf16\""), &m),
              StatusCode::ManifestParseError, "a copy_indices kernel's dtype is i32");
  // Bound by name like every row kernel: a count it lacks is refused.
  std::vector<KernelArg> args = {KernelArg::int32("n0", 4), KernelArg::pointer("src0", 0x100),
                                 KernelArg::pointer("dst0", 0x200), KernelArg::int32("n1", 4)};
  ASSERT_TRUE(parseManifest(kCopy, &m).ok());
  expectError(checkRowLaunch(*m.find("attn_copy_indices_n1"), 8, args.data(), 4),
              StatusCode::ManifestMismatch, "has no argument \"n1\"");
  EXPECT_TRUE(checkRowLaunch(*m.find("attn_copy_indices_n1"), 8, args.data(), 3).ok());
  // A plan's upload binds its pairs by position: only in the lowering's order.
  EXPECT_EQ(copyKernelPairs(*m.find("attn_copy_indices_n1")), 1);
  ASSERT_TRUE(parseManifest(replace(replace(replace(kCopy, "\"src0\"", "\"tmp\""),
                                            "\"dst0\"", "\"src0\""),
                                    "\"tmp\"", "\"dst0\""),
                            &m)
                  .ok());
  EXPECT_EQ(copyKernelPairs(*m.find("attn_copy_indices_n1")), 0);
}

TEST(RowKernels, AttentionAndMergeStillNeedHeads) {
  Manifest m;
  ASSERT_TRUE(parseManifest(planKernels("8", "8"), &m).ok());
  EXPECT_EQ(m.find("attn_decode")->rows_per_cta, 0);
  expectError(parseManifest(planKernels("0", "8"), &m),
              StatusCode::ManifestParseError, "head counts must be positive");
  expectError(parseManifest(planKernels("0", "0"), &m),
              StatusCode::ManifestParseError, "attn_decode");
  std::string merge0 = replace(planKernels("8", "8"),
                               "\"num_qo_heads\": 8, \"num_kv_heads\": 8,\n     \"args\": [{\"name\": \"plan\", \"kind\": \"ptr\"}, {\"name\": \"merge_indptr\"",
                               "\"num_qo_heads\": 0, \"num_kv_heads\": 0,\n     \"args\": [{\"name\": \"plan\", \"kind\": \"ptr\"}, {\"name\": \"merge_indptr\"");
  expectError(parseManifest(merge0, &m), StatusCode::ManifestParseError,
              "attn_merge");
}

TEST(RowKernels, GridIsRowsPerCtaCappedAtTheResidentCtas) {
  Manifest m;
  ASSERT_TRUE(parseManifest(kRows, &m).ok());
  const KernelManifest &k = mergeStates(m); // 16 rows per CTA, 8 CTAs per SM
  EXPECT_EQ(rowGrid(k, 0, 132), 0);
  EXPECT_EQ(rowGrid(k, 1, 132), 1);
  EXPECT_EQ(rowGrid(k, 16, 132), 1);
  EXPECT_EQ(rowGrid(k, 17, 132), 2);
  EXPECT_EQ(rowGrid(k, 16 * 1056, 132), 1056);
  EXPECT_EQ(rowGrid(k, 16 * 1056 + 1, 132), 1056); // 132 SMs x 8
  EXPECT_EQ(rowGrid(k, 2147483647, 132), 1056);
  EXPECT_EQ(rowGrid(k, 2147483647, 0), 134217728); // no SM count: uncapped
  const KernelManifest &a = *m.find("attn_append_kv_bf16_d128_p16");
  EXPECT_EQ(rowGrid(a, 1000, 132), 132); // ctas_per_sm defaults to 1
  EXPECT_EQ(rowGrid(a, 9, 132), 3);
}

TEST(RowKernels, LaunchChecksBeforeTheDriver) {
  Manifest m;
  ASSERT_TRUE(parseManifest(kRows, &m).ok());
  const KernelManifest &k = mergeStates(m);
  std::vector<KernelArg> args = mergeStatesArgs();
  const int32_t n = int32_t(args.size());
  Status s = checkRowLaunch(k, 100, args.data(), n);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(checkRowLaunch(k, 0, args.data(), n).ok());
  EXPECT_TRUE(checkRowLaunch(k, 2147483647, args.data(), n).ok());
  // Rows out of range.
  expectError(checkRowLaunch(k, -1, args.data(), n), StatusCode::InvalidArgument,
              "num_rows -1");
  expectError(checkRowLaunch(k, 2147483648LL, args.data(), n),
              StatusCode::InvalidArgument, "2^31-1");
  // A missing argument, and one of the wrong kind.
  expectError(checkRowLaunch(k, 8, args.data(), n - 1),
              StatusCode::ManifestMismatch, "\"s_merged\" is not bound");
  std::vector<KernelArg> wrong = args;
  wrong[0] = KernelArg::int64("heads", 32);
  expectError(checkRowLaunch(k, 8, wrong.data(), n), StatusCode::ManifestMismatch,
              "\"heads\" is i32, caller passed i64");
  // Extra, repeated, unnamed, and num_rows from the caller.
  std::vector<KernelArg> extra = args;
  extra.push_back(KernelArg::pointer("v2", 0x700));
  expectError(checkRowLaunch(k, 8, extra.data(), n + 1),
              StatusCode::ManifestMismatch, "no argument \"v2\"");
  std::vector<KernelArg> twice = args;
  twice.push_back(KernelArg::pointer("v0", 0x700));
  expectError(checkRowLaunch(k, 8, twice.data(), n + 1),
              StatusCode::ManifestMismatch, "\"v0\" is passed twice");
  std::vector<KernelArg> unnamed = args;
  unnamed.push_back(KernelArg::pointer(nullptr, 0x700));
  expectError(checkRowLaunch(k, 8, unnamed.data(), n + 1),
              StatusCode::InvalidArgument, "no name");
  std::vector<KernelArg> rows = args;
  rows.push_back(KernelArg::int32("num_rows", 8));
  expectError(checkRowLaunch(k, 8, rows.data(), n + 1),
              StatusCode::InvalidArgument, "\"num_rows\" is bound by the runtime");
  expectError(checkRowLaunch(k, 8, nullptr, 3), StatusCode::InvalidArgument,
              "args");
  // A kernel of another role is no row kernel.
  ASSERT_TRUE(parseManifest(planKernels("8", "8"), &m).ok());
  expectError(checkRowLaunch(*m.find("attn_merge"), 8, nullptr, 0),
              StatusCode::InvalidArgument, "\"attn_merge\" has role merge");
  expectError(checkRowLaunch(*m.find("attn_decode"), 8, nullptr, 0),
              StatusCode::InvalidArgument, "role attention");
}

TEST(RowKernels, CApiRefusesBeforeAnyLaunch) {
  attnRtArg a[2] = {};
  a[0].name = "heads";
  a[0].kind = ATTN_RT_ARG_I32;
  a[0].value.i32 = 32;
  EXPECT_EQ(attnRtLaunchRows(nullptr, "attn_merge_states", 8, a, 1, 0),
            ATTN_RT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnRtLastError()).find("module"), std::string::npos)
      << attnRtLastError();
  EXPECT_EQ(attnRtLaunchRows(nullptr, "attn_merge_states", -1, a, 1, 0),
            ATTN_RT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnRtLastError()).find("num_rows -1"), std::string::npos)
      << attnRtLastError();
  EXPECT_EQ(attnRtLaunchRows(nullptr, "attn_merge_states", int64_t(1) << 31, a,
                             1, 0),
            ATTN_RT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnRtLastError()).find("2^31-1"), std::string::npos)
      << attnRtLastError();
  a[1].name = "v0";
  a[1].kind = 7; // no such kind
  EXPECT_EQ(attnRtLaunchRows(nullptr, "attn_merge_states", 8, a, 2, 0),
            ATTN_RT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attnRtLastError()).find("kind"), std::string::npos)
      << attnRtLastError();
  EXPECT_EQ(attnRtLaunchRows(nullptr, "attn_merge_states", 8, nullptr, 1, 0),
            ATTN_RT_INVALID_ARGUMENT);
}

TEST(RowKernels, LaunchRowsWithoutCudaIsUnavailable) {
  if (launcherCompiledIn() && cudaAvailable().ok())
    GTEST_SKIP() << "a GPU is present; this checks the CPU-only path";
  // No Module can be loaded without CUDA; loading one says why.
  std::unique_ptr<Module> mod;
  const char ptx[] = "x";
  EXPECT_EQ(Module::load(ptx, 1, kRows, &mod).code(), StatusCode::CudaUnavailable);
}

namespace {

/// The few driver calls the device test needs beyond the runtime's (device
/// memory), resolved from libcuda.so.1 so the test needs no CUDA headers.
struct TestDriver {
  using Alloc = int (*)(uint64_t *, size_t);
  using Free = int (*)(uint64_t);
  using MemsetD32 = int (*)(uint64_t, unsigned, size_t);
  using DtoH = int (*)(void *, uint64_t, size_t);
  using Sync = int (*)();
  Alloc alloc = nullptr;
  Free free = nullptr;
  MemsetD32 memsetD32 = nullptr;
  DtoH dtoh = nullptr;
  Sync sync = nullptr;

  bool load() {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
      return false;
    alloc = reinterpret_cast<Alloc>(dlsym(h, "cuMemAlloc_v2"));
    free = reinterpret_cast<Free>(dlsym(h, "cuMemFree_v2"));
    memsetD32 = reinterpret_cast<MemsetD32>(dlsym(h, "cuMemsetD32_v2"));
    dtoh = reinterpret_cast<DtoH>(dlsym(h, "cuMemcpyDtoH_v2"));
    sync = reinterpret_cast<Sync>(dlsym(h, "cuCtxSynchronize"));
    return alloc && free && memsetD32 && dtoh && sync;
  }
};

/// A row kernel `rk(num_rows, heads, out, grid)`: out[r] = r * heads + 1 for
/// every row, over a grid-strided loop of blockDim.x rows per CTA step;
/// CTA 0 writes gridDim.x to grid[0]. And a merge kernel `m` that does nothing.
const char *kRowPtx = R"ptx(.version 7.0
.target sm_50
.address_size 64
.visible .entry rk(.param .u32 p_rows, .param .u32 p_heads, .param .u64 p_out,
                   .param .u64 p_grid) {
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<6>;
  ld.param.u32 %r1, [p_rows];
  ld.param.u32 %r2, [p_heads];
  ld.param.u64 %rd1, [p_out];
  ld.param.u64 %rd2, [p_grid];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mov.u32 %r6, %nctaid.x;
  mad.lo.s32 %r7, %r3, %r4, %r5;
  mul.lo.s32 %r8, %r6, %r4;
  or.b32 %r9, %r3, %r5;
  setp.ne.s32 %p1, %r9, 0;
  @%p1 bra LOOP;
  st.global.u32 [%rd2], %r6;
LOOP:
  setp.ge.s32 %p2, %r7, %r1;
  @%p2 bra DONE;
  mad.lo.s32 %r10, %r7, %r2, 1;
  mul.wide.s32 %rd3, %r7, 4;
  add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r10;
  add.s32 %r7, %r7, %r8;
  bra LOOP;
DONE:
  ret;
}
.visible .entry m(.param .u64 a, .param .u64 b, .param .u64 c, .param .u64 d,
                  .param .u64 e) {
  ret;
}
)ptx";

const char *kRowPtxManifest = R"json({"attn_manifest_version": 1, "arch": "sm_50",
  "kernels": [
  {"name": "rk", "role": "append_kv", "threads": 32, "shared_bytes": 0,
   "ctas_per_sm": 2, "rows_per_cta": 32, "dtype": "f32", "head_dim": 8,
   "num_qo_heads": 0, "num_kv_heads": 0,
   "args": [{"name": "num_rows", "kind": "i32"}, {"name": "heads", "kind": "i32"},
            {"name": "out", "kind": "ptr"}, {"name": "grid", "kind": "ptr"}]},
  {"name": "m", "role": "merge", "threads": 32, "shared_bytes": 0,
   "dtype": "f32", "head_dim": 8, "num_qo_heads": 1, "num_kv_heads": 1,
   "args": [{"name": "plan", "kind": "ptr"}, {"name": "merge_indptr", "kind": "ptr"},
            {"name": "merge_units", "kind": "ptr"}, {"name": "partial_o", "kind": "ptr"},
            {"name": "partial_lse", "kind": "ptr"}]}]})json";

} // namespace

TEST(RowKernelsDevice, LaunchesOverEveryRow) {
  if (!launcherCompiledIn())
    GTEST_SKIP() << "runtime built without CUDA headers";
  if (Status s = cudaAvailable(); !s.ok())
    GTEST_SKIP() << "no GPU: " << s.message();
  std::unique_ptr<Module> mod;
  Status s = Module::load(kRowPtx, std::strlen(kRowPtx), kRowPtxManifest, &mod);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_GT(mod->numSms(), 0);
  TestDriver d;
  ASSERT_TRUE(d.load());
  const int64_t maxRows = 100000;
  uint64_t out = 0, grid = 0;
  ASSERT_EQ(d.alloc(&out, maxRows * 4), 0);
  ASSERT_EQ(d.alloc(&grid, 4), 0);
  const int64_t resident = int64_t(mod->numSms()) * 2;
  // Fewer rows than the resident CTAs take, and many more (grid-strided).
  for (int64_t rows : {int64_t(1000), maxRows}) {
    ASSERT_EQ(d.memsetD32(out, 0, maxRows), 0);
    ASSERT_EQ(d.memsetD32(grid, 0, 1), 0);
    std::vector<KernelArg> args = {KernelArg::pointer("grid", grid),
                                   KernelArg::int32("heads", 3),
                                   KernelArg::pointer("out", out)};
    s = launchRows(*mod, "rk", rows, args.data(), int32_t(args.size()), 0);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(d.sync(), 0);
    std::vector<uint32_t> host(maxRows);
    uint32_t g = 0;
    ASSERT_EQ(d.dtoh(host.data(), out, maxRows * 4), 0);
    ASSERT_EQ(d.dtoh(&g, grid, 4), 0);
    EXPECT_EQ(int64_t(g), std::min((rows + 31) / 32, resident)) << rows;
    int64_t bad = 0;
    for (int64_t r = 0; r < maxRows; ++r)
      bad += host[r] != (r < rows ? uint32_t(r * 3 + 1) : 0u);
    EXPECT_EQ(bad, 0) << rows << " rows";
  }
  // Zero rows: Ok, nothing launched.
  ASSERT_EQ(d.memsetD32(grid, 0, 1), 0);
  std::vector<KernelArg> args = {KernelArg::int32("heads", 3),
                                 KernelArg::pointer("out", out),
                                 KernelArg::pointer("grid", grid)};
  s = launchRows(*mod, "rk", 0, args.data(), 3, 0);
  EXPECT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(d.sync(), 0);
  uint32_t g = 7;
  ASSERT_EQ(d.dtoh(&g, grid, 4), 0);
  EXPECT_EQ(g, 0u);
  // Refusals through a loaded module, and through the C API's checks.
  expectError(launchRows(*mod, "nope", 8, args.data(), 3, 0),
              StatusCode::NotFound, "\"nope\"");
  expectError(launchRows(*mod, "m", 8, args.data(), 3, 0),
              StatusCode::InvalidArgument, "\"m\" has role merge");
  expectError(launchRows(*mod, "rk", -5, args.data(), 3, 0),
              StatusCode::InvalidArgument, "num_rows -5");
  expectError(launchRows(*mod, "rk", 8, args.data(), 2, 0),
              StatusCode::ManifestMismatch, "\"grid\" is not bound");
  d.free(out);
  d.free(grid);
}
