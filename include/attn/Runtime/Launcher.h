//===- Launcher.h - Module loading and persistent-grid launch ---*- C++ -*-===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Loads compiled kernels (cubin, fatbin or PTX) with their manifest through the
// CUDA driver API and launches the persistent grid a plan describes, or a row
// kernel's grid over its rows (launchRows). The driver
// (libcuda.so.1) is opened with dlopen on first use, so this header and the
// library build and link on machines without a GPU; every entry point then
// reports CudaUnavailable. Handles are plain integers (CUstream, CUdeviceptr)
// so that callers need no CUDA headers.
//
// Contexts: the runtime uses the calling thread's current CUDA context; if
// there is none it makes device 0's primary context current (the one the CUDA
// runtime and PyTorch use).
//
// Graph safety: run() allocates nothing, never synchronizes, and in graph mode
// launches a grid that depends only on the PlanConfig, so it can be captured
// once and replayed after later plans are uploaded with uploadPlan().
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_RUNTIME_LAUNCHER_H
#define ATTN_RUNTIME_LAUNCHER_H

#include "attn/Runtime/Manifest.h"
#include "attn/Runtime/Plan.h"
#include "attn/Runtime/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace attnrt {

/// One caller-bound kernel argument, matched by name against the manifest.
struct KernelArg {
  const char *name = nullptr;
  ArgKind kind = ArgKind::Ptr;
  union {
    uint64_t ptr; ///< CUdeviceptr
    int32_t i32;
    int64_t i64;
    float f32;
  };
  KernelArg() : ptr(0) {}
  static KernelArg pointer(const char *n, uint64_t p) {
    KernelArg a; a.name = n; a.kind = ArgKind::Ptr; a.ptr = p; return a;
  }
  static KernelArg int32(const char *n, int32_t v) {
    KernelArg a; a.name = n; a.kind = ArgKind::I32; a.i32 = v; return a;
  }
  static KernelArg int64(const char *n, int64_t v) {
    KernelArg a; a.name = n; a.kind = ArgKind::I64; a.i64 = v; return a;
  }
  static KernelArg float32(const char *n, float v) {
    KernelArg a; a.name = n; a.kind = ArgKind::F32; a.f32 = v; return a;
  }
};

/// Whether the launcher was compiled in (CUDA headers found at configure time).
bool launcherCompiledIn();

/// Loads the driver and checks for a device; CudaUnavailable with the reason if
/// there is none. Cheap after the first call.
Status cudaAvailable();

struct DeviceInfo {
  int32_t ordinal = 0;
  int32_t compute_capability = 0; ///< major*10 + minor
  int32_t num_sms = 0;
  std::string name;
};

/// Properties of the current context's device (see the context rule above).
Status currentDevice(DeviceInfo *info);

/// A loaded module: the CUDA module plus its manifest (the kernel registry).
class Module {
public:
  ~Module();
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  /// Loads `image` (cubin, fatbin, or PTX text) with its manifest JSON.
  /// Refuses a manifest for another arch than the device, and a manifest that
  /// names kernels the image lacks. Sets the dynamic shared-memory limit.
  static Status load(const void *image, size_t bytes, std::string_view manifestJson,
                     std::unique_ptr<Module> *out);
  /// Reads both files and calls load().
  static Status loadFiles(const std::string &imagePath,
                          const std::string &manifestPath,
                          std::unique_ptr<Module> *out);

  const Manifest &manifest() const { return manifest_; }
  /// The kernel registry: looks a kernel up by name (nullptr if absent).
  const KernelManifest *kernel(std::string_view name) const {
    return manifest_.find(name);
  }
  /// CUfunction of a kernel, as an opaque pointer.
  void *function(std::string_view name) const;
  /// SMs of the device the module was loaded on (its context's device).
  int32_t numSms() const { return num_sms_; }

private:
  Module() = default;
  Manifest manifest_;
  int32_t num_sms_ = 0;
  void *module_ = nullptr;          ///< CUmodule
  std::vector<void *> functions_;   ///< CUfunction per manifest kernel
};

