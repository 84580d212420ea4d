//===- Launcher.cpp - Module loading and persistent-grid launch -----------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Binds kernel parameters by the names in the manifest (plan arrays from the
// device workspace, everything else from the caller) into fixed-size arrays on
// the stack, so run() and launchRows() never allocate, and launches on the
// caller's stream.
// Without CUDA headers at build time every entry point reports CudaUnavailable.
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/Launcher.h"
#include "attn/Runtime/TensorMap.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#ifdef ATTN_HAVE_CUDA_H
#include "CudaDriver.h"
#endif

namespace attnrt {

Status checkKernelMatchesPlan(const KernelManifest &k, const PlanConfig &c,
                              int32_t candidate) {
  auto mismatch = [&](const std::string &what) {
    return Status(StatusCode::ManifestMismatch,
                  "kernel \"" + k.name + "\" does not match the plan: " + what);
  };
  if (k.role != KernelRole::Attention)
    return mismatch("it is not an attention kernel");
  if (candidate < 0 || candidate >= c.num_candidates)
    return Status(StatusCode::InvalidArgument, "candidate index out of range");
  const TileCandidate &t = c.candidates[candidate];
  if (k.tile_q != t.q_rows || k.gqa_pack != t.gqa_pack)
    return mismatch("tile q/gqa_pack " + std::to_string(k.tile_q) + "/" +
                    std::to_string(k.gqa_pack) + " vs plan " +
                    std::to_string(t.q_rows) + "/" + std::to_string(t.gqa_pack));
  if (k.head_dim != c.head_dim || k.num_qo_heads != c.num_qo_heads ||
      k.num_kv_heads != c.num_kv_heads)
    return mismatch("head_dim/num_qo_heads/num_kv_heads");
  if (k.indexing != c.indexing)
    return mismatch("KV indexing");
  if (c.indexing == KVIndexing::Paged && k.block_cols != c.block_size)
    return mismatch("format.block_cols " + std::to_string(k.block_cols) +
                    " vs block_size " + std::to_string(c.block_size));
  return Status::success();
}

/// Checks a kernel against what the plan header records.
static Status checkAgainstPlanView(const KernelManifest &k, const PlanView &p) {
  auto mismatch = [&](const std::string &what) {
    return Status(StatusCode::ManifestMismatch,
                  "kernel \"" + k.name + "\" does not match the plan: " + what);
  };
  if (k.head_dim != p.header(kHdrHeadDim) ||
      k.num_qo_heads != p.header(kHdrNumQoHeads) ||
      k.num_kv_heads != p.header(kHdrNumKvHeads))
    return mismatch("head_dim " + std::to_string(k.head_dim) + " vs " +
                    std::to_string(p.header(kHdrHeadDim)) + ", heads " +
                    std::to_string(k.num_qo_heads) + "/" +
                    std::to_string(k.num_kv_heads) + " vs " +
                    std::to_string(p.header(kHdrNumQoHeads)) + "/" +
                    std::to_string(p.header(kHdrNumKvHeads)));
  if (k.role == KernelRole::Attention &&
      (k.tile_q != p.tileQ() || k.gqa_pack != p.gqaPack()))
    return mismatch("tile q/gqa_pack " + std::to_string(k.tile_q) + "/" +
                    std::to_string(k.gqa_pack) + " vs plan " +
                    std::to_string(p.tileQ()) + "/" + std::to_string(p.gqaPack()));
  return Status::success();
}

Status checkDeviceWorkspace(const PlanView &plan, uint64_t ws, size_t bytes) {
  if (!plan.words || !ws)
    return Status(StatusCode::InvalidArgument, "plan or device workspace is null");
  if (bytes < plan.deviceBytes())
    return Status(StatusCode::WorkspaceTooSmall,
                  "device workspace has " + std::to_string(bytes) +
                      " bytes, the plan and its partial buffers need " +
                      std::to_string(plan.deviceBytes()) +
                      " (planDeviceWorkspaceBytes of its config)");
  if (ws % kDeviceAlign != 0)
    return Status(StatusCode::InvalidArgument,
                  "device workspace is not " + std::to_string(kDeviceAlign) +
                      "-byte aligned");
  return Status::success();
}

Status uploadPlan(const PlanView &plan, uint64_t ws, size_t bytes,
                  uint64_t stream) {
  if (Status s = checkDeviceWorkspace(plan, ws, bytes); !s.ok())
    return s;
  return uploadPlan(plan, ws, stream);
}

/// Argument names of a copy_indices kernel's pairs.
constexpr int32_t kMaxCopyKernelPairs = 16;
static const char *const kPairNames[kMaxCopyKernelPairs][3] = {
    {"n0", "src0", "dst0"},    {"n1", "src1", "dst1"},    {"n2", "src2", "dst2"},
    {"n3", "src3", "dst3"},    {"n4", "src4", "dst4"},    {"n5", "src5", "dst5"},
    {"n6", "src6", "dst6"},    {"n7", "src7", "dst7"},    {"n8", "src8", "dst8"},
    {"n9", "src9", "dst9"},    {"n10", "src10", "dst10"}, {"n11", "src11", "dst11"},
    {"n12", "src12", "dst12"}, {"n13", "src13", "dst13"}, {"n14", "src14", "dst14"},
    {"n15", "src15", "dst15"}};

int32_t copyKernelPairs(const KernelManifest &k) {
  // num_rows, then n, src, dst of each pair: the order the lowering declares
  // them in, which launchCopies binds by position. Another shape: none.
  const size_t n = k.args.size();
  if (k.role != KernelRole::CopyIndices || n < 4 || (n - 1) % 3 != 0 ||
      (n - 1) / 3 > size_t(kMaxCopyKernelPairs) ||
      k.args[0].name != plan_args::kNumRows || k.args[0].kind != ArgKind::I32)
    return 0;
  const int32_t pairs = int32_t((n - 1) / 3);
  static const ArgKind kinds[3] = {ArgKind::I32, ArgKind::Ptr, ArgKind::Ptr};
  for (int32_t i = 0; i < pairs; ++i)
    for (int32_t j = 0; j < 3; ++j)
      if (k.args[1 + 3 * i + j].name != kPairNames[i][j] ||
          k.args[1 + 3 * i + j].kind != kinds[j])
        return 0;
  return pairs;
}

UploadSchedule scheduleUpload(const PlanView &plan, uint64_t deviceWorkspace,
                              const FixedBuffers &fixed, int32_t kernelPairs,
                              bool readsHost) {
  UploadSchedule u;
  PlanSpan spans[kMaxPlanSpans];
  u.numSpans = planUploadSpans(plan, spans);
  for (int32_t i = 0; i < u.numSpans; ++i)
    u.copies[u.numCopies++] = {spans[i].offset, deviceWorkspace + spans[i].offset,
                               int64_t(spans[i].bytes / 4), true};
  const int32_t *w = plan.words;
  const int64_t n = plan.batch();
  const struct {
    PlanHeaderField offset;
    int64_t words;
    uint64_t dst;
  } arrays[3] = {{kHdrOffQoIndptr, n + 1, fixed.qoIndptr},
                 {kHdrOffKvIndptr, n + 1, fixed.kvIndptr},
                 {kHdrOffKvLastLen, n, fixed.kvLastLen}};
  for (const auto &a : arrays)
    if (a.dst && a.words > 0)
      u.copies[u.numCopies++] = {4 * uint64_t(w[a.offset]), a.dst, a.words, true};
  if (fixed.kvIndicesDst && fixed.kvIndicesDst != fixed.kvIndices &&
      fixed.kvIndicesBytes >= 4)
    u.copies[u.numCopies++] = {fixed.kvIndices, fixed.kvIndicesDst,
                               int64_t(fixed.kvIndicesBytes / 4), false};
  const int32_t numFixed = u.numCopies - u.numSpans;
  u.oneLaunch = readsHost && u.numCopies > 1 && u.numCopies <= kernelPairs;
  u.fixedByKernel = !u.oneLaunch && numFixed > 1 && numFixed <= kernelPairs;
  return u;
}

int32_t copyTableRows(const KernelManifest &k) {
  const int64_t rowBytes = 8 * kCopyTableRowWords;
  if (k.role != KernelRole::CopyIndices || k.args.size() != 2 ||
      k.args[0].name != plan_args::kNumRows || k.args[0].kind != ArgKind::I32 ||
      k.args[1].name != "table" || k.args[1].kind != ArgKind::Ptr ||
      k.shared_bytes <= 0 || k.shared_bytes % rowBytes)
    return 0;
  return int32_t(k.shared_bytes / rowBytes);
}

Status writeCopyTable(const PlanView &plan, uint64_t deviceWorkspace,
                      size_t deviceBytes, const FixedBuffers &fixed,
                      int32_t rows, int64_t capacityWords, int64_t *table) {
  if (Status s = checkDeviceWorkspace(plan, deviceWorkspace, deviceBytes); !s.ok())
    return s;
  if (!table || reinterpret_cast<uint64_t>(table) % 8 || rows < 1)
    return Status(StatusCode::InvalidArgument,
                  "the copy table is null, not 8-byte aligned or has no rows");
  // The kernel reads the plan where the host wrote it (device-mapped).
  const UploadSchedule u =
      scheduleUpload(plan, deviceWorkspace, fixed, rows, /*readsHost=*/true);
  if (u.numCopies > rows)
    return Status(StatusCode::InvalidArgument,
                  "the plan's upload makes " + std::to_string(u.numCopies) +
                      " copies; the copy table holds " + std::to_string(rows));
  const uint64_t hostPlan = reinterpret_cast<uint64_t>(plan.words);
  int64_t words = 0;
  for (int32_t i = 0; i < rows; ++i) {
    const WordCopy c = i < u.numCopies ? u.copies[i] : WordCopy{};
    int64_t *row = table + kCopyTableRowWords * i;
    row[0] = c.words;
    row[1] = int64_t(c.words ? (c.fromPlan ? hostPlan + c.src : c.src) : 0);
    row[2] = int64_t(c.words ? c.dst : 0);
    words += c.words;
  }
  if (words > capacityWords)
    return Status(StatusCode::InvalidArgument,
                  "the plan's upload copies " + std::to_string(words) +
                      " words; the captured copy's capacity is " +
                      std::to_string(capacityWords));
  return Status::success();
}

Status run(const Module &m, std::string_view attentionKernel,
           std::string_view mergeKernel, const PlanView &plan, uint64_t ws,
           size_t bytes, const KernelArg *args, int32_t numArgs,
           uint64_t stream) {
  if (Status s = checkDeviceWorkspace(plan, ws, bytes); !s.ok())
    return s;
  return run(m, attentionKernel, mergeKernel, plan, ws, args, numArgs, stream);
}

Status runMerge(const Module &m, std::string_view mergeKernel,
                const PlanView &plan, uint64_t ws, size_t bytes,
                const KernelArg *args, int32_t numArgs, uint64_t stream) {
  if (Status s = checkDeviceWorkspace(plan, ws, bytes); !s.ok())
    return s;
  return runMerge(m, mergeKernel, plan, ws, args, numArgs, stream);
}

namespace {
/// Kernel parameters on the stack: 64 eight-byte slots, and the tensor maps
/// (128 bytes each, 64-byte aligned) a kernel takes by value.
struct ParamBlock {
  uint64_t slots[64];
  void *params[64];
  alignas(64) unsigned char maps[4][128];
  int32_t numMaps = 0;
};
} // namespace

/// The caller's first argument named `name`, or null.
static const KernelArg *findCallerArg(const KernelArg *args, int32_t numArgs,
                                      const std::string &name) {
  for (int32_t j = 0; j < numArgs; ++j)
    if (args[j].name && name == args[j].name)
      return &args[j];
  return nullptr;
}

/// Binds parameter `a` of kernel `k` from the caller's argument of the same
/// name into `slot`; ManifestMismatch when there is none or its kind differs.
static Status bindCallerArg(const KernelManifest &k, const ManifestArg &a,
                            const KernelArg *args, int32_t numArgs,
                            uint64_t *slot) {
  const KernelArg *found = findCallerArg(args, numArgs, a.name);
  if (!found)
    return Status(StatusCode::ManifestMismatch,
                  "kernel \"" + k.name + "\" argument \"" + a.name +
                      "\" is not bound by the caller");
  if (found->kind != a.kind)
    return Status(StatusCode::ManifestMismatch,
                  "kernel \"" + k.name + "\" argument \"" + a.name + "\" is " +
                      argKindName(a.kind) + ", caller passed " +
                      argKindName(found->kind));
  *slot = 0;
  switch (a.kind) {
  case ArgKind::Ptr: *slot = found->ptr; break;
  case ArgKind::I32: std::memcpy(slot, &found->i32, 4); break;
  case ArgKind::I64: std::memcpy(slot, &found->i64, 8); break;
  case ArgKind::F32: std::memcpy(slot, &found->f32, 4); break;
  case ArgKind::TensorMap: break; // bindArgs encodes it: callers never pass one
  }
  return Status::success();
}

/// Fills `pb` for row kernel `k`: num_rows from `numRows`, everything else
/// from `args`. Unlike run(), whose one list feeds two kernels, a row kernel
/// is launched alone, so a caller argument it does not take is an error (a
/// misspelt or stale name would otherwise be dropped silently).
static Status bindRowArgs(const KernelManifest &k, int64_t numRows,
                          const KernelArg *args, int32_t numArgs,
                          ParamBlock *pb) {
  if (!isRowKernel(k.role))
    return Status(StatusCode::InvalidArgument,
                  "kernel \"" + k.name + "\" has role " +
                      kernelRoleName(k.role) +
                      ", not a row kernel (merge_states, append_kv, "
                      "copy_indices)");
  if (numRows < 0 || numRows > std::numeric_limits<int32_t>::max())
    return Status(StatusCode::InvalidArgument,
                  "row kernel \"" + k.name + "\": num_rows " +
                      std::to_string(numRows) + " is outside [0, 2^31-1]");
  if (numArgs < 0 || numArgs > 64 || (numArgs > 0 && !args))
    return Status(StatusCode::InvalidArgument,
                  "row kernel \"" + k.name + "\": args is null or has more "
                  "than 64 entries");
  for (int32_t j = 0; j < numArgs; ++j) {
    const char *n = args[j].name;
    if (!n)
      return Status(StatusCode::InvalidArgument,
                    "row kernel \"" + k.name + "\": argument " +
                        std::to_string(j) + " has no name");
    if (std::strcmp(n, plan_args::kNumRows) == 0)
      return Status(StatusCode::InvalidArgument,
                    "row kernel \"" + k.name + "\": \"num_rows\" is bound by "
                    "the runtime from the row count, not passed as an argument");
    if (k.argIndex(n) < 0)
      return Status(StatusCode::ManifestMismatch,
                    "row kernel \"" + k.name + "\" has no argument \"" + n +
                        "\" (passed by the caller)");
    for (int32_t i = 0; i < j; ++i)
      if (std::strcmp(args[i].name, n) == 0)
        return Status(StatusCode::ManifestMismatch,
                      "row kernel \"" + k.name + "\": argument \"" + n +
                          "\" is passed twice");
  }
  for (size_t i = 0; i < k.args.size(); ++i) {
    const ManifestArg &a = k.args[i];
    pb->params[i] = &pb->slots[i];
    if (a.name == plan_args::kNumRows) {
      if (a.kind != ArgKind::I32) // parseManifest refuses it; a built one may not
        return Status(StatusCode::ManifestMismatch,
                      "row kernel \"" + k.name + "\": argument \"num_rows\" "
                      "is " + argKindName(a.kind) + ", not i32");
      pb->slots[i] = 0;
      int32_t rows = int32_t(numRows);
      std::memcpy(&pb->slots[i], &rows, 4);
      continue;
    }
    if (Status b = bindCallerArg(k, a, args, numArgs, &pb->slots[i]); !b.ok())
      return b;
  }
  return Status::success();
}

Status checkRowLaunch(const KernelManifest &k, int64_t numRows,
                      const KernelArg *args, int32_t numArgs) {
  ParamBlock pb;
  return bindRowArgs(k, numRows, args, numArgs, &pb);
}

int64_t rowGrid(const KernelManifest &k, int64_t numRows, int32_t numSms) {
  if (numRows <= 0)
    return 0;
  const int64_t per = std::max<int64_t>(k.rows_per_cta, 1);
  const int64_t ctas = (numRows + per - 1) / per;
  if (numSms <= 0)
    return ctas;
  return std::min(ctas, int64_t(numSms) * std::max<int64_t>(k.ctas_per_sm, 1));
}

Status Module::loadFiles(const std::string &imagePath,
                         const std::string &manifestPath,
                         std::unique_ptr<Module> *out) {
  auto slurp = [](const std::string &path, std::string *text) {
    std::ifstream f(path, std::ios::binary);
    if (!f)
      return false;
    std::ostringstream ss;
    ss << f.rdbuf();
    *text = ss.str();
    return true;
  };
  std::string image, manifest;
  if (!slurp(imagePath, &image))
    return Status(StatusCode::NotFound, "cannot read kernel image " + imagePath);
  if (!slurp(manifestPath, &manifest))
    return Status(StatusCode::NotFound, "cannot read manifest " + manifestPath);
  return load(image.data(), image.size(), manifest, out);
}

#ifdef ATTN_HAVE_CUDA_H

bool launcherCompiledIn() { return true; }

Status cudaAvailable() {
  Status s;
  return cudaDriver(&s) ? Status::success() : s;
}

Status currentDevice(DeviceInfo *info) {
  Status s;
  const CudaDriver *d = cudaDriverInContext(&s);
  if (!d)
    return s;
  CUdevice dev;
  if (CUresult r = d->ctxGetDevice(&dev); r != CUDA_SUCCESS)
    return cudaFailure(*d, "cuCtxGetDevice", r);
  int major = 0, minor = 0, sms = 0;
  d->deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  d->deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  d->deviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  char name[256] = {};
  d->deviceGetName(name, sizeof(name) - 1, dev);
  info->ordinal = int32_t(dev);
  info->compute_capability = major * 10 + minor;
  info->num_sms = sms;
  info->name = name;
  return Status::success();
}

Module::~Module() {
  if (module_)
    if (const CudaDriver *d = cudaDriver(nullptr))
      d->moduleUnload(static_cast<CUmodule>(module_));
}

void *Module::function(std::string_view name) const {
  for (size_t i = 0; i < manifest_.kernels.size(); ++i)
    if (manifest_.kernels[i].name == name)
      return functions_[i];
  return nullptr;
}

/// Checks the manifest's argument list against the parameters the driver
/// reports for kernel `f` (sizes: 8 bytes for ptr and i64, 4 for i32 and
/// f32), when the driver can tell (cuFuncGetParamInfo, CUDA 12.4+): each
/// listed parameter must exist with its size. A kernel with parameters past
/// the listed ones is not caught: asking for parameter n is how the driver
/// says there is none, an API error that compute-sanitizer reports on every
/// load.
static Status checkParams(const CudaDriver &d, CUfunction f,
                          const KernelManifest &k) {
  if (!d.funcGetParamInfo)
    return Status::success();
  auto mismatch = [&](const std::string &what) {
    return Status(StatusCode::ManifestMismatch,
                  "kernel \"" + k.name + "\" in the module disagrees with its "
                  "manifest: " + what);
  };
  const size_t n = k.args.size();
  for (size_t i = 0; i < n; ++i) {
    size_t offset = 0, size = 0;
    CUresult r = d.funcGetParamInfo(f, i, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE)
      return mismatch("it takes " + std::to_string(i) +
                      " parameters, the manifest lists " + std::to_string(n));
    if (r != CUDA_SUCCESS)
      return Status::success(); // the driver cannot tell for this image
    const ArgKind kind = k.args[i].kind;
    const size_t want = kind == ArgKind::TensorMap                  ? 128
                        : kind == ArgKind::Ptr || kind == ArgKind::I64 ? 8
                                                                       : 4;
    if (size != want)
      return mismatch("parameter " + std::to_string(i) + " (\"" +
                      k.args[i].name + "\", " + argKindName(kind) + ") is " +
                      std::to_string(size) + " bytes in the image, not " +
                      std::to_string(want));
  }
  return Status::success();
}

Status Module::load(const void *image, size_t bytes, std::string_view manifestJson,
                    std::unique_ptr<Module> *out) {
  if (!image || bytes == 0 || !out)
    return Status(StatusCode::InvalidArgument, "kernel image is empty or null");
  std::unique_ptr<Module> m(new Module());
  if (Status s = parseManifest(manifestJson, &m->manifest_); !s.ok())
    return s;
  Status s;
  const CudaDriver *d = cudaDriverInContext(&s);
  if (!d)
    return s;
  DeviceInfo dev;
  if (Status c = currentDevice(&dev); !c.ok())
    return c;
  const std::string &arch = m->manifest_.arch;
  int32_t cc = archComputeCapability(arch);
  bool archSpecific = !arch.empty() && arch.back() == 'a';
  if (cc > dev.compute_capability ||
      (archSpecific && cc != dev.compute_capability))
    return Status(StatusCode::ManifestMismatch,
                  "module built for " + arch + " cannot run on " + dev.name +
                      " (sm_" + std::to_string(dev.compute_capability) + ")");
  // PTX must be NUL-terminated; cubin/fatbin are passed as they are.
  std::string ptx;
  const void *data = image;
  const char *c = static_cast<const char *>(image);
  bool isElf = bytes >= 4 && std::memcmp(c, "\x7f" "ELF", 4) == 0;
  bool isFatbin = bytes >= 4 && std::memcmp(c, "\x50\xed\x55\xba", 4) == 0;
  if (!isElf && !isFatbin) {
    ptx.assign(c, bytes);
    data = ptx.c_str();
  }
  CUmodule mod;
  if (CUresult r = d->moduleLoadData(&mod, data); r != CUDA_SUCCESS)
    return cudaFailure(*d, "cuModuleLoadData", r);
  m->module_ = mod;
  m->num_sms_ = dev.num_sms;
  for (const KernelManifest &k : m->manifest_.kernels) {
    CUfunction f;
    CUresult r = d->moduleGetFunction(&f, mod, k.name.c_str());
    if (r != CUDA_SUCCESS)
      return Status(StatusCode::ManifestMismatch,
                    "kernel \"" + k.name + "\" named in the manifest is not in the module");
    if (Status p = checkParams(*d, f, k); !p.ok())
      return p;
    if (k.shared_bytes > 48 * 1024) {
      r = d->funcSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              k.shared_bytes);
      if (r != CUDA_SUCCESS)
        return cudaFailure(*d, "cuFuncSetAttribute(max dynamic shared)", r);
    }
    m->functions_.push_back(f);
  }
  *out = std::move(m);
  return Status::success();
}

