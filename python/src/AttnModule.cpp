//===- AttnModule.cpp - pybind11 module over the attn C APIs --------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// `attn._attn`: a thin binding over attn-c/Runtime.h (plan, workspace sizing,
// module loading, plan upload, run, merge, row kernels) and, when built with
// the compiler, attn-c/Compiler.h (verify a variant, compile attn IR). It
// knows nothing of PyTorch: device memory and streams are plain integers
// (data_ptr(), cuda_stream), host arrays are Python buffers of int32
// (array('i'), NumPy). The Python package (python/attn) does the tensor
// checks and the FlashInfer-style API on top.
//
// Runtime errors raise `attn._attn.Error` (a RuntimeError) whose `status`
// attribute is the status name ("NonMonotoneIndptr", ...) and whose message
// is the runtime's, naming the bad input.
//
// Where the caller gives the device workspace's size (`device_bytes`, the
// tensor's nbytes; the Planner always has it), upload/run/merge call the
// runtime's *Sized entry points: a workspace smaller than the plan and its
// partial buffers reach is WorkspaceTooSmall, naming both sizes, before any
// copy or launch, instead of a write past its end.
//
//===----------------------------------------------------------------------===//

#include "attn-c/Runtime.h"
#include "attn/Runtime/Plan.h" // requestKVLength: the one definition of a request's keys
#ifdef ATTN_PY_HAVE_COMPILER
#include "attn-c/Compiler.h"
#endif

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

/// A runtime failure, turned into attn._attn.Error(status, message).
struct StatusError {
  attnRtStatus status;
  std::string message;
};

PyObject *errorType = nullptr;

void check(attnRtStatus status) {
  if (status != ATTN_RT_OK)
    throw StatusError{status, attnRtLastError()};
}

/// A 1-D int32 host array from any buffer (array('i'), NumPy int32); None
/// gives nullptr. `n` receives the element count.
struct I32Array {
  py::buffer_info info;
  const int32_t *data = nullptr;
  py::ssize_t size = 0;
};

std::optional<I32Array> toI32(const py::object &obj, const char *name) {
  if (obj.is_none())
    return std::nullopt;
  if (!py::isinstance<py::buffer>(obj))
    throw py::type_error(std::string(name) +
                         ": expected an int32 buffer (array('i'), NumPy), got " +
                         std::string(py::str(obj.get_type())));
  I32Array a;
  a.info = py::reinterpret_borrow<py::buffer>(obj).request();
  std::string fmt = a.info.format;
  if (a.info.itemsize != 4 || (fmt != "i" && fmt != "<i" && fmt != "=i" &&
                               fmt != "l" && fmt != "<l" && fmt != "=l"))
    throw py::type_error(std::string(name) + ": expected int32 elements, got format '" +
                         fmt + "' of " + std::to_string(a.info.itemsize) + " bytes");
  if (a.info.ndim != 1 || (a.info.size > 1 && a.info.strides[0] != 4))
    throw py::value_error(std::string(name) + ": expected a contiguous 1-D array");
  a.data = static_cast<const int32_t *>(a.info.ptr);
  a.size = a.info.size;
  return a;
}

template <typename T> T get(const py::dict &d, const char *key, T fallback) {
  return d.contains(key) ? d[key].cast<T>() : fallback;
}

/// attnRtPlanConfig from a dict with the same field names; unknown keys are
/// an error (a typo would otherwise silently use a default).
attnRtPlanConfig toConfig(const py::dict &d) {
  static const char *known[] = {
      "num_qo_heads", "num_kv_heads", "head_dim", "indexing", "block_size",
      "causal", "window_left", "has_custom_mask", "num_sms", "ctas_per_sm",
      "graph_mode", "graph_candidate", "max_batch", "max_total_q_rows",
      "min_chunk_tokens", "disable_split", "candidates", "fixed_split_tokens",
      "max_kv_tokens", "max_partial_rows"};
  for (auto item : d) {
    std::string k = py::str(item.first);
    bool ok = false;
    for (const char *n : known)
      ok |= k == n;
    if (!ok)
      throw py::key_error("unknown plan config field '" + k + "'");
  }
  attnRtPlanConfig c;
  std::memset(&c, 0, sizeof(c));
  c.num_qo_heads = get<int32_t>(d, "num_qo_heads", 0);
  c.num_kv_heads = get<int32_t>(d, "num_kv_heads", 0);
  c.head_dim = get<int32_t>(d, "head_dim", 0);
  c.indexing = get<int32_t>(d, "indexing", ATTN_RT_KV_PAGED);
  c.block_size = get<int32_t>(d, "block_size", 16);
  c.causal = get<int32_t>(d, "causal", 0);
  c.window_left = get<int32_t>(d, "window_left", -1);
  c.has_custom_mask = get<int32_t>(d, "has_custom_mask", 0);
  c.num_sms = get<int32_t>(d, "num_sms", 0);
  c.ctas_per_sm = get<int32_t>(d, "ctas_per_sm", 1);
  c.graph_mode = get<int32_t>(d, "graph_mode", 0);
  c.graph_candidate = get<int32_t>(d, "graph_candidate", 0);
  c.max_batch = get<int32_t>(d, "max_batch", 0);
  c.max_total_q_rows = get<int32_t>(d, "max_total_q_rows", 0);
  c.min_chunk_tokens = get<int32_t>(d, "min_chunk_tokens", 0);
  c.disable_split = get<int32_t>(d, "disable_split", 0);
  c.fixed_split_tokens = get<int32_t>(d, "fixed_split_tokens", 0);
  c.max_kv_tokens = get<int64_t>(d, "max_kv_tokens", 0);
  c.max_partial_rows = get<int64_t>(d, "max_partial_rows", 0);
  if (d.contains("candidates")) {
    py::list cands = d["candidates"].cast<py::list>();
    if (cands.size() > ATTN_RT_MAX_TILE_CANDIDATES)
      throw py::value_error("at most " +
                            std::to_string(int(ATTN_RT_MAX_TILE_CANDIDATES)) +
                            " tile candidates");
    c.num_candidates = int32_t(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      py::dict t = cands[i].cast<py::dict>();
      c.candidates[i] = {get<int32_t>(t, "q_rows", 0), get<int32_t>(t, "kv_tile", 0),
                         get<int32_t>(t, "gqa_pack", 1),
                         get<int32_t>(t, "cost_per_item", 0),
                         get<int32_t>(t, "cost_per_kv_token", 1),
                         get<int32_t>(t, "ctas_per_sm", 0),
                         get<int32_t>(t, "min_chunk_tokens", 0)};
    }
  }
  return c;
}