/// Checks that `kernel` can run plans of `config` (role attention, tile, GQA
/// packing, heads, head_dim, KV indexing). ManifestMismatch names the field.
Status checkKernelMatchesPlan(const KernelManifest &kernel, const PlanConfig &config,
                              int32_t candidate);

/// Copies the flat plan (host workspace) to the start of the device workspace:
/// the parts its counts cover (planUploadSpans), a cuMemcpyHtoDAsync each on
/// `stream` (truly async when the host buffer is pinned); what lies beyond
/// them on the device is left as it was and never read.
/// `deviceBytes` is the device workspace's size: WorkspaceTooSmall when it
/// is below plan.deviceBytes().
Status uploadPlan(const PlanView &plan, uint64_t deviceWorkspace,
                  size_t deviceBytes, uint64_t stream);
/// The same without the size check (the caller vouches for the workspace).
Status uploadPlan(const PlanView &plan, uint64_t deviceWorkspace, uint64_t stream);

/// Graph mode's fixed device buffers: where a plan's upload also copies the
/// step's qo_indptr, kv_indptr and kv_last_len (the plan's own copies; 0
/// skips one) and the page table (kvIndicesBytes from device address
/// kvIndices to kvIndicesDst; skipped when 0 or the same address). A
/// captured graph (and an engine's own captured appends) reads them there.
struct FixedBuffers {
  uint64_t qoIndptr = 0, kvIndptr = 0, kvLastLen = 0;
  uint64_t kvIndices = 0, kvIndicesDst = 0;
  size_t kvIndicesBytes = 0;
};

/// A copy_indices kernel (`name` in `module`; none when module is null) that
/// makes several int32 copies in one launch. `readsHost`: the plan's host
/// workspace is pinned memory mapped at the same address on the device
/// (hostIsDeviceMapped), so the kernel may read the plan there.
struct CopyKernel {
  const Module *module = nullptr;
  std::string_view name;
  bool readsHost = false;
};

/// One int32 copy of an upload: `words` words to device address `dst` from
/// byte `src` of the host plan (`fromPlan`: the kernel or the driver reads
/// it there, or from the plan's device copy at the same offset) or from
/// device address `src`.
struct WordCopy {
  uint64_t src = 0, dst = 0;
  int64_t words = 0;
  bool fromPlan = false;
};

/// Most copies an upload makes: the plan's spans, three index arrays and the
/// page table.
constexpr int32_t kMaxUploadCopies = kMaxPlanSpans + 4;

/// How uploadPlan queues a plan's copy and its fixed-buffer copies, as few
/// driver calls as it can (scheduleUpload decides; CPU-testable).
struct UploadSchedule {
  WordCopy copies[kMaxUploadCopies];
  int32_t numSpans = 0;  ///< copies[0, numSpans): the plan into the workspace
  int32_t numCopies = 0; ///< the fixed buffers' copies follow the spans
  /// Every copy in one launch of the copy kernel, which reads the plan from
  /// the host; else the spans by the driver (one call each), then the fixed
  /// buffers' copies in one launch (`fixedByKernel`: from the plan's device
  /// copy) or by the driver (one call each).
  bool oneLaunch = false;
  bool fixedByKernel = false;
};

/// The schedule of `plan`'s upload to `deviceWorkspace` with `fixed`'s copies
/// by a copy kernel of `kernelPairs` pairs (0: none) that may read the host
/// plan (`readsHost`). One launch replaces the driver's copies when it holds
/// them all and they are more than one: a launch costs about what one copy
/// does on the host.
UploadSchedule scheduleUpload(const PlanView &plan, uint64_t deviceWorkspace,
                              const FixedBuffers &fixed, int32_t kernelPairs,
                              bool readsHost);

class UploadFence;

/// A copy table (the copy_by_table kernel's argument): per row, the words
/// to copy, the source and the destination device address (int64 each).
/// Graph mode writes one in pinned host memory at plan() and captures the
/// kernel that reads it once in run(), so that plan() launches nothing.
constexpr int32_t kCopyTableRowWords = 3;