Status copyToDevice(const void *host, size_t bytes, uint64_t device,
                    uint64_t stream) {
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  CUresult r = d->memcpyHtoDAsync(CUdeviceptr(device), host, bytes,
                                  reinterpret_cast<CUstream>(stream));
  return r == CUDA_SUCCESS ? Status::success()
                           : cudaFailure(*d, "cuMemcpyHtoDAsync", r);
}

Status copyOnDevice(uint64_t src, size_t bytes, uint64_t dst, uint64_t stream) {
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  CUresult r = d->memcpyDtoDAsync(CUdeviceptr(dst), CUdeviceptr(src), bytes,
                                  reinterpret_cast<CUstream>(stream));
  return r == CUDA_SUCCESS ? Status::success()
                           : cudaFailure(*d, "cuMemcpyDtoDAsync", r);
}

UploadFence::~UploadFence() {
  if (!event_)
    return;
  if (const CudaDriver *d = cudaDriver(nullptr))
    d->eventDestroy(static_cast<CUevent>(event_)); // fails only at driver teardown
}

Status UploadFence::event(uint64_t stream, void **ev) {
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  CUstream st = reinterpret_cast<CUstream>(stream);
  if (!event_) {
    // The default stream is the current context's: make sure there is one.
    if (Status c = ensureContext(*d); !c.ok())
      return c;
    // In the stream's context, whichever is current: an event records only
    // on streams of its own context.
    CUcontext ctx = nullptr;
    CUresult r = d->streamGetCtx(st, &ctx);
    if (r != CUDA_SUCCESS)
      return cudaFailure(*d, "cuStreamGetCtx", r);
    if ((r = d->ctxPushCurrent(ctx)) != CUDA_SUCCESS)
      return cudaFailure(*d, "cuCtxPushCurrent", r);
    CUevent ev = nullptr;
    r = d->eventCreate(&ev, CU_EVENT_DISABLE_TIMING);
    CUcontext popped = nullptr;
    d->ctxPopCurrent(&popped);
    if (r != CUDA_SUCCESS)
      return cudaFailure(*d, "cuEventCreate", r);
    event_ = ev;
  }
  *ev = event_;
  return Status::success();
}