py::dict candidateDict(const attnRtTileCandidate &t) {
  py::dict d;
  d["q_rows"] = t.q_rows;
  d["kv_tile"] = t.kv_tile;
  d["gqa_pack"] = t.gqa_pack;
  d["cost_per_item"] = t.cost_per_item;
  d["cost_per_kv_token"] = t.cost_per_kv_token;
  d["ctas_per_sm"] = t.ctas_per_sm;
  d["min_chunk_tokens"] = t.min_chunk_tokens;
  return d;
}

/// A made plan's counts (attnRtPlanSummary) and the host workspace bytes its
/// config's maxima need. Returned every plan() step, so one object with
/// fields rather than a dict built key by key (a third of the binding's cost
/// per step); it reads as a mapping too, for the tests and tools that compare
/// or print summaries.
struct PlanSummary {
  attnRtPlanSummary s;
  size_t hostBytes = 0;
};

/// PlanSummary's fields, in the order keys() lists them.
struct SummaryField {
  const char *name;
  int64_t (*get)(const PlanSummary &);
};
constexpr SummaryField kSummaryFields[] = {
    {"num_ctas", [](const PlanSummary &p) -> int64_t { return p.s.num_ctas; }},
    {"num_items", [](const PlanSummary &p) -> int64_t { return p.s.num_items; }},
    {"num_merge_units", [](const PlanSummary &p) -> int64_t { return p.s.num_merge_units; }},
    {"num_slots", [](const PlanSummary &p) -> int64_t { return p.s.num_slots; }},
    {"candidate", [](const PlanSummary &p) -> int64_t { return p.s.candidate; }},
    {"tile_q", [](const PlanSummary &p) -> int64_t { return p.s.tile_q; }},
    {"gqa_pack", [](const PlanSummary &p) -> int64_t { return p.s.gqa_pack; }},
    {"plan_bytes", [](const PlanSummary &p) -> int64_t { return int64_t(p.s.plan_bytes); }},
    {"host_bytes", [](const PlanSummary &p) -> int64_t { return int64_t(p.hostBytes); }},
};

/// The field named `name`, or null.
const SummaryField *findSummaryField(const std::string &name) {
  for (const SummaryField &f : kSummaryFields)
    if (name == f.name)
      return &f;
  return nullptr;
}

int64_t summaryField(const PlanSummary &p, const std::string &name) {
  if (const SummaryField *f = findSummaryField(name))
    return f->get(p);
  throw py::key_error(name);
}

/// The field names, in order: keys() and iteration.
py::list summaryKeys() {
  py::list names;
  for (const SummaryField &f : kSummaryFields)
    names.append(f.name);
  return names;
}

/// attnRtFence_t: orders the reuse of a wrapper's pinned plan buffers
/// (Planner.plan waits on it before writing them and records it after
/// queuing their copies; the full plan path calls wait/record itself).
class PyFence {
public:
  PyFence() { check(attnRtFenceCreate(&f_)); }
  ~PyFence() { attnRtFenceDestroy(f_); }
  PyFence(const PyFence &) = delete;
  PyFence &operator=(const PyFence &) = delete;
  void record(uint64_t stream) { check(attnRtFenceRecord(f_, stream)); }
  void wait() {
    py::gil_scoped_release release;
    check(attnRtFenceWait(f_));
  }
  attnRtFence_t get() const { return f_; }

private:
  attnRtFence_t f_ = nullptr;
};

/// Refuses uploads queued while `stream` captures a CUDA graph: the graph
/// would replay the copies of this step's plan in every later step. The
/// memoized decode plan's one check (the full plan path asks PyTorch first).
void checkNotCapturing(uint64_t stream) {
  int32_t capturing = 0;
  attnRtStatus status = attnRtStreamIsCapturing(stream, &capturing);
  if (status == ATTN_RT_CUDA_UNAVAILABLE)
    return; // no driver, no capture (the copies that follow say so)
  check(status);
  if (capturing)
    throw std::runtime_error(
        "attn: plan() must be called outside CUDA-graph capture (plan on the "
        "host, then replay the captured run())");
}

/// Graph mode's fixed buffers: the plan's copies of qo_indptr, kv_indptr and
/// kv_last_len (in the pinned host workspace `hostWs`, whose plan was just
/// made) to the device addresses `dst` (0 skips one), one async copy each on
/// `stream`. The kernels read the plan's own copies; FlashInfer's plan()
/// writes these buffers, and engines read them back (an append captured in
/// the same graph reads the page table there).
void copyPlanArrays(uint64_t hostWs, const uint64_t dst[3], uint64_t stream) {
  const int32_t *w = reinterpret_cast<const int32_t *>(hostWs);
  const size_t n = size_t(w[attnrt::kHdrBatch]);
  const struct {
    attnrt::PlanHeaderField offset;
    size_t words;
  } arrays[3] = {{attnrt::kHdrOffQoIndptr, n + 1},
                 {attnrt::kHdrOffKvIndptr, n + 1},
                 {attnrt::kHdrOffKvLastLen, n}};
  for (int i = 0; i < 3; ++i)
    if (dst[i] && arrays[i].words)
      check(attnRtCopyToDevice(w + w[arrays[i].offset], 4 * arrays[i].words,
                               dst[i], stream));
}

/// A PlanConfig converted once (the dict's conversion costs more than the
/// planner at decode sizes), for plan() of every step: `plan` takes the
/// host arrays as addresses (CPU tensors' data_ptr()) and the maxima of the
/// step, plans, and queues the plan's upload (size-checked against the
/// device workspace; it carries the index arrays the kernels read), all in
/// one call with no Python object built per element.
class PyPlanner {
public:
  explicit PyPlanner(const py::dict &config) : c_(toConfig(config)) {}

  /// (host_bytes, device_bytes) under these maxima.
  py::tuple sizes(int32_t maxBatch, int32_t maxTotalQRows, int64_t maxKvTokens) {
    setMaxima(maxBatch, maxTotalQRows, maxKvTokens);
    const auto [host, device] = workspaceSizes();
    return py::make_tuple(host, device);
  }

