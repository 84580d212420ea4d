//===- UploadScheduleTest.cpp - How a plan's upload is queued --------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// scheduleUpload decides how a plan and graph mode's fixed-buffer copies
// reach the device: one copy-kernel launch reading the host plan, or the
// driver's copies of the plan's parts followed by one launch (reading the
// plan's device copy) or a copy each. Here "device memory" is host memory
// and every copy is done with memcpy, as the kernel or the driver would,
// so each schedule is checked for what it leaves behind: the plan's device
// image (every reader sees the same plan), the fixed buffers holding the
// batch's arrays and page table, nothing written past them.
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/Launcher.h"

#include "PlanCheck.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>

using namespace attnrt;
using namespace attnrt::test;

namespace {

constexpr int32_t kSentinel = -5;

/// A graph-mode batch planned for `maxBatch` requests, with fixed buffers
/// (as host memory) and the plan's device image.
struct Upload {
  Batch batch;
  PlanConfig config;
  std::vector<int32_t> host, device, qo, kv, last, table;

  Upload(const std::vector<std::pair<int32_t, int32_t>> &lens, int32_t maxBatch,
         bool graph) {
    batch = makeBatch(lens, 16, 3);
    config = makeConfig(32, 8, 128, 16, 132, 16, 64, 4, batch);
    config.graph_mode = graph;
    config.max_batch = maxBatch;
    config.max_total_q_rows = maxBatch;
    EXPECT_TRUE(planInto(config, inputsOf(batch), &host).ok());
    device.assign(host.size(), kSentinel);
    for (auto *b : {&qo, &kv, &last})
      b->assign(size_t(maxBatch) + 1, kSentinel);
    table.assign(batch.kv_indices.size() + 8, kSentinel);
  }
  PlanView plan() const { return PlanView{host.data()}; }
  static uint64_t at(const void *p) { return reinterpret_cast<uint64_t>(p); }
  FixedBuffers fixed(bool withQo) {
    FixedBuffers f;
    f.qoIndptr = withQo ? at(qo.data()) : 0;
    f.kvIndptr = at(kv.data());
    f.kvLastLen = at(last.data());
    f.kvIndices = at(batch.kv_indices.data());
    f.kvIndicesDst = at(table.data());
    f.kvIndicesBytes = 4 * batch.kv_indices.size();
    return f;
  }

  /// Runs schedule `u` as uploadPlan would, with memcpy for every copy.
  void run(const UploadSchedule &u) {
    const uint64_t hostBase = at(host.data()), deviceBase = at(device.data());
    for (int32_t i = 0; i < u.numCopies; ++i) {
      const WordCopy &c = u.copies[i];
      // A kernel launched after the spans' driver copies reads the plan's
      // device copy; the single launch and the driver read the host plan.
      const bool fromDevice = !u.oneLaunch && u.fixedByKernel && i >= u.numSpans;
      const uint64_t src =
          c.fromPlan ? (fromDevice ? deviceBase : hostBase) + c.src : c.src;
      std::memcpy(reinterpret_cast<void *>(c.dst),
                  reinterpret_cast<const void *>(src), size_t(c.words) * 4);
    }
  }

  /// The device image is the same plan, and each fixed buffer holds its
  /// array with the sentinel after it.
  void expectDelivered(bool withQo) {
    PlanView d;
    Status s = viewPlan(device.data(), device.size() * 4, &d);
    ASSERT_TRUE(s.ok()) << s.message();
    checkPlan(config, batch, d);
    const int32_t n = batch.size();
    auto expectPrefix = [](const std::vector<int32_t> &buf,
                           const std::vector<int32_t> &want, const char *what) {
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(buf[i], want[i]) << what << "[" << i << "]";
      EXPECT_EQ(buf[want.size()], kSentinel) << what << ": written past the batch";
    };
    if (withQo)
      expectPrefix(qo, batch.qo_indptr, "qo_indptr");
    else
      EXPECT_EQ(qo[0], kSentinel);
    expectPrefix(kv, batch.kv_indptr, "kv_indptr");
    expectPrefix(last, std::vector<int32_t>(batch.kv_last_len.begin(),
                                            batch.kv_last_len.begin() + n),
                 "kv_last_len");
    expectPrefix(table, batch.kv_indices, "page table");
  }
};

std::vector<std::pair<int32_t, int32_t>> skewed(int32_t n) {
  std::vector<std::pair<int32_t, int32_t>> lens;
  for (int32_t i = 0; i < n; ++i)
    lens.push_back({1, i % 16 == 3 ? 32768 : 256 + 37 * i % 1024});
  return lens;
}

} // namespace