Status UploadFence::record(uint64_t stream) {
  void *ev = nullptr;
  if (Status s = event(stream, &ev); !s.ok())
    return s;
  const CudaDriver *d = cudaDriver(nullptr);
  CUresult r = d->eventRecord(static_cast<CUevent>(ev), reinterpret_cast<CUstream>(stream));
  if (r != CUDA_SUCCESS)
    return cudaFailure(*d, "cuEventRecord", r);
  recorded_ = true;
  return Status::success();
}

Status UploadFence::recordAfter(uint64_t stream, void *graph, void *node) {
  void *ev = nullptr;
  if (Status s = event(stream, &ev); !s.ok())
    return s;
  const CudaDriver *d = cudaDriver(nullptr);
  CUgraphNode after = static_cast<CUgraphNode>(node), recorded = nullptr;
  CUresult r = d->graphAddEventRecordNode(&recorded, static_cast<CUgraph>(graph),
                                          &after, 1, static_cast<CUevent>(ev));
  if (r != CUDA_SUCCESS)
    return cudaFailure(*d, "cuGraphAddEventRecordNode", r);
  recorded_ = true;
  return Status::success();
}

Status UploadFence::wait() {
  if (!recorded_)
    return Status::success();
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  CUresult r = d->eventSynchronize(static_cast<CUevent>(event_));
  return r == CUDA_SUCCESS ? Status::success()
                           : cudaFailure(*d, "cuEventSynchronize", r);
}