  /// What every step of a wrapper passes alike, kept for step(): the pinned
  /// host workspace and the device workspace (0: plan only, for tests and
  /// CPU measurements), the upload fence (None: none), graph mode's fixed
  /// buffers for qo_indptr, kv_indptr and kv_last_len (0 skips one) and for
  /// the page table, and the fewest keys a request must hold. Bound once
  /// (again when the host workspace grows), step() converts half the
  /// arguments plan() did: pybind11 costs ~80 ns an argument on the 2-core
  /// machine, twice that on an H200's host.
  void bind(uint64_t hostWs, size_t hostWsBytes, uint64_t deviceWs,
            size_t deviceWsBytes, py::object fence, uint64_t qoDst,
            uint64_t kvDst, uint64_t lastDst, uint64_t kvIndicesDst,
            int32_t minKvLen) {
    const bool paged = c_.indexing == ATTN_RT_KV_PAGED;
    if (!paged && lastDst)
      throw py::value_error("kv_last_len is for paged KV; this config is ragged");
    b_.hostWs = hostWs, b_.hostWsBytes = hostWsBytes;
    b_.deviceWs = deviceWs, b_.deviceWsBytes = deviceWsBytes;
    b_.fence = fence.is_none() ? nullptr : fence.cast<PyFence *>();
    b_.fenceObject = std::move(fence);
    b_.qoDst = qoDst, b_.kvDst = kvDst, b_.lastDst = lastDst;
    b_.kvIndicesDst = kvIndicesDst;
    b_.minKvLen = minKvLen;
    bound_ = true;
  }

  /// Plans `batch` requests from host int32 arrays at `qo`, `kv` (batch + 1
  /// entries) and `last` (batch; 0 for ragged KV) under the given maxima
  /// into the bound host workspace and copies the plan to the bound device
  /// workspace on `stream`; in graph mode also the plan's copies of the
  /// three arrays to the bound fixed buffers and `kv_indices_bytes` of the
  /// device array `kv_indices` to the bound page table (skipped when 0 or
  /// the same), as attnRtPlanAndUploadWith schedules them with the copy
  /// kernel given to setCopyKernel (one launch that also reads the plan from
  /// the pinned host workspace, where the device maps it), or with the
  /// driver's copies. Returns the summary with "host_bytes", or None, having
  /// done nothing, when a workspace is smaller than the config needs or a
  /// request holds fewer than the bound minimum of keys (the caller's full
  /// path then says which). With a device workspace, a stream capturing a
  /// CUDA graph is refused first; the fence is waited on before the pinned
  /// host workspace is written and recorded after the last copy that reads
  /// it.
  py::object step(uint64_t stream, int32_t batch, int32_t maxBatch,
                  int32_t maxTotalQRows, int64_t maxKvTokens, uint64_t qo,
                  uint64_t kv, uint64_t last, uint64_t kvIndices,
                  size_t kvIndicesBytes) {
    if (!bound_)
      throw py::value_error("Planner.step: bind() the workspaces first");
    const Binding &b = b_;
    if (b.deviceWs)
      checkNotCapturing(stream);
    if (batch < 0)
      throw py::value_error("batch must be non-negative");
    const bool paged = c_.indexing == ATTN_RT_KV_PAGED;
    if (!qo || !kv || (paged && !last))
      throw py::value_error(paged ? "qo_indptr, kv_indptr and kv_last_len are required"
                                  : "qo_indptr and kv_indptr are required");
    if (!paged && last)
      throw py::value_error("kv_last_len is for paged KV; this config is ragged");
    setMaxima(maxBatch, maxTotalQRows, maxKvTokens);
    const auto [host, device] = workspaceSizes();
    if (b.hostWsBytes < host || b.deviceWsBytes < device)
      return py::none();
    attnRtPlanInputs in;
    std::memset(&in, 0, sizeof(in));
    in.batch = batch;
    in.qo_indptr = reinterpret_cast<const int32_t *>(qo);
    in.kv_indptr = reinterpret_cast<const int32_t *>(kv);
    in.kv_last_len = reinterpret_cast<const int32_t *>(last);
    if (b.minKvLen > 1) {
      for (int32_t r = 0; r < batch; ++r)
        if (attnrt::requestKVLength(attnrt::KVIndexing(c_.indexing), c_.block_size,
                                    in.kv_indptr, in.kv_last_len, r) < b.minKvLen)
          return py::none();
    }
    attnRtPlanSummary s;
    void *ws = reinterpret_cast<void *>(b.hostWs);
    attnRtUploadOptions o;
    std::memset(&o, 0, sizeof(o));
    o.qo_indptr_dst = b.qoDst;
    o.kv_indptr_dst = b.kvDst;
    o.kv_last_len_dst = b.lastDst;
    o.kv_indices = kvIndices;
    o.kv_indices_dst = b.kvIndicesDst;
    o.kv_indices_bytes = kvIndicesBytes;
    if (b.deviceWs && tableModule_) {
      // Deferred to the copy_by_table kernel graph mode's run() captures.
      if (!readsHost(b.hostWs, b.hostWsBytes))
        throw py::value_error("Planner.step: a copy table needs a host "
                              "workspace the device maps (pinned memory)");
      o.copy_module = tableModule_;
      o.copy_kernel = tableKernel_.c_str();
      o.copy_table = table_;
      o.copy_table_words = tableWords_;
    } else if (b.deviceWs && copyModule_) {
      o.copy_module = copyModule_;
      o.copy_kernel = copyKernel_.c_str();
      o.reads_host = readsHost(b.hostWs, b.hostWsBytes);
    }
    o.fence = b.fence ? b.fence->get() : nullptr;
    {
      py::gil_scoped_release release;
      // The last step's copies may still read the pinned host workspace.
      if (b.fence)
        check(attnRtFenceWait(b.fence->get()));
      if (b.deviceWs) // sized: the runtime checks the plan against deviceWsBytes
        check(attnRtPlanAndUploadWith(&c_, &in, ws, b.hostWsBytes, b.deviceWs,
                                      b.deviceWsBytes, &o, stream, &s));
      else // plan only (CPU tests and measurements)
        check(attnRtPlan(&c_, &in, ws, b.hostWsBytes, &s));
    }
    return py::cast(PlanSummary{s, host});
  }