/// The rows copy_by_table kernel `k` reads (its table fills its dynamic
/// shared memory), or 0 when `k` is not one: role copy_indices, arguments
/// num_rows (i32) and table (ptr).
int32_t copyTableRows(const KernelManifest &k);

/// Writes `plan`'s upload to `deviceWorkspace` and `fixed`'s copies, as
/// one copy kernel reading the host plan would make them, into the
/// `rows`-row table at `table` (its other rows copy nothing): the table
/// the copy_by_table kernel of capacity `capacityWords` reads when it runs.
/// Checks the device workspace (checkDeviceWorkspace); InvalidArgument when
/// the copies need more rows or words than that.
Status writeCopyTable(const PlanView &plan, uint64_t deviceWorkspace,
                      size_t deviceBytes, const FixedBuffers &fixed,
                      int32_t rows, int64_t capacityWords, int64_t *table);

/// Launches copy_by_table kernel `kernel` of `m` over the table at `table`
/// (device-mapped host memory) with `capacityWords` as its row count (the
/// grid's size, fixed in a captured graph), then records `fence`
/// (nullable). `staging` (0: none) is a device buffer of the table's size
/// (24 bytes a row): the table is copied into it first and the kernel reads
/// it there, so that its CTAs do not each read the table across the bus.
/// While `stream` captures a graph, the copy goes to the head of the graph
/// instead: every node captured so far without a dependency, and the
/// stream's next work, wait for it (the staging copy, a memcpy node, before
/// it), so that at each replay the whole graph reads what the copy writes,
/// as it would have read a copy queued before the replay; the fence is the
/// graph's event node after it.
Status copyByTable(const Module &m, std::string_view kernel, uint64_t table,
                   uint64_t staging, int64_t capacityWords, UploadFence *fence,
                   uint64_t stream);

/// The id of the graph capture `stream` is in (cuStreamGetCaptureInfo), 0
/// when it is not capturing: tells one capture from the next. An
/// invalidated capture is refused (InvalidArgument).
Status streamCaptureId(uint64_t stream, uint64_t *id);

/// uploadPlan (size-checked) and graph mode's copies into `fixed`, queued
/// on `stream` as scheduleUpload says with `kernel`; `fence` (nullable) is
/// recorded right after the last copy that reads the host plan, so that a
/// launch reading only the plan's device copy does not hold up the next
/// plan's wait on it.
Status uploadPlan(const PlanView &plan, uint64_t deviceWorkspace,
                  size_t deviceBytes, const FixedBuffers &fixed,
                  const CopyKernel &kernel, UploadFence *fence, uint64_t stream);

/// Whether the device reads host memory [host, host + bytes) at the same
/// addresses (pinned memory of cuMemHostAlloc or cudaHostAlloc, PyTorch's
/// pin_memory, under unified addressing): a copy kernel may then read a plan
/// there. False, not an error, for pageable memory.
Status hostIsDeviceMapped(const void *host, size_t bytes, bool *mapped);

/// The pairs a copy_indices kernel copies (its n0, n1, .. arguments).
int32_t copyKernelPairs(const KernelManifest &k);

/// Orders the reuse of pinned host buffers that async copies read (a plan's
/// host workspace and staging): record() marks the work `stream` has queued
/// so far, wait() returns once that work has run (at once before the first
/// record). The CUDA event is made at the first record, in the stream's
/// context, so a fence needs no device until it is used.
class UploadFence {
public:
  UploadFence() = default;
  ~UploadFence();
  UploadFence(const UploadFence &) = delete;
  UploadFence &operator=(const UploadFence &) = delete;

  Status record(uint64_t stream);
  Status wait();
  /// Adds to `graph` (a CUgraph; `stream` is capturing it) an event node
  /// after `node` (a CUgraphNode) that records the fence at every replay.
  Status recordAfter(uint64_t stream, void *graph, void *node);

private:
  /// The event, made at the first use in `stream`'s context.
  Status event(uint64_t stream, void **ev);