namespace {
/// What one stream is doing with graph capture.
struct CaptureInfo {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  uint64_t id = 0;         // the capture's id while it is active
  CUgraph graph = nullptr; // the graph being captured while it is active
};
} // namespace

/// The one capture query of the runtime: a single cuStreamGetCaptureInfo,
/// none for the legacy default stream (PyTorch's default), which can never
/// capture, so every eager step's plan() is spared a driver call (1.3 us on
/// an H200's host).
static Status queryCapture(const CudaDriver &d, uint64_t stream, CaptureInfo *info) {
  *info = CaptureInfo{};
  if (stream == 0 || stream == reinterpret_cast<uint64_t>(CU_STREAM_LEGACY))
    return Status::success();
  if (Status c = ensureContext(d); !c.ok())
    return c;
  cuuint64_t id = 0;
  CUgraph graph = nullptr;
  CUresult r = d.streamGetCaptureInfo(reinterpret_cast<CUstream>(stream),
                                      &info->status, &id, &graph, nullptr,
                                      nullptr, nullptr);
  if (r != CUDA_SUCCESS)
    return cudaFailure(d, "cuStreamGetCaptureInfo", r);
  if (info->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    info->id = id;
    info->graph = graph;
  }
  return Status::success();
}

/// `queryCapture` for a caller that cannot go on in an invalidated capture.
static Status queryLiveCapture(const CudaDriver &d, uint64_t stream,
                               CaptureInfo *info) {
  if (Status s = queryCapture(d, stream, info); !s.ok())
    return s;
  if (info->status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
    return Status(StatusCode::InvalidArgument,
                  "the stream's graph capture has been invalidated");
  return Status::success();
}

Status streamIsCapturing(uint64_t stream, bool *capturing) {
  *capturing = false;
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  CaptureInfo info;
  if (Status q = queryCapture(*d, stream, &info); !q.ok())
    return q;
  *capturing = info.status != CU_STREAM_CAPTURE_STATUS_NONE;
  return Status::success();
}

Status streamCaptureId(uint64_t stream, uint64_t *id) {
  *id = 0;
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  CaptureInfo info;
  if (Status q = queryLiveCapture(*d, stream, &info); !q.ok())
    return q;
  *id = info.id;
  return Status::success();
}

static Status runUpload(const UploadSchedule &u, const Module *m,
                        const KernelManifest *k, int32_t pairs,
                        uint64_t hostPlan, uint64_t deviceWorkspace,
                        UploadFence *fence, uint64_t stream);

Status uploadPlan(const PlanView &plan, uint64_t deviceWorkspace, uint64_t stream) {
  if (!plan.words || !deviceWorkspace)
    return Status(StatusCode::InvalidArgument, "plan or device workspace is null");
  // The driver first: a caller without CUDA learns that before the plan is read.
  Status s;
  if (!cudaDriver(&s))
    return s;
  return runUpload(scheduleUpload(plan, deviceWorkspace, FixedBuffers{}, 0, false),
                   nullptr, nullptr, 0, reinterpret_cast<uint64_t>(plan.words),
                   deviceWorkspace, nullptr, stream);
}

/// Where the call's K/V rows lie besides the buffers (TensorMap.h): the
/// strides or page stride and count it binds, once for both of a launch's
/// maps.
static Status getKVRowAddressing(const KernelManifest &k, const KernelArg *args,
                                 int32_t numArgs, KVRowAddressing *rows) {
  auto bound = [&](const char *name, ArgKind kind) -> const KernelArg * {
    const KernelArg *a = findCallerArg(args, numArgs, name);
    return a && a->kind == kind ? a : nullptr;
  };
  const bool paged = k.indexing == KVIndexing::Paged;
  rows->strided = !paged && k.argIndex("kv_token_stride") >= 0;
  if (!paged && !rows->strided)
    return Status::success(); // dense rows: the manifest says where
  const KernelArg *first = paged ? bound("page_stride", ArgKind::I64)
                                 : bound("kv_token_stride", ArgKind::I64);
  const KernelArg *second = paged ? bound("num_pages", ArgKind::I32)
                                  : bound("kv_head_stride", ArgKind::I64);
  if (!first || !second)
    return Status(StatusCode::ManifestMismatch,
                  "kernel \"" + k.name + "\" loads K/V by TMA: " +
                      (paged ? "page_stride (i64) and num_pages (i32)"
                             : "kv_token_stride and kv_head_stride (i64)") +
                      " are not bound by the caller");
  if (paged) {
    rows->pageStride = first->i64;
    rows->numPages = second->i32;
  } else {
    rows->tokenStride = first->i64;
    rows->headStride = second->i64;
  }
  return Status::success();
}

/// Encodes tensor map `a` of kernel `k` (TensorMap.h) from the caller's
/// source buffer and the call's row addressing into the next map slot of
/// `pb`.
static Status bindTensorMap(const KernelManifest &k, const ManifestArg &a,
                            const KernelArg *args, int32_t numArgs,
                            const KVRowAddressing &rows, ParamBlock *pb,
                            void **param) {
  const KernelArg *source = findCallerArg(args, numArgs, a.source);
  if (!source || source->kind != ArgKind::Ptr)
    return Status(StatusCode::ManifestMismatch,
                  "kernel \"" + k.name + "\" tensor map \"" + a.name +
                      "\": its source \"" + a.source +
                      "\" is not bound by the caller as a ptr");
  KVTensorMapDesc m;
  if (Status st = describeKVTensorMap(k, a, source->ptr, rows, &m); !st.ok())
    return st;
  Status st;
  const CudaDriver *d = cudaDriver(&st);
  if (!d)
    return st;
  if (!d->tensorMapEncodeTiled)
    return Status(StatusCode::CudaUnavailable,
                  "kernel \"" + k.name + "\" loads K/V by TMA; the driver "
                  "lacks cuTensorMapEncodeTiled");
  if (pb->numMaps == int32_t(std::size(pb->maps)))
    return Status(StatusCode::ManifestMismatch,
                  "kernel \"" + k.name + "\" takes more than " +
                      std::to_string(std::size(pb->maps)) + " tensor maps");
  void *map = pb->maps[pb->numMaps++];
  const cuuint32_t elementStrides[4] = {1, 1, 1, 1};
  CUresult r = d->tensorMapEncodeTiled(
      static_cast<CUtensorMap *>(map),
      m.f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
      m.rank, reinterpret_cast<void *>(m.address), m.dims, m.strides, m.box,
      elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return cudaFailure(*d, "cuTensorMapEncodeTiled", r);
  *param = map;
  return Status::success();
}

/// Fills `pb` for kernel `k` from the plan's device arrays and `args`.
static Status bindArgs(const KernelManifest &k, const PlanView &plan,
                       uint64_t ws, const KernelArg *args, int32_t numArgs,
                       ParamBlock *pb) {
  const int32_t *w = plan.words;
  auto planPtr = [&](const std::string &n, uint64_t *v) {
    if (n == plan_args::kPlan) *v = ws;
    else if (n == plan_args::kCtaIndptr) *v = ws + 4 * uint64_t(w[kHdrOffCtaIndptr]);
    else if (n == plan_args::kWorkItems) *v = ws + 4 * uint64_t(w[kHdrOffItems]);
    else if (n == plan_args::kMergeIndptr) *v = ws + 4 * uint64_t(w[kHdrOffMergeIndptr]);
    else if (n == plan_args::kMergeUnits) *v = ws + 4 * uint64_t(w[kHdrOffMergeUnits]);
    else if (n == plan_args::kPartialO) *v = ws + plan.partialOOffset();
    else if (n == plan_args::kPartialLse) *v = ws + plan.partialLseOffset();
    else if (n == plan_args::kQoIndptr) *v = ws + 4 * uint64_t(w[kHdrOffQoIndptr]);
    else if (n == plan_args::kKvIndptr) *v = ws + 4 * uint64_t(w[kHdrOffKvIndptr]);
    else if (n == plan_args::kKvLastLen) *v = ws + 4 * uint64_t(w[kHdrOffKvLastLen]);
    else return false;
    return true;
  };
  std::optional<KVRowAddressing> rows; // the first tensor map's, for both
  for (size_t i = 0; i < k.args.size(); ++i) {
    const ManifestArg &a = k.args[i];
    uint64_t v = 0;
    pb->params[i] = &pb->slots[i];
    if (a.kind == ArgKind::Ptr && planPtr(a.name, &v)) {
      pb->slots[i] = v;
      continue;
    }
    if (a.kind == ArgKind::I32 && a.name == plan_args::kSlotRows) {
      int32_t rows = plan.slotRows();
      std::memcpy(&pb->slots[i], &rows, 4);
      continue;
    }
    if (a.kind == ArgKind::TensorMap) {
      if (!rows) {
        rows.emplace();
        if (Status b = getKVRowAddressing(k, args, numArgs, &*rows); !b.ok())
          return b;
      }
      if (Status b =
              bindTensorMap(k, a, args, numArgs, *rows, pb, &pb->params[i]);
          !b.ok())
        return b;
      continue;
    }
    if (Status b = bindCallerArg(k, a, args, numArgs, &pb->slots[i]); !b.ok())
      return b;
  }
  return Status::success();
}

/// Whether programmatic dependent launch is allowed (ATTN_NO_PDL=1 turns it
/// off, e.g. to measure what it is worth).
static bool pdlEnabled() {
  static const bool enabled = [] {
    const char *e = std::getenv("ATTN_NO_PDL");
    return !(e && *e && std::strcmp(e, "0") != 0);
  }();
  return enabled;
}

/// Launches `k`. A kernel whose manifest says `pdl` (it begins with
/// griddepcontrol.wait) is launched with programmatic stream serialization:
/// it may start while the previous kernel on the stream drains, and waits
/// for that kernel's writes itself. Stream capture records this as a
/// programmatic graph edge, so graphs keep the same semantics.
static Status launch(const CudaDriver &d, const Module &m, const KernelManifest &k,
                     uint32_t grid, ParamBlock &pb, uint64_t stream) {
  CUfunction f = static_cast<CUfunction>(m.function(k.name));
  CUstream s = reinterpret_cast<CUstream>(stream);
  if (k.pdl && d.launchKernelEx && pdlEnabled()) {
    CUlaunchAttribute attr[1] = {};
    attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr[0].value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg = {};
    cfg.gridDimX = grid, cfg.gridDimY = 1, cfg.gridDimZ = 1;
    cfg.blockDimX = uint32_t(k.threads), cfg.blockDimY = 1, cfg.blockDimZ = 1;
    cfg.sharedMemBytes = uint32_t(k.shared_bytes);
    cfg.hStream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CUresult r = d.launchKernelEx(&cfg, f, pb.params, nullptr);
    return r == CUDA_SUCCESS
               ? Status::success()
               : cudaFailure(d, ("cuLaunchKernelEx(" + k.name + ")").c_str(), r);
  }
  CUresult r = d.launchKernel(f, grid, 1, 1, uint32_t(k.threads), 1, 1,
                              uint32_t(k.shared_bytes), s, pb.params, nullptr);
  return r == CUDA_SUCCESS ? Status::success()
                           : cudaFailure(d, ("cuLaunchKernel(" + k.name + ")").c_str(), r);
}

/// The merge grid the manifest's launch shape asks for (docs/Manifest.md):
/// max_ctas in graph mode (the kernel is grid-strided), else the number of
/// units capped at max_ctas (`units`), or one CTA per (unit, row group)
/// (`unit_rows`).
static int64_t mergeGrid(const KernelManifest &k, const PlanView &plan) {
  int64_t maxCtas = plan.header(kHdrMaxCtas);
  if (plan.header(kHdrGraphMode) != 0)
    return maxCtas;
  int64_t units = plan.numMergeUnits();
  if (k.merge_grid == MergeGrid::Units)
    return std::min(units, maxCtas);
  // Short CTAs, one per (unit, row group): all of them at once (the grid
  // only has to be fixed in graph mode).
  int64_t rows = k.merge_rows_per_cta;
  return units * ((int64_t(plan.slotRows()) + rows - 1) / rows);
}

/// The merge grid, refused when it passes CUDA's 2^31-1 blocks.
static Status mergeGridChecked(const KernelManifest &k, const PlanView &plan,
                               uint32_t *grid) {
  const int64_t g = mergeGrid(k, plan);
  if (g < 0 || g > std::numeric_limits<int32_t>::max())
    return Status(StatusCode::InvalidArgument,
                  "merge kernel \"" + k.name + "\": a grid of " +
                      std::to_string(g) + " CTAs (merge units x row groups of "
                      "merge_rows_per_cta) exceeds 2^31-1");
  *grid = uint32_t(g);
  return Status::success();
}

static Status lookup(const Module &m, std::string_view name, KernelRole role,
                     const KernelManifest **out) {
  const KernelManifest *k = m.kernel(name);
  if (!k)
    return Status(StatusCode::NotFound,
                  "no kernel \"" + std::string(name) + "\" in the module");
  if (k->role != role)
    return Status(StatusCode::ManifestMismatch,
                  "kernel \"" + k->name + "\" has role " +
                      kernelRoleName(k->role));
  *out = k;
  return Status::success();
}

/// The driver, and kernel `name` of `role` checked against the plan: what
/// every launch needs before it binds arguments.
static Status prepare(const Module &m, std::string_view name, KernelRole role,
                      const PlanView &plan, uint64_t ws, const CudaDriver **d,
                      const KernelManifest **k) {
  Status s;
  if (!(*d = cudaDriver(&s)))
    return s;
  if (!plan.words || !ws)
    return Status(StatusCode::InvalidArgument, "plan or device workspace is null");
  if (Status l = lookup(m, name, role, k); !l.ok())
    return l;
  return checkAgainstPlanView(**k, plan);
}

Status runMerge(const Module &m, std::string_view mergeKernel, const PlanView &plan,
                uint64_t ws, const KernelArg *args, int32_t numArgs,
                uint64_t stream) {
  const CudaDriver *d;
  const KernelManifest *k;
  if (Status p = prepare(m, mergeKernel, KernelRole::Merge, plan, ws, &d, &k);
      !p.ok())
    return p;
  uint32_t grid = 0;
  if (Status g = mergeGridChecked(*k, plan, &grid); !g.ok())
    return g;
  if (grid == 0)
    return Status::success();
  ParamBlock pb;
  if (Status b = bindArgs(*k, plan, ws, args, numArgs, &pb); !b.ok())
    return b;
  return launch(*d, m, *k, uint32_t(grid), pb, stream);
}

Status run(const Module &m, std::string_view attentionKernel,
           std::string_view mergeKernel, const PlanView &plan, uint64_t ws,
           const KernelArg *args, int32_t numArgs, uint64_t stream) {
  const CudaDriver *d;
  const KernelManifest *k;
  if (Status p = prepare(m, attentionKernel, KernelRole::Attention, plan, ws,
                         &d, &k);
      !p.ok())
    return p;
  bool needMerge = plan.header(kHdrGraphMode) != 0 || plan.numMergeUnits() > 0;
  if (needMerge && mergeKernel.empty())
    return Status(StatusCode::InvalidArgument,
                  "the plan splits KV (or is in graph mode) but no merge kernel "
                  "was given");
  // Bind both kernels before launching either: bad input launches nothing.
  ParamBlock pb, pbMerge;
  if (Status b = bindArgs(*k, plan, ws, args, numArgs, &pb); !b.ok())
    return b;
  const KernelManifest *mk = nullptr;
  uint32_t grid = 0;
  if (needMerge) {
    if (Status l = lookup(m, mergeKernel, KernelRole::Merge, &mk); !l.ok())
      return l;
    if (Status c = checkAgainstPlanView(*mk, plan); !c.ok())
      return c;
    if (Status g = mergeGridChecked(*mk, plan, &grid); !g.ok())
      return g;
    if (Status b = bindArgs(*mk, plan, ws, args, numArgs, &pbMerge); !b.ok())
      return b;
  }
  if (plan.numCtas() > 0)
    if (Status l = launch(*d, m, *k, uint32_t(plan.numCtas()), pb, stream); !l.ok())
      return l;
  if (!needMerge)
    return Status::success();
  return grid > 0 ? launch(*d, m, *mk, grid, pbMerge, stream)
                  : Status::success();
}

/// Row kernel `k`'s grid over `numRows` rows (rowGrid), its parameters bound
/// in `pb`; nothing for zero rows.
static Status launchRowGrid(const Module &m, const KernelManifest &k,
                            int64_t numRows, ParamBlock &pb, uint64_t stream) {
  const int64_t grid = rowGrid(k, numRows, m.numSms());
  if (grid == 0)
    return Status::success();
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  return launch(*d, m, k, uint32_t(grid), pb, stream);
}

/// One launch of copy_indices kernel `k` of `m` over `copies` (the kernel's
/// other pairs copy nothing); a copy from the plan reads it at `planBase`
/// (the host plan, or its device copy).
static Status launchCopies(const Module &m, const KernelManifest &k,
                           int32_t pairs, const WordCopy *copies,
                           int32_t numCopies, uint64_t planBase,
                           uint64_t stream) {
  // Bound by position (copyKernelPairs(k), `pairs`, checked the names):
  // launchRows' match by name is quadratic in the 25 arguments, several
  // microseconds a plan.
  if (numCopies > pairs)
    return Status(StatusCode::InvalidArgument,
                  "copy kernel \"" + k.name + "\" copies " +
                      std::to_string(pairs) + " arrays, " +
                      std::to_string(numCopies) + " asked");
  ParamBlock pb;
  int64_t rows = 0;
  for (int32_t i = 0; i < pairs; ++i) {
    const WordCopy c = i < numCopies ? copies[i] : WordCopy{};
    if (c.words < 0 || c.words > std::numeric_limits<int32_t>::max() - rows)
      return Status(StatusCode::InvalidArgument,
                    "the copy kernel's arrays exceed 2^31-1 words");
    rows += c.words;
    const int32_t words = int32_t(c.words);
    uint64_t *slot = pb.slots + 1 + 3 * i;
    slot[0] = 0;
    std::memcpy(&slot[0], &words, 4);
    slot[1] = c.words ? (c.fromPlan ? planBase + c.src : c.src) : 0;
    slot[2] = c.words ? c.dst : 0;
  }
  const int32_t numRows = int32_t(rows);
  pb.slots[0] = 0;
  std::memcpy(&pb.slots[0], &numRows, 4);
  for (int32_t i = 0; i < 1 + 3 * pairs; ++i)
    pb.params[i] = &pb.slots[i];
  return launchRowGrid(m, k, rows, pb, stream);
}

/// The copy of `bytes` bytes of host memory `host` to device memory
/// `device`, as the parameters of a memcpy node.
static CUDA_MEMCPY3D hostToDevice(uint64_t host, uint64_t device, size_t bytes) {
  CUDA_MEMCPY3D c = {};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = reinterpret_cast<const void *>(host);
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = static_cast<CUdeviceptr>(device);
  c.WidthInBytes = bytes;
  c.Height = 1;
  c.Depth = 1;
  return c;
}

/// Puts copy_by_table kernel `k` of `m` (`grid` CTAs, parameters `pb`) at
/// the head of `graph`, which `stream` is capturing (copyByTable): first
/// `staging` (nonnull: a memcpy node of the table's `tableBytes` from
/// `table`), then the kernel, `fence`'s event node after it.
static Status captureAtHead(const CudaDriver &d, const Module &m,
                            const KernelManifest &k, uint32_t grid,
                            ParamBlock &pb, uint64_t table, uint64_t staging,
                            size_t tableBytes, UploadFence *fence,
                            uint64_t stream, CUgraph graph) {
  CUstream s = reinterpret_cast<CUstream>(stream);
  // The graph's roots before the copy joins them.
  size_t numRoots = 0;
  CUresult r = d.graphGetRootNodes(graph, nullptr, &numRoots);
  if (r != CUDA_SUCCESS)
    return cudaFailure(d, "cuGraphGetRootNodes", r);
  std::vector<CUgraphNode> roots(numRoots);
  if (numRoots &&
      (r = d.graphGetRootNodes(graph, roots.data(), &numRoots)) != CUDA_SUCCESS)
    return cudaFailure(d, "cuGraphGetRootNodes", r);
  CUgraphNode staged = nullptr;
  if (staging) {
    CUcontext ctx = nullptr;
    if ((r = d.streamGetCtx(s, &ctx)) != CUDA_SUCCESS)
      return cudaFailure(d, "cuStreamGetCtx", r);
    const CUDA_MEMCPY3D c = hostToDevice(table, staging, tableBytes);
    if ((r = d.graphAddMemcpyNode(&staged, graph, nullptr, 0, &c, ctx)) != CUDA_SUCCESS)
      return cudaFailure(d, "cuGraphAddMemcpyNode(copy_by_table's table)", r);
  }
  CUDA_KERNEL_NODE_PARAMS p = {};
  p.func = static_cast<CUfunction>(m.function(k.name));
  p.gridDimX = grid, p.gridDimY = 1, p.gridDimZ = 1;
  p.blockDimX = uint32_t(k.threads), p.blockDimY = 1, p.blockDimZ = 1;
  p.sharedMemBytes = uint32_t(k.shared_bytes);
  p.kernelParams = pb.params;
  CUgraphNode copy = nullptr;
  if ((r = d.graphAddKernelNode(&copy, graph, staged ? &staged : nullptr,
                                staged ? 1 : 0, &p)) != CUDA_SUCCESS)
    return cudaFailure(d, ("cuGraphAddKernelNode(" + k.name + ")").c_str(), r);
  if (numRoots) {
    std::vector<CUgraphNode> from(numRoots, copy);
    if ((r = d.graphAddDependencies(graph, from.data(), roots.data(), nullptr,
                                    numRoots)) != CUDA_SUCCESS)
      return cudaFailure(d, "cuGraphAddDependencies", r);
  }
  // The stream's next work too (all of it when the capture held nothing).
  if ((r = d.streamUpdateCaptureDependencies(s, &copy, nullptr, 1,
                                             CU_STREAM_ADD_CAPTURE_DEPENDENCIES)) !=
      CUDA_SUCCESS)
    return cudaFailure(d, "cuStreamUpdateCaptureDependencies", r);
  return fence ? fence->recordAfter(stream, graph, copy) : Status::success();
}

Status copyByTable(const Module &m, std::string_view kernel, uint64_t table,
                   uint64_t staging, int64_t capacityWords, UploadFence *fence,
                   uint64_t stream) {
  const KernelManifest *k = m.kernel(kernel);
  const int32_t rows = k ? copyTableRows(*k) : 0;
  if (!rows)
    return Status(StatusCode::NotFound, "no copy_by_table kernel \"" +
                                            std::string(kernel) +
                                            "\" in the module");
  if (!table || capacityWords < 0 ||
      capacityWords > std::numeric_limits<int32_t>::max())
    return Status(StatusCode::InvalidArgument,
                  "copy_by_table: the table is null or the capacity " +
                      std::to_string(capacityWords) +
                      " is outside [0, 2^31-1]");
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  CaptureInfo capture;
  if (Status c = queryLiveCapture(*d, stream, &capture); !c.ok())
    return Status(c.code(), "copy_by_table: " + c.message());
  CUgraph graph = capture.graph;
  const size_t tableBytes = size_t(rows) * 3 * sizeof(int64_t);
  ParamBlock pb;
  const int32_t numRows = int32_t(capacityWords);
  pb.slots[0] = 0;
  std::memcpy(&pb.slots[0], &numRows, 4);
  pb.slots[1] = staging ? staging : table;
  pb.params[0] = &pb.slots[0];
  pb.params[1] = &pb.slots[1];
  // One CTA per SM at most; the grid-strided loop covers the rest. (A grid
  // of a word a thread was no faster on an H100: bench/NOTES.md, v62.)
  const int64_t grid = std::min<int64_t>(rowGrid(*k, capacityWords, m.numSms()),
                                         std::max(m.numSms(), 1));
  if (grid == 0) // nothing to copy
    return fence && !graph ? fence->record(stream) : Status::success();
  if (graph)
    return captureAtHead(*d, m, *k, uint32_t(grid), pb, table, staging,
                         tableBytes, fence, stream, graph);
  if (staging) {
    CUresult r = d->memcpyHtoDAsync(static_cast<CUdeviceptr>(staging),
                                    reinterpret_cast<const void *>(table),
                                    tableBytes, reinterpret_cast<CUstream>(stream));
    if (r != CUDA_SUCCESS)
      return cudaFailure(*d, "cuMemcpyHtoDAsync(copy_by_table's table)", r);
  }
  if (Status l = launch(*d, m, *k, uint32_t(grid), pb, stream); !l.ok())
    return l;
  return fence ? fence->record(stream) : Status::success();
}

/// Queues schedule `u` (of a plan at host address `hostPlan`) with copy
/// kernel `k` of `m` (`pairs` pairs; null: the driver's copies alone), and
/// records `fence` (nullable) after the last copy that reads the host plan.
static Status runUpload(const UploadSchedule &u, const Module *m,
                        const KernelManifest *k, int32_t pairs,
                        uint64_t hostPlan, uint64_t deviceWorkspace,
                        UploadFence *fence, uint64_t stream) {
  auto record = [&] { return fence ? fence->record(stream) : Status::success(); };
  if (u.oneLaunch) {
    Status s = launchCopies(*m, *k, pairs, u.copies, u.numCopies, hostPlan, stream);
    return s.ok() ? record() : s;
  }
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  const CUstream st = reinterpret_cast<CUstream>(stream);
  for (int32_t i = 0; i < u.numCopies; ++i) {
    if (i == u.numSpans && u.fixedByKernel) { // the rest from the plan's device copy
      if (Status r = record(); !r.ok())
        return r;
      return launchCopies(*m, *k, pairs, u.copies + i, u.numCopies - i,
                          deviceWorkspace, stream);
    }
    const WordCopy &c = u.copies[i];
    const size_t bytes = size_t(c.words) * 4;
    CUresult r = c.fromPlan
                     ? d->memcpyHtoDAsync(CUdeviceptr(c.dst),
                                          reinterpret_cast<const void *>(hostPlan + c.src),
                                          bytes, st)
                     : d->memcpyDtoDAsync(CUdeviceptr(c.dst), CUdeviceptr(c.src),
                                          bytes, st);
    if (r != CUDA_SUCCESS)
      return cudaFailure(*d, c.fromPlan ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoDAsync", r);
  }
  return record();
}

Status uploadPlan(const PlanView &plan, uint64_t deviceWorkspace,
                  size_t deviceBytes, const FixedBuffers &fixed,
                  const CopyKernel &kernel, UploadFence *fence, uint64_t stream) {
  if (Status s = checkDeviceWorkspace(plan, deviceWorkspace, deviceBytes); !s.ok())
    return s;
  const KernelManifest *k =
      kernel.module ? kernel.module->kernel(kernel.name) : nullptr;
  if (kernel.module && !k)
    return Status(StatusCode::NotFound, "no copy kernel \"" +
                                            std::string(kernel.name) +
                                            "\" in the module");
  const int32_t pairs = k ? copyKernelPairs(*k) : 0;
  return runUpload(scheduleUpload(plan, deviceWorkspace, fixed, pairs,
                                  kernel.readsHost),
                   kernel.module, k, pairs, reinterpret_cast<uint64_t>(plan.words),
                   deviceWorkspace, fence, stream);
}

Status hostIsDeviceMapped(const void *host, size_t bytes, bool *mapped) {
  *mapped = false;
  if (!host || !bytes)
    return Status::success();
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  if (Status c = ensureContext(*d); !c.ok())
    return c;
  // Pageable memory is not an error: the query fails and the answer is no.
  const uint64_t first = reinterpret_cast<uint64_t>(host);
  for (uint64_t at : {first, first + bytes - 1}) {
    CUdeviceptr device = 0;
    if (d->pointerGetAttribute(&device, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                               CUdeviceptr(at)) != CUDA_SUCCESS ||
        uint64_t(device) != at)
      return Status::success();
  }
  *mapped = true;
  return Status::success();
}

Status launchRows(const Module &m, std::string_view kernel, int64_t numRows,
                  const KernelArg *args, int32_t numArgs, uint64_t stream) {
  const KernelManifest *k = m.kernel(kernel);
  if (!k)
    return Status(StatusCode::NotFound,
                  "no kernel \"" + std::string(kernel) + "\" in the module");
  // Bind first: bad input is refused the same way with zero rows.
  ParamBlock pb;
  if (Status b = bindRowArgs(*k, numRows, args, numArgs, &pb); !b.ok())
    return b;
  return launchRowGrid(m, *k, numRows, pb, stream);
}

#else // !ATTN_HAVE_CUDA_H

static Status noCuda() {
  return Status(StatusCode::CudaUnavailable,
                "attn runtime was built without the CUDA headers; the launcher "
                "is not available");
}
bool launcherCompiledIn() { return false; }
Status cudaAvailable() { return noCuda(); }
Status currentDevice(DeviceInfo *) { return noCuda(); }
Module::~Module() = default;
void *Module::function(std::string_view) const { return nullptr; }
Status Module::load(const void *, size_t, std::string_view, std::unique_ptr<Module> *) {
  return noCuda();
}
Status uploadPlan(const PlanView &, uint64_t, uint64_t) { return noCuda(); }
Status copyToDevice(const void *, size_t, uint64_t, uint64_t) { return noCuda(); }
Status copyOnDevice(uint64_t, size_t, uint64_t, uint64_t) { return noCuda(); }
Status uploadPlan(const PlanView &, uint64_t, size_t, const FixedBuffers &,
                  const CopyKernel &, UploadFence *, uint64_t) {
  return noCuda();
}
Status hostIsDeviceMapped(const void *host, size_t bytes, bool *mapped) {
  *mapped = false;
  return host && bytes ? noCuda() : Status::success();
}
UploadFence::~UploadFence() = default;
Status UploadFence::record(uint64_t) { return noCuda(); }
Status UploadFence::recordAfter(uint64_t, void *, void *) { return noCuda(); }
Status copyByTable(const Module &, std::string_view, uint64_t, uint64_t,
                   int64_t, UploadFence *, uint64_t) {
  return noCuda();
}
Status streamCaptureId(uint64_t, uint64_t *) { return noCuda(); }
Status UploadFence::wait() { return recorded_ ? noCuda() : Status::success(); }
Status streamIsCapturing(uint64_t, bool *) { return noCuda(); }
Status run(const Module &, std::string_view, std::string_view, const PlanView &,
           uint64_t, const KernelArg *, int32_t, uint64_t) {
  return noCuda();
}
Status runMerge(const Module &, std::string_view, const PlanView &, uint64_t,
                const KernelArg *, int32_t, uint64_t) {
  return noCuda();
}
Status launchRows(const Module &, std::string_view, int64_t, const KernelArg *,
                  int32_t, uint64_t) {
  return noCuda();
}

#endif // ATTN_HAVE_CUDA_H

} // namespace attnrt