  /// step() with these in place of the bound ones (which stay bound).
  py::object plan(uint64_t hostWs, size_t hostWsBytes, uint64_t deviceWs,
                  size_t deviceWsBytes, uint64_t stream, int32_t batch,
                  int32_t maxBatch, int32_t maxTotalQRows, int64_t maxKvTokens,
                  uint64_t qo, uint64_t kv, uint64_t last, int32_t minKvLen,
                  py::object fence, uint64_t qoDst, uint64_t kvDst,
                  uint64_t lastDst, uint64_t kvIndices, uint64_t kvIndicesDst,
                  size_t kvIndicesBytes) {
    struct Restore {
      PyPlanner &p;
      Binding saved;
      bool bound;
      ~Restore() { p.b_ = std::move(saved), p.bound_ = bound; }
    } restore{*this, b_, bound_};
    bind(hostWs, hostWsBytes, deviceWs, deviceWsBytes, std::move(fence), qoDst,
         kvDst, lastDst, kvIndicesDst, minKvLen);
    return step(stream, batch, maxBatch, maxTotalQRows, maxKvTokens, qo, kv,
                last, kvIndices, kvIndicesBytes);
  }

  /// The copy_indices kernel `kernel` of `module` (a Module, kept alive
  /// here; None: the driver's copies) that plan() uploads with
  /// (attnRtUploadOptions).
  void setCopyKernel(py::object module, attnRtModule_t handle,
                     std::string kernel) {
    copyModuleObject_ = std::move(module);
    copyModule_ = handle;
    copyKernel_ = std::move(kernel);
  }

  /// Graph mode's deferred copies: every step() writes its copies into the
  /// table at `table` (pinned host memory, copy_by_table's rows) for
  /// copy_by_table kernel `kernel` of `module` (None: copies queued by
  /// step() again), checked against `capacityWords`, and launches nothing;
  /// the wrapper's run() launches (or its capture holds) that kernel.
  void setCopyTable(py::object module, attnRtModule_t handle,
                    std::string kernel, uint64_t table, int64_t capacityWords) {
    tableModuleObject_ = std::move(module);
    tableModule_ = handle;
    tableKernel_ = std::move(kernel);
    table_ = table;
    tableWords_ = capacityWords;
  }

private:
  /// attnRtPlanWorkspaceSize under the config's maxima, asked again only when
  /// they change (in graph mode they never do).
  std::pair<size_t, size_t> workspaceSizes() {
    const int64_t maxima[3] = {c_.max_batch, c_.max_total_q_rows, c_.max_kv_tokens};
    if (!sized_ || !std::equal(maxima, maxima + 3, sizedFor_)) {
      check(attnRtPlanWorkspaceSize(&c_, &sizes_.first, &sizes_.second));
      std::copy(maxima, maxima + 3, sizedFor_);
      sized_ = true;
    }
    return sizes_;
  }
  /// Whether the copy kernel may read the host workspace at `hostWs` (asked
  /// of the driver once per workspace: the wrapper's pinned buffer moves only
  /// when it grows).
  /// ATTN_UPLOAD_FROM_HOST=0 keeps the plan's upload with the driver.
  int32_t readsHost(uint64_t hostWs, size_t bytes) {
    if (hostWs != mappedWs_ || bytes != mappedBytes_) {
      int32_t mapped = 0;
      const char *env = std::getenv("ATTN_UPLOAD_FROM_HOST");
      if ((env && std::string(env) == "0") ||
          attnRtHostIsDeviceMapped(reinterpret_cast<const void *>(hostWs), bytes,
                                   &mapped) != ATTN_RT_OK)
        mapped = 0;
      mappedWs_ = hostWs, mappedBytes_ = bytes, mapped_ = mapped;
    }
    return mapped_;
  }
  void setMaxima(int32_t maxBatch, int32_t maxTotalQRows, int64_t maxKvTokens) {
    c_.max_batch = maxBatch;
    c_.max_total_q_rows = maxTotalQRows;
    c_.max_kv_tokens = c_.fixed_split_tokens > 0 ? maxKvTokens : 0;
  }
  /// What bind() keeps.
  struct Binding {
    uint64_t hostWs = 0, deviceWs = 0;
    size_t hostWsBytes = 0, deviceWsBytes = 0;
    PyFence *fence = nullptr;
    py::object fenceObject; // keeps `fence` alive
    uint64_t qoDst = 0, kvDst = 0, lastDst = 0, kvIndicesDst = 0;
    int32_t minKvLen = 1;
  };
  attnRtPlanConfig c_;
  Binding b_;
  bool bound_ = false;
  py::object copyModuleObject_;
  attnRtModule_t copyModule_ = nullptr;
  std::string copyKernel_;
  py::object tableModuleObject_;
  attnRtModule_t tableModule_ = nullptr;
  std::string tableKernel_;
  uint64_t table_ = 0;
  int64_t tableWords_ = 0;
  bool sized_ = false;
  int64_t sizedFor_[3] = {};
  std::pair<size_t, size_t> sizes_;
  uint64_t mappedWs_ = 0;
  size_t mappedBytes_ = 0;
  int32_t mapped_ = 0;
};

/// A host workspace: an int address (pinned memory from PyTorch) or a
/// writable buffer (bytearray, NumPy).
struct HostWorkspace {
  void *ptr = nullptr;
  size_t bytes = 0;
  std::optional<py::buffer_info> info;
};

HostWorkspace toWorkspace(const py::object &ws, size_t bytes) {
  HostWorkspace w;
  if (py::isinstance<py::int_>(ws)) {
    w.ptr = reinterpret_cast<void *>(ws.cast<uintptr_t>());
    w.bytes = bytes;
    return w;
  }
  if (!py::isinstance<py::buffer>(ws))
    throw py::type_error("workspace: expected an address (int) or a writable buffer");
  w.info = py::reinterpret_borrow<py::buffer>(ws).request(/*writable=*/true);
  w.ptr = w.info->ptr;
  w.bytes = size_t(w.info->size) * size_t(w.info->itemsize);
  if (bytes && bytes < w.bytes)
    w.bytes = bytes;
  return w;
}