TEST(UploadSchedule, GraphDecodeIsOneLaunchReadingTheHost) {
  // 256 skewed requests under 1024-request maxima: the plan's header and
  // arrays, then its items, then its merge map (three spans), and the
  // decode wrapper's kv_indptr, last_page_len and page table: six pairs.
  Upload up(skewed(256), 1024, true);
  const UploadSchedule u = scheduleUpload(up.plan(), Upload::at(up.device.data()),
                                          up.fixed(false), 8, true);
  EXPECT_TRUE(u.oneLaunch);
  EXPECT_GE(u.numSpans, 2);
  EXPECT_EQ(u.numCopies, u.numSpans + 3);
  up.run(u);
  up.expectDelivered(false);
}

TEST(UploadSchedule, WithoutHostReadsTheKernelCopiesTheFixedBuffersAfterTheSpans) {
  // Pageable host memory: the driver copies the plan's parts, then one
  // launch reads the arrays from the plan's device copy.
  Upload up(skewed(256), 1024, true);
  const UploadSchedule u = scheduleUpload(up.plan(), Upload::at(up.device.data()),
                                          up.fixed(true), 8, false);
  EXPECT_FALSE(u.oneLaunch);
  EXPECT_TRUE(u.fixedByKernel);
  EXPECT_EQ(u.numCopies, u.numSpans + 4);
  up.run(u);
  up.expectDelivered(true);
}

TEST(UploadSchedule, TooFewPairsOrNoKernelFallsBackToTheDriver) {
  for (int32_t pairs : {0, 3}) {
    Upload up(skewed(256), 1024, true);
    const UploadSchedule u = scheduleUpload(
        up.plan(), Upload::at(up.device.data()), up.fixed(true), pairs, true);
    EXPECT_FALSE(u.oneLaunch) << pairs;
    EXPECT_FALSE(u.fixedByKernel) << pairs;
    up.run(u);
    up.expectDelivered(true);
  }
}

TEST(UploadSchedule, OneCopyStaysWithTheDriver) {
  // An eager plan of one request is one span and nothing else: a launch
  // would replace one driver call with another.
  Upload up({{1, 300}}, 1, false);
  const UploadSchedule u = scheduleUpload(up.plan(), Upload::at(up.device.data()),
                                          FixedBuffers{}, 8, true);
  EXPECT_EQ(u.numSpans, 1);
  EXPECT_EQ(u.numCopies, 1);
  EXPECT_FALSE(u.oneLaunch);
  up.run(u);
  PlanView d;
  ASSERT_TRUE(viewPlan(up.device.data(), up.device.size() * 4, &d).ok());
  checkPlan(up.config, up.batch, d);
}

TEST(UploadSchedule, ThePageTableInPlaceIsNotCopied) {
  // An engine that plans from the fixed buffer itself (SGLang): no copy.
  Upload up(skewed(64), 64, true);
  FixedBuffers f = up.fixed(false);
  f.kvIndicesDst = f.kvIndices;
  const UploadSchedule u =
      scheduleUpload(up.plan(), Upload::at(up.device.data()), f, 8, true);
  EXPECT_EQ(u.numCopies, u.numSpans + 2);
  for (int32_t i = 0; i < u.numCopies; ++i)
    EXPECT_TRUE(u.copies[i].fromPlan);
}

namespace {

/// Runs a copy table as the copy_by_table kernel would: each row's words
/// from its source to its destination, with memcpy.
void runTable(const std::vector<int64_t> &table) {
  for (size_t r = 0; r + kCopyTableRowWords <= table.size(); r += kCopyTableRowWords)
    if (table[r] > 0)
      std::memcpy(reinterpret_cast<void *>(table[r + 2]),
                  reinterpret_cast<const void *>(table[r + 1]),
                  size_t(table[r]) * 4);
}

/// A 256-byte aligned stand-in for the device workspace (the tables are
/// checked against the workspace as uploadPlan checks it), `words` long.
struct AlignedImage {
  std::vector<int32_t> storage;
  int32_t *data;
  explicit AlignedImage(size_t words) : storage(words + 64, kSentinel) {
    uint64_t at = reinterpret_cast<uint64_t>(storage.data());
    data = reinterpret_cast<int32_t *>((at + 255) / 256 * 256);
  }
};

KernelManifest copyTableKernel(int32_t sharedBytes) {
  KernelManifest k;
  k.name = "attn_copy_by_table_n10";
  k.role = KernelRole::CopyIndices;
  k.shared_bytes = sharedBytes;
  k.args = {{plan_args::kNumRows, ArgKind::I32}, {"table", ArgKind::Ptr}};
  return k;
}

} // namespace