  void *event_ = nullptr; ///< CUevent
  bool recorded_ = false;
};

/// Whether `stream` is capturing a CUDA graph (work queued on it now is
/// recorded into the graph, not run; an invalidated capture counts). The
/// legacy default stream (0) never captures: answered without a driver call.
Status streamIsCapturing(uint64_t stream, bool *capturing);

/// Checks a device workspace of `deviceBytes` at `deviceWorkspace` can hold
/// `plan` and the partial buffers the kernels write (plan.deviceBytes()):
/// InvalidArgument for a null plan or workspace, WorkspaceTooSmall naming
/// both sizes. uploadPlan, run and runMerge with a size call it first.
Status checkDeviceWorkspace(const PlanView &plan, uint64_t deviceWorkspace,
                            size_t deviceBytes);

/// Launches the attention kernel over the plan's persistent grid and then, if
/// `mergeKernel` is given and the plan needs it (always in graph mode), the merge
/// kernel. Plan arguments are bound from `deviceWorkspace`; every other manifest
/// argument from `args` by name. No allocation, no host synchronization.
/// `deviceBytes` is the device workspace's size (checkDeviceWorkspace).
Status run(const Module &module, std::string_view attentionKernel,
           std::string_view mergeKernel, const PlanView &plan,
           uint64_t deviceWorkspace, size_t deviceBytes, const KernelArg *args,
           int32_t numArgs, uint64_t stream);
/// The same without the device workspace's size (not checked).
Status run(const Module &module, std::string_view attentionKernel,
           std::string_view mergeKernel, const PlanView &plan,
           uint64_t deviceWorkspace, const KernelArg *args, int32_t numArgs,
           uint64_t stream);

/// Launches only the merge kernel (grid: max CTAs in graph mode, else
/// min(merge units, max CTAs)); nothing is launched for an empty merge map
/// outside graph mode.
Status runMerge(const Module &module, std::string_view mergeKernel,
                const PlanView &plan, uint64_t deviceWorkspace,
                size_t deviceBytes, const KernelArg *args, int32_t numArgs,
                uint64_t stream);
/// The same without the device workspace's size (not checked).
Status runMerge(const Module &module, std::string_view mergeKernel,
                const PlanView &plan, uint64_t deviceWorkspace,
                const KernelArg *args, int32_t numArgs, uint64_t stream);

/// The grid launchRows launches for `numRows` rows of row kernel `k` on a
/// device of `numSms` SMs: min(ceil(numRows / rows_per_cta), numSms *
/// ctas_per_sm) (the kernel is grid-strided, so a grid capped at what stays
/// resident still covers every row); 0 for no rows; uncapped when numSms <= 0.
int64_t rowGrid(const KernelManifest &k, int64_t numRows, int32_t numSms);

/// What launchRows checks before it touches the driver: `k` is a row kernel
/// (else InvalidArgument naming it and its role), numRows in [0, 2^31-1]
/// (InvalidArgument), no caller argument named num_rows (the runtime binds
/// it; InvalidArgument), and the caller's arguments bind the kernel's others
/// exactly: each one present with its kind, none that the kernel lacks,
/// none twice (ManifestMismatch naming the argument).
Status checkRowLaunch(const KernelManifest &k, int64_t numRows,
                      const KernelArg *args, int32_t numArgs);

/// Launches row kernel `kernel` (role merge_states, append_kv or
/// copy_indices) over
/// `numRows` rows: num_rows is bound by the runtime, every other argument
/// from `args` by name (checkRowLaunch); grid rowGrid(numSms()), block
/// `threads`, `shared_bytes` dynamic shared memory. No plan; nothing is
/// launched for zero rows (still Ok). No allocation, no host synchronization.
Status launchRows(const Module &module, std::string_view kernel, int64_t numRows,
                  const KernelArg *args, int32_t numArgs, uint64_t stream);

} // namespace attnrt

#endif // ATTN_RUNTIME_LAUNCHER_H