/// A loaded module; destroyed with the Python object.
class PyModule {
public:
  PyModule(py::bytes image, std::string manifest) : manifest_(std::move(manifest)) {
    std::string img = image;
    check(attnRtModuleLoad(img.data(), img.size(), manifest_.c_str(), &module_));
  }
  ~PyModule() { attnRtModuleDestroy(module_); }
  py::list candidates() const {
    attnRtTileCandidate c[ATTN_RT_MAX_TILE_CANDIDATES];
    int32_t n = 0;
    check(attnRtModuleCandidates(module_, c, ATTN_RT_MAX_TILE_CANDIDATES, &n));
    py::list out;
    for (int32_t i = 0; i < n; ++i)
      out.append(candidateDict(c[i]));
    return out;
  }
  attnRtModule_t get() const { return module_; }
  const std::string &manifest() const { return manifest_; }

private:
  attnRtModule_t module_ = nullptr;
  std::string manifest_;
};

/// Kernel arguments from [(name, kind, value)], kind "ptr" | "i32" | "i64" |
/// "f32". Names are kept alive in `names`.
std::vector<attnRtArg> toArgs(const py::list &args, std::vector<std::string> &names) {
  names.reserve(args.size());
  std::vector<attnRtArg> out;
  for (py::handle h : args) {
    py::tuple t = h.cast<py::tuple>();
    if (t.size() != 3)
      throw py::value_error("kernel arguments are (name, kind, value) tuples");
    names.push_back(t[0].cast<std::string>());
    std::string kind = t[1].cast<std::string>();
    attnRtArg a;
    std::memset(&a, 0, sizeof(a));
    if (kind == "ptr") {
      a.kind = ATTN_RT_ARG_PTR;
      a.value.ptr = t[2].cast<uint64_t>();
    } else if (kind == "i32") {
      a.kind = ATTN_RT_ARG_I32;
      a.value.i32 = t[2].cast<int32_t>();
    } else if (kind == "i64") {
      a.kind = ATTN_RT_ARG_I64;
      a.value.i64 = t[2].cast<int64_t>();
    } else if (kind == "f32") {
      a.kind = ATTN_RT_ARG_F32;
      a.value.f32 = t[2].cast<float>();
    } else {
      throw py::value_error("argument '" + names.back() + "': unknown kind '" + kind +
                            "' (ptr, i32, i64, f32)");
    }
    out.push_back(a);
  }
  for (size_t i = 0; i < out.size(); ++i)
    out[i].name = names[i].c_str();
  return out;
}

#ifdef ATTN_PY_HAVE_COMPILER
/// Everything a compiler call produced, copied out of the C result.
py::dict resultDict(attnCompilerStatus status, attnCompilerResult_t r) {
  py::dict d;
  d["ok"] = status == ATTN_COMPILER_OK;
  d["status"] = std::string(attnCompilerStatusName(status));
  d["diagnostics"] = std::string(attnCompilerResultDiagnostics(r));
  d["ir"] = std::string(attnCompilerResultIR(r));
  d["ptx"] = std::string(attnCompilerResultPtx(r));
  size_t n = 0;
  const void *cubin = attnCompilerResultCubin(r, &n);
  d["cubin"] = py::bytes(static_cast<const char *>(cubin), cubin ? n : 0);
  d["manifest"] = std::string(attnCompilerResultManifest(r));
  d["generator"] = std::string(attnCompilerResultGenerator(r));
  py::list stages;
  for (int32_t i = 0; i < attnCompilerResultNumStages(r); ++i)
    stages.append(py::make_tuple(std::string(attnCompilerResultStageName(r, i)),
                                 attnCompilerResultStageMilliseconds(r, i)));
  d["stages"] = stages;
  attnCompilerResultDestroy(r);
  return d;
}
#endif

} // namespace