TEST(CopyTable, RowsComeFromTheKernelsSharedMemory) {
  EXPECT_EQ(copyTableRows(copyTableKernel(240)), 10);
  EXPECT_EQ(copyTableRows(copyTableKernel(24)), 1);
  EXPECT_EQ(copyTableRows(copyTableKernel(0)), 0);
  EXPECT_EQ(copyTableRows(copyTableKernel(100)), 0); // not whole rows
  KernelManifest other = copyTableKernel(240);
  other.args[1].name = "src0"; // a copy_indices kernel's shape
  EXPECT_EQ(copyTableRows(other), 0);
  other = copyTableKernel(240);
  other.role = KernelRole::AppendKV;
  EXPECT_EQ(copyTableRows(other), 0);
}

TEST(CopyTable, HoldsWhatTheOneLaunchWouldCopy) {
  // Graph decode at 256 skewed requests: the table the captured kernel
  // reads delivers the same plan and fixed buffers as the launch plan()
  // made, its unused rows copy nothing, and its sources are the host plan.
  Upload up(skewed(256), 1024, true);
  AlignedImage image(up.device.size());
  std::vector<int64_t> table(10 * kCopyTableRowWords, -1);
  // The table's copies only reach the plan's image; the size check is of
  // the workspace the kernels would also use.
  Status s = writeCopyTable(up.plan(), Upload::at(image.data),
                            up.plan().deviceBytes(), up.fixed(true), 10,
                            std::numeric_limits<int32_t>::max(), table.data());
  ASSERT_TRUE(s.ok()) << s.message();
  const UploadSchedule u = scheduleUpload(up.plan(), Upload::at(image.data),
                                          up.fixed(true), 10, true);
  for (int32_t r = 0; r < 10; ++r) {
    const int64_t *row = &table[size_t(r) * kCopyTableRowWords];
    if (r >= u.numCopies) {
      EXPECT_EQ(row[0], 0) << r;
      EXPECT_EQ(row[1], 0) << r;
      EXPECT_EQ(row[2], 0) << r;
    } else if (u.copies[r].fromPlan) {
      EXPECT_EQ(uint64_t(row[1]), Upload::at(up.host.data()) + u.copies[r].src) << r;
    }
  }
  runTable(table);
  std::copy(image.data, image.data + up.device.size(), up.device.begin());
  up.expectDelivered(true);
}

TEST(CopyTable, RefusesWhatItCannotHold) {
  Upload up(skewed(256), 1024, true);
  AlignedImage image(up.device.size());
  std::vector<int64_t> table(10 * kCopyTableRowWords, 0);
  const uint64_t device = Upload::at(image.data);
  const size_t bytes = up.plan().deviceBytes();
  // Fewer rows than the upload's copies.
  Status s = writeCopyTable(up.plan(), device, bytes, up.fixed(true), 2,
                            std::numeric_limits<int32_t>::max(), table.data());
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("the copy table holds 2"), std::string::npos)
      << s.message();
  // More words than the captured launch covers.
  s = writeCopyTable(up.plan(), device, bytes, up.fixed(true), 10, 16,
                     table.data());
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("the captured copy's capacity is 16"),
            std::string::npos)
      << s.message();
  // A device workspace smaller than the plan.
  s = writeCopyTable(up.plan(), device, 64, up.fixed(true), 10,
                     std::numeric_limits<int32_t>::max(), table.data());
  EXPECT_EQ(s.code(), StatusCode::WorkspaceTooSmall);
  // A misaligned table.
  s = writeCopyTable(up.plan(), device, bytes, up.fixed(true), 10,
                     std::numeric_limits<int32_t>::max(),
                     reinterpret_cast<int64_t *>(
                         reinterpret_cast<char *>(table.data()) + 4));
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
}