PYBIND11_MODULE(_attn, m) {
  m.doc() = "Binding over the attn runtime and compiler C APIs (see attn-c/*.h).";

  static py::exception<StatusError> error(m, "Error", PyExc_RuntimeError);
  errorType = error.ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const StatusError &e) {
      std::string name = attnRtStatusName(e.status);
      py::object exc = py::reinterpret_borrow<py::object>(errorType)(
          "[" + name + "] " + e.message);
      exc.attr("status") = name;
      PyErr_SetObject(errorType, exc.ptr());
    }
  });

  m.def("status_name", [](int code) {
    return std::string(attnRtStatusName(static_cast<attnRtStatus>(code)));
  });

  //===--------------------------------------------------------------------===//
  // Planning
  //===--------------------------------------------------------------------===//

  m.def(
      "plan_workspace_size",
      [](const py::dict &config) {
        attnRtPlanConfig c = toConfig(config);
        size_t host = 0, device = 0;
        check(attnRtPlanWorkspaceSize(&c, &host, &device));
        return py::make_tuple(host, device);
      },
      py::arg("config"),
      "(host_bytes, device_bytes) of the workspaces a PlanConfig needs.");

  m.def(
      "plan",
      [](const py::dict &config, const py::object &workspace,
         const py::object &qo_indptr, const py::object &kv_indptr,
         const py::object &kv_last_len, const py::object &kv_lens,
         const py::object &kv_indices, int32_t num_cache_blocks,
         size_t workspace_bytes, uint64_t device_workspace,
         size_t device_bytes, uint64_t stream) {
        attnRtPlanConfig c = toConfig(config);
        auto qo = toI32(qo_indptr, "qo_indptr");
        auto kv = toI32(kv_indptr, "kv_indptr");
        auto last = toI32(kv_last_len, "kv_last_len");
        auto lens = toI32(kv_lens, "kv_lens");
        auto idx = toI32(kv_indices, "kv_indices");
        if (!qo || !kv)
          throw py::value_error("qo_indptr and kv_indptr are required");
        if (qo->size != kv->size)
          throw py::value_error("qo_indptr has " + std::to_string(qo->size) +
                                " entries but kv_indptr has " +
                                std::to_string(kv->size) + " (both batch + 1)");
        if (qo->size < 1)
          throw py::value_error("qo_indptr must have batch + 1 >= 1 entries");
        int32_t batch = int32_t(qo->size - 1);
        if (last && last->size != batch)
          throw py::value_error("kv_last_len has " + std::to_string(last->size) +
                                " entries, expected batch = " + std::to_string(batch));
        if (lens && lens->size != batch)
          throw py::value_error("kv_lens has " + std::to_string(lens->size) +
                                " entries, expected batch = " + std::to_string(batch));
        if (idx && batch > 0 && idx->size < kv->data[batch])
          throw py::value_error("kv_indices has " + std::to_string(idx->size) +
                                " entries, kv_indptr[-1] = " +
                                std::to_string(kv->data[batch]));
        attnRtPlanInputs in;
        in.batch = batch;
        in.qo_indptr = qo->data;
        in.kv_indptr = kv->data;
        in.kv_last_len = last ? last->data : nullptr;
        in.kv_lens = lens ? lens->data : nullptr;
        in.kv_indices = idx ? idx->data : nullptr;
        in.num_cache_blocks = num_cache_blocks;
        HostWorkspace w = toWorkspace(workspace, workspace_bytes);
        attnRtPlanSummary s;
        {
          py::gil_scoped_release release;
          // The planner's own plan needs no second validation before its
          // upload (attnRtPlanAndUpload); the device workspace is checked.
          check(device_workspace
                    ? attnRtPlanAndUpload(&c, &in, w.ptr, w.bytes, device_workspace,
                                          device_bytes, stream, &s)
                    : attnRtPlan(&c, &in, w.ptr, w.bytes, &s));
        }
        size_t host = 0, device = 0;
        check(attnRtPlanWorkspaceSize(&c, &host, &device));
        return PlanSummary{s, host};
      },
      py::arg("config"), py::arg("workspace"), py::arg("qo_indptr"),
      py::arg("kv_indptr"), py::arg("kv_last_len") = py::none(),
      py::arg("kv_lens") = py::none(), py::arg("kv_indices") = py::none(),
      py::arg("num_cache_blocks") = 0, py::arg("workspace_bytes") = 0,
      py::arg("device_workspace") = 0, py::arg("device_bytes") = 0,
      py::arg("stream") = 0,
      "Plans one batch step into `workspace` (an address or a writable "
      "buffer); returns the plan summary. With `device_workspace` (of "
      "`device_bytes`) it also queues the plan's copy there on `stream` (the "
      "caller makes sure the stream is not capturing). Raises Error naming "
      "the bad input.");

  py::class_<PlanSummary> summary(
      m, "PlanSummary",
      "A made plan's counts: num_ctas, num_items, num_merge_units, "
      "num_slots, candidate (the tile candidate), tile_q, gqa_pack, "
      "plan_bytes and host_bytes (the host workspace the config's maxima "
      "need). Fields, and a read-only mapping of the same names.");
  for (const SummaryField &f : kSummaryFields)
    summary.def_property_readonly(f.name, f.get);
  summary
      .def("__getitem__", &summaryField, py::arg("name"))
      .def("keys", [](const PlanSummary &) { return summaryKeys(); })
      .def("__iter__", [](const PlanSummary &) { return py::iter(summaryKeys()); })
      .def("__len__", [](const PlanSummary &) { return std::size(kSummaryFields); })
      .def("__contains__", [](const PlanSummary &, const std::string &name) {
        return findSummaryField(name) != nullptr;
      })
      .def("__eq__", [](const PlanSummary &a, const PlanSummary &b) {
        for (const SummaryField &f : kSummaryFields)
          if (f.get(a) != f.get(b))
            return false;
        return true;
      })
      .def("__repr__", [](const PlanSummary &p) {
        std::string r = "PlanSummary(";
        for (size_t i = 0; i < std::size(kSummaryFields); ++i)
          r += std::string(i ? ", " : "") + kSummaryFields[i].name + "=" +
               std::to_string(kSummaryFields[i].get(p));
        return r + ")";
      });

  py::class_<PyPlanner>(m, "Planner",
                        "A plan config converted once; bind() the "
                        "workspaces once, then step() plans and uploads "
                        "each step from host array addresses.")
      .def(py::init<const py::dict &>(), py::arg("config"))
      .def("sizes", &PyPlanner::sizes, py::arg("max_batch"),
           py::arg("max_total_q_rows"), py::arg("max_kv_tokens") = 0,
           "(host_bytes, device_bytes) under these maxima.")
      .def("bind", &PyPlanner::bind, py::arg("host_workspace"),
           py::arg("host_bytes"), py::arg("device_workspace"),
           py::arg("device_bytes"), py::arg("fence") = py::none(),
           py::arg("qo_indptr_dst") = 0, py::arg("kv_indptr_dst") = 0,
           py::arg("kv_last_len_dst") = 0, py::arg("kv_indices_dst") = 0,
           py::arg("min_kv_len") = 1,
           "Keeps what every step passes alike: the pinned host workspace, "
           "the device workspace (0: plan only), the UploadFence (waited on "
           "before the host workspace is written, recorded after the last "
           "copy that reads it), graph mode's fixed buffers (0 skips one) and "
           "the fewest keys a request must hold.")
      .def("step", &PyPlanner::step, py::arg("stream"), py::arg("batch"),
           py::arg("max_batch"), py::arg("max_total_q_rows"),
           py::arg("max_kv_tokens"), py::arg("qo_indptr"), py::arg("kv_indptr"),
           py::arg("kv_last_len"), py::arg("kv_indices") = 0,
           py::arg("kv_indices_bytes") = 0,
           "Plans and uploads one step into the bound workspaces; returns "
           "the plan summary (with host_bytes), or None when a workspace is "
           "too small or a request has fewer keys than bound (nothing done). "
           "Raises Error naming the bad input (nothing uploaded then), "
           "RuntimeError on a stream capturing a CUDA graph.")
      .def("plan", &PyPlanner::plan, py::arg("host_workspace"),
           py::arg("host_bytes"), py::arg("device_workspace"),
           py::arg("device_bytes"), py::arg("stream"), py::arg("batch"),
           py::arg("max_batch"), py::arg("max_total_q_rows"),
           py::arg("max_kv_tokens"), py::arg("qo_indptr"), py::arg("kv_indptr"),
           py::arg("kv_last_len"), py::arg("min_kv_len") = 1,
           py::arg("fence") = py::none(), py::arg("qo_indptr_dst") = 0,
           py::arg("kv_indptr_dst") = 0, py::arg("kv_last_len_dst") = 0,
           py::arg("kv_indices") = 0, py::arg("kv_indices_dst") = 0,
           py::arg("kv_indices_bytes") = 0,
           "step() with these in place of the bound ones, which stay bound.")
      .def(
          "set_copy_kernel",
          [](PyPlanner &p, py::object module, const std::string &kernel) {
            if (module.is_none())
              return p.setCopyKernel(py::none(), nullptr, "");
            attnRtModule_t handle = module.cast<const PyModule &>().get();
            p.setCopyKernel(std::move(module), handle, kernel);
          },
          py::arg("module"), py::arg("kernel") = "",
          "plan() copies the plan (from pinned host memory the device maps) "
          "and graph mode's fixed buffers with this copy_indices kernel of "
          "`module`, one launch where it holds them all; None: with the "
          "driver's copies.")
      .def(
          "set_copy_table",
          [](PyPlanner &p, py::object module, const std::string &kernel,
             uint64_t table, int64_t capacityWords) {
            if (module.is_none())
              return p.setCopyTable(py::none(), nullptr, "", 0, 0);
            if (!table || table % 8)
              throw py::value_error("set_copy_table: the table must be a "
                                    "non-null, 8-byte aligned address");
            attnRtModule_t handle = module.cast<const PyModule &>().get();
            p.setCopyTable(std::move(module), handle, kernel, table,
                           capacityWords);
          },
          py::arg("module"), py::arg("kernel") = "", py::arg("table") = 0,
          py::arg("capacity_words") = 0,
          "Graph mode: step() writes its copies into the copy table at "
          "`table` (pinned host memory) for this copy_by_table kernel of "
          "`module` instead of queuing them (capacity_words: the words the "
          "captured launch covers); copy_by_table() runs them. None: "
          "step() queues its copies again.");

  m.def(
      "copy_plan_arrays",
      [](uint64_t host_ws, uint64_t qo_dst, uint64_t kv_dst, uint64_t last_dst,
         uint64_t stream) {
        const uint64_t dst[3] = {qo_dst, kv_dst, last_dst};
        copyPlanArrays(host_ws, dst, stream);
      },
      py::arg("host_workspace"), py::arg("qo_indptr_dst"),
      py::arg("kv_indptr_dst"), py::arg("kv_last_len_dst"), py::arg("stream"),
      "Graph mode: the plan's copies of qo_indptr, kv_indptr and kv_last_len "
      "(in the pinned host workspace of the plan just made) to the fixed "
      "buffers at these device addresses (0 skips one), async on `stream`.");

  py::class_<PyFence>(m, "UploadFence",
                      "Orders the reuse of pinned host buffers that async "
                      "copies read: record(stream) after queuing them, "
                      "wait() before writing them again.")
      .def(py::init<>())
      .def("record", &PyFence::record, py::arg("stream"))
      .def("wait", &PyFence::wait);


  //===--------------------------------------------------------------------===//
  // Modules and launches
  //===--------------------------------------------------------------------===//

  py::class_<PyModule>(m, "Module",
                       "Compiled kernels (cubin/fatbin/PTX) loaded with their "
                       "manifest through the CUDA driver.")
      .def(py::init<py::bytes, std::string>(), py::arg("image"),
           py::arg("manifest"))
      .def("candidates", &PyModule::candidates,
           "Tile candidates of the module's attention kernels.")
      .def_property_readonly("manifest", &PyModule::manifest);

  m.def(
      "manifest_candidates",
      [](const std::string &manifest) {
        attnRtTileCandidate c[ATTN_RT_MAX_TILE_CANDIDATES];
        int32_t n = 0;
        check(attnRtManifestCandidates(manifest.c_str(), c,
                                       ATTN_RT_MAX_TILE_CANDIDATES, &n));
        py::list out;
        for (int32_t i = 0; i < std::min<int32_t>(n, ATTN_RT_MAX_TILE_CANDIDATES); ++i)
          out.append(candidateDict(c[i]));
        return out;
      },
      py::arg("manifest"),
      "Tile candidates of a manifest's attention kernels, in order (no image "
      "needed).");
  m.def(
      "select_tile_candidate",
      [](const py::list &candidates, int64_t total_q_rows, int64_t batch) {
        attnRtPlanConfig c = toConfig(py::dict(py::arg("candidates") = candidates));
        return attnRtSelectTileCandidate(c.candidates, c.num_candidates,
                                         total_q_rows, batch);
      },
      py::arg("candidates"), py::arg("total_q_rows"), py::arg("batch"),
      "The candidate plan() picks for a batch: the smallest tile holding the "
      "average packed query length.");

  // device_bytes None: an address alone, unchecked (the runtime's unsized
  // calls); callers that hold the workspace tensor pass its nbytes.
  m.def(
      "upload_plan",
      [](uint64_t host_ptr, size_t host_bytes, uint64_t device_ptr,
         uint64_t stream, std::optional<size_t> device_bytes) {
        const void *host = reinterpret_cast<const void *>(host_ptr);
        check(device_bytes ? attnRtUploadPlanSized(host, host_bytes, device_ptr,
                                                   *device_bytes, stream)
                           : attnRtUploadPlan(host, host_bytes, device_ptr, stream));
      },
      py::arg("host_ptr"), py::arg("host_bytes"), py::arg("device_ptr"),
      py::arg("stream"), py::arg("device_bytes") = py::none(),
      "Copies the plan to the device workspace on `stream`; with "
      "device_bytes, a workspace smaller than the plan needs raises Error "
      "(WorkspaceTooSmall) first.");

  m.def(
      "run",
      [](const PyModule &module, const std::string &attention_kernel,
         const std::optional<std::string> &merge_kernel, uint64_t host_ptr,
         size_t host_bytes, uint64_t device_ws, const py::list &args,
         uint64_t stream, std::optional<size_t> device_bytes) {
        std::vector<std::string> names;
        std::vector<attnRtArg> a = toArgs(args, names);
        const void *host = reinterpret_cast<const void *>(host_ptr);
        const char *merge = merge_kernel ? merge_kernel->c_str() : nullptr;
        check(device_bytes
                  ? attnRtRunSized(module.get(), attention_kernel.c_str(), merge,
                                   host, host_bytes, device_ws, *device_bytes,
                                   a.data(), int32_t(a.size()), stream)
                  : attnRtRun(module.get(), attention_kernel.c_str(), merge, host,
                              host_bytes, device_ws, a.data(), int32_t(a.size()),
                              stream));
      },
      py::arg("module"), py::arg("attention_kernel"), py::arg("merge_kernel"),
      py::arg("host_ptr"), py::arg("host_bytes"), py::arg("device_workspace"),
      py::arg("args"), py::arg("stream"), py::arg("device_bytes") = py::none(),
      "Launches the planned attention (and merge) kernels; with device_bytes, "
      "a workspace smaller than the plan needs raises Error "
      "(WorkspaceTooSmall) before any launch.");

  m.def(
      "merge",
      [](const PyModule &module, const std::string &merge_kernel, uint64_t host_ptr,
         size_t host_bytes, uint64_t device_ws, const py::list &args,
         uint64_t stream, std::optional<size_t> device_bytes) {
        std::vector<std::string> names;
        std::vector<attnRtArg> a = toArgs(args, names);
        const void *host = reinterpret_cast<const void *>(host_ptr);
        check(device_bytes
                  ? attnRtMergeSized(module.get(), merge_kernel.c_str(), host,
                                     host_bytes, device_ws, *device_bytes,
                                     a.data(), int32_t(a.size()), stream)
                  : attnRtMerge(module.get(), merge_kernel.c_str(), host,
                                host_bytes, device_ws, a.data(), int32_t(a.size()),
                                stream));
      },
      py::arg("module"), py::arg("merge_kernel"), py::arg("host_ptr"),
      py::arg("host_bytes"), py::arg("device_workspace"), py::arg("args"),
      py::arg("stream"), py::arg("device_bytes") = py::none(),
      "Launches only the merge kernel over the plan's merge map; device_bytes "
      "as for run().");

  m.def(
      "copy_by_table",
      [](const PyModule &module, const std::string &kernel, uint64_t table,
         int64_t capacityWords, py::object fence, uint64_t stream,
         uint64_t staging) {
        attnRtFence_t f = fence.is_none() ? nullptr : fence.cast<PyFence *>()->get();
        check(attnRtCopyByTable(module.get(), kernel.c_str(),
                                reinterpret_cast<const void *>(table), staging,
                                capacityWords, f, stream));
      },
      py::arg("module"), py::arg("kernel"), py::arg("table"),
      py::arg("capacity_words"), py::arg("fence"), py::arg("stream"),
      py::arg("staging") = 0,
      "Launches copy_by_table kernel `kernel` over the copy table at `table` "
      "and records `fence` (None: none) after it: in a capture, as the "
      "graph's event node. `staging` (0: none): a device buffer of the "
      "table's size the table is copied into first and the kernel reads.");
  m.def(
      "host_is_device_mapped",
      [](uint64_t host, size_t bytes) {
        int32_t mapped = 0;
        check(attnRtHostIsDeviceMapped(reinterpret_cast<const void *>(host),
                                       bytes, &mapped));
        return mapped != 0;
      },
      py::arg("host"), py::arg("bytes"),
      "Whether the device reads host memory [host, host + bytes) at the same "
      "addresses (pinned memory under unified addressing).");
  m.def(
      "stream_capture_id",
      [](uint64_t stream) {
        uint64_t id = 0;
        check(attnRtStreamCaptureId(stream, &id));
        return id;
      },
      py::arg("stream"),
      "The id of the graph capture `stream` is in; 0 when it is not "
      "capturing.");

  m.def(
      "launch_rows",
      [](const PyModule &module, const std::string &kernel, int64_t num_rows,
         const py::list &args, uint64_t stream) {
        std::vector<std::string> names;
        std::vector<attnRtArg> a = toArgs(args, names);
        check(attnRtLaunchRows(module.get(), kernel.c_str(), num_rows, a.data(),
                               int32_t(a.size()), stream));
      },
      py::arg("module"), py::arg("kernel"), py::arg("num_rows"),
      py::arg("args"), py::arg("stream"),
      "Launches a row kernel (role merge_states, append_kv or copy_indices) "
      "over num_rows "
      "rows; args as for run(), without num_rows (the runtime binds it) and "
      "with exactly the kernel's other arguments. 0 rows launches nothing.");

  //===--------------------------------------------------------------------===//
  // Compiler (only when built with it)
  //===--------------------------------------------------------------------===//

#ifdef ATTN_PY_HAVE_COMPILER
  m.attr("has_compiler") = true;
  m.def("compiler_version", [] { return std::string(attnCompilerVersion()); });
  m.def(
      "verify_variant",
      [](const std::string &text) {
        attnCompilerResult_t r = nullptr;
        attnCompilerStatus s;
        {
          py::gil_scoped_release release;
          s = attnCompilerVerifyVariant(text.c_str(), &r);
        }
        return resultDict(s, r);
      },
      py::arg("text"),
      "Parses and verifies attn IR (variants); returns a dict with ok, "
      "status and the compiler's diagnostics.");
  m.def(
      "compile",
      [](const std::string &ir, const std::string &chip, bool emit_cubin,
         const std::string &features, const std::string &cuda_path,
         int opt_level, bool manifest_only, int candidate, bool kv_tma) {
        attnCompilerOptions o;
        attnCompilerOptionsInit(&o);
        if (!chip.empty())
          o.chip = chip.c_str();
        o.features = features.c_str();
        o.cuda_path = cuda_path.empty() ? nullptr : cuda_path.c_str();
        o.opt_level = opt_level;
        o.emit_cubin = emit_cubin ? 1 : 0;
        o.manifest_only = manifest_only ? 1 : 0;
        o.candidate = candidate;
        o.kv_tma = kv_tma ? 1 : 0;
        attnCompilerResult_t r = nullptr;
        attnCompilerStatus s;
        {
          py::gil_scoped_release release;
          s = attnCompilerCompile(ir.c_str(), &o, &r);
        }
        return resultDict(s, r);
      },
      py::arg("ir"), py::arg("chip") = "", py::arg("emit_cubin") = true,
      py::arg("features") = "", py::arg("cuda_path") = "",
      py::arg("opt_level") = 3, py::arg("manifest_only") = false,
      py::arg("candidate") = -1, py::arg("kv_tma") = false,
      "Compiles attn IR; returns a dict: ok, status, diagnostics, ir (after "
      "attn-prepare-pipeline), ptx, cubin (bytes), manifest (JSON), generator, "
      "stages [(name, ms)]. chip '': the compiler's default; manifest_only: "
      "only the kernels' contracts; "
      "candidate >= 0: only that tile candidate's kernels; kv_tma: K/V tiles "
      "by TMA where the tile and the pages can.");
#else
  m.attr("has_compiler") = false;
#endif
}
