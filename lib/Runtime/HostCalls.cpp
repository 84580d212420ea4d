//===- HostCalls.cpp - What host-lowered programs call --------------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// The entries behind attnRtHost* (HostCalls.h): the argument checks against
// the manifest (no driver), then the per-image state (manifest parsed once,
// module loaded on first use, workspace), then plan + run or launchRows.
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/HostCalls.h"

#include "attn/Runtime/Launcher.h"
#include "attn/Runtime/Plan.h"

#if ATTN_HAVE_CUDA_H
#include "CudaDriver.h"
#endif

#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

namespace attnrt {

namespace {

/// What the runtime keeps per embedded image.
struct EmbeddedState {
  std::mutex mutex; ///< serializes the calls on one image
  Status parsed;
  Manifest manifest;
  std::unique_ptr<Module> module;
  uint64_t workspace = 0;
  size_t workspace_bytes = 0;
  std::vector<int32_t> host_workspace;
  uint64_t dropped = 0; ///< append_kv's dropped-token counter
  /// A custom mask's per-request byte offsets: made on the host from the
  /// index arrays, copied to the device buffer.
  std::vector<int32_t> mask_indptr_host;
  uint64_t mask_indptr = 0;
  size_t mask_indptr_bytes = 0;
  /// The paged kernels' index_error word: host-mapped, so reading it needs
  /// no copy (null until the first paged attention; published atomically
  /// because takeIndexErrors reads it from any thread).
  std::atomic<volatile int32_t *> index_error{nullptr};
  uint64_t index_error_device = 0;
};

std::mutex &stateMutex() {
  static std::mutex m;
  return m;
}

/// Every image's state, for takeIndexErrors (stateMutex held).
/// Never destroyed: the states live as long as the program (an image may be
/// used from static destructors), and the list keeps them reachable, so leak
/// checkers do not report them.
std::vector<EmbeddedState *> &allStates() {
  static auto &states = *new std::vector<EmbeddedState *>();
  return states;
}

/// BlockIndexOutOfRange if `state`'s index_error word is set (clears it).
Status takeIndexError(EmbeddedState *state) {
  volatile int32_t *word = state->index_error.load();
  if (!word || *word == 0)
    return Status::success();
  *word = 0;
  return Status(StatusCode::BlockIndexOutOfRange,
                "attention: a paged attention kernel read a kv_indices entry "
                "outside [0, num_pages) of its key cache (a page the cache "
                "does not have, or a negative one); it read page 0 instead, "
                "so the output of that launch is wrong");
}

Status invalid(std::string message) {
  return Status(StatusCode::InvalidArgument, std::move(message));
}
Status mismatch(std::string message) {
  return Status(StatusCode::ManifestMismatch, std::move(message));
}

Status getState(EmbeddedModule *m, EmbeddedState **out) {
  if (!m || !m->manifest_json)
    return invalid("embedded module: null module or manifest");
  std::lock_guard<std::mutex> lock(stateMutex());
  if (!m->state) {
    auto *state = new EmbeddedState(); // lives as long as the program
    state->parsed = parseManifest(m->manifest_json, &state->manifest);
    m->state = state;
    allStates().push_back(state);
  }
  *out = static_cast<EmbeddedState *>(m->state);
  return (*out)->parsed;
}

/// Loads the image on first use (state mutex held).
Status ensureLoaded(EmbeddedModule *m, EmbeddedState *state) {
  if (state->module)
    return Status::success();
  if (!m->image || m->image_bytes == 0)
    return invalid("embedded module: no image");
  return Module::load(m->image, m->image_bytes, m->manifest_json,
                      &state->module);
}

std::vector<std::string_view> splitNames(std::string_view list) {
  std::vector<std::string_view> names;
  while (!list.empty()) {
    size_t comma = list.find(',');
    names.push_back(list.substr(0, comma));
    if (comma == std::string_view::npos)
      break;
    list.remove_prefix(comma + 1);
  }
  return names;
}

Status findKernel(const Manifest &manifest, std::string_view name,
                  KernelRole role, const KernelManifest **out) {
  const KernelManifest *k = manifest.find(name);
  if (!k)
    return Status(StatusCode::NotFound,
                  "kernel '" + std::string(name) + "' is not in the manifest");
  if (k->role != role)
    return invalid("kernel '" + std::string(name) + "' has role " +
                   kernelRoleName(k->role) + ", not " + kernelRoleName(role));
  *out = k;
  return Status::success();
}

/// `what` holds `numel` elements: whole rows of `rowElements`; the rows.
Status rowsOf(const char *what, int64_t numel, int64_t rowElements,
              const KernelManifest &k, int64_t *rows) {
  if (numel < 0 || rowElements <= 0 || numel % rowElements != 0)
    return mismatch(std::string(what) + " holds " + std::to_string(numel) +
                    " elements, not whole rows of " +
                    std::to_string(rowElements) + " as kernel '" + k.name +
                    "' reads them");
  *rows = numel / rowElements;
  return Status::success();
}

constexpr int64_t kMaxRows = (int64_t(1) << 31) - 1;
constexpr int32_t kMaxParams = 64;

/// The variant parameters of attention kernel `k` and its merge kernel
/// (an output transform's), each name once.
std::vector<const ManifestVariantParam *>
variantParams(const KernelManifest &k, const KernelManifest &merge) {
  std::vector<const ManifestVariantParam *> params;
  for (const KernelManifest *m : {&k, &merge})
    for (const ManifestVariantParam &p : m->variant_params) {
      bool seen = false;
      for (const ManifestVariantParam *q : params)
        seen |= q->name == p.name;
      if (!seen)
        params.push_back(&p);
    }
  return params;
}

/// `c`'s variant parameters as arguments of `k` and `merge`: every name one
/// of their variant parameters, each of those given once.
Status bindParams(const KernelManifest &k, const KernelManifest &merge,
                  const HostAttentionCall &c, std::vector<KernelArg> *out) {
  if (c.num_params < 0 || c.num_params > kMaxParams ||
      (c.num_params > 0 && !c.param_values))
    return invalid("attention: num_params must be in [0, " +
                   std::to_string(kMaxParams) +
                   "] with param_values for each, got " +
                   std::to_string(c.num_params));
  std::vector<std::string_view> names;
  if (!c.param_names.empty())
    names = splitNames(c.param_names);
  if (int64_t(names.size()) != c.num_params)
    return invalid("attention: num_params is " + std::to_string(c.num_params) +
                   " but param_names lists " + std::to_string(names.size()));
  std::vector<const ManifestVariantParam *> wanted = variantParams(k, merge);
  out->clear();
  for (const ManifestVariantParam *p : wanted) {
    int32_t found = -1;
    for (int32_t i = 0; i < c.num_params; ++i)
      if (names[i] == p->name) {
        if (found >= 0)
          return invalid("attention: parameter '" + p->name +
                         "' is given twice");
        found = i;
      }
    if (found < 0)
      return mismatch("attention: kernel '" + k.name +
                      "' takes the variant parameter '" + p->name +
                      "', which the call does not give");
    uint64_t slot = c.param_values[found];
    KernelArg a;
    switch (p->type) {
    case ArgKind::Ptr: a = KernelArg::pointer(p->name.c_str(), slot); break;
    case ArgKind::I32:
      a = KernelArg::int32(p->name.c_str(), int32_t(uint32_t(slot)));
      break;
    case ArgKind::I64:
      a = KernelArg::int64(p->name.c_str(), int64_t(slot));
      break;
    case ArgKind::F32: {
      uint32_t bits = uint32_t(slot);
      float f;
      std::memcpy(&f, &bits, 4);
      a = KernelArg::float32(p->name.c_str(), f);
      break;
    }
    case ArgKind::TensorMap: // parseManifest refuses it
      return mismatch("attention: variant parameter '" + p->name +
                      "' is a tensor map");
    }
    out->push_back(a);
  }
  for (std::string_view n : names) {
    bool known = false;
    for (const ManifestVariantParam *p : wanted)
      known |= n == p->name;
    if (!known)
      return mismatch("attention: kernel '" + k.name +
                      "' has no variant parameter '" + std::string(n) + "'");
  }
  return Status::success();
}

} // namespace

Status getEmbeddedManifest(EmbeddedModule *m, const Manifest **out) {
  EmbeddedState *state = nullptr;
  if (Status s = getState(m, &state); !s.ok())
    return s;
  *out = &state->manifest;
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Checks (no driver)
//===----------------------------------------------------------------------===//

Status checkHostAttention(const Manifest &manifest, const HostAttentionCall &c,
                          std::vector<const KernelManifest *> *kernels,
                          std::vector<const KernelManifest *> *merges,
                          std::vector<KernelArg> *params) {
  std::vector<std::string_view> names = splitNames(c.kernels);
  std::vector<std::string_view> mergeNames = splitNames(c.merge_kernels);
  if (names.empty() || names.size() > size_t(kMaxTileCandidates))
    return invalid("attention: 1 to " + std::to_string(kMaxTileCandidates) +
                   " attention kernels expected, got " +
                   std::to_string(names.size()));
  if (mergeNames.size() != names.size())
    return invalid("attention: " + std::to_string(names.size()) +
                   " attention kernels but " +
                   std::to_string(mergeNames.size()) + " merge kernels");
  for (size_t i = 0; i < names.size(); ++i) {
    const KernelManifest *k = nullptr, *merge = nullptr;
    if (Status s = findKernel(manifest, names[i], KernelRole::Attention, &k);
        !s.ok())
      return s;
    if (Status s = findKernel(manifest, mergeNames[i], KernelRole::Merge, &merge);
        !s.ok())
      return s;
    if (!kernels->empty()) {
      const KernelManifest &first = *kernels->front();
      if (k->num_qo_heads != first.num_qo_heads ||
          k->num_kv_heads != first.num_kv_heads ||
          k->head_dim != first.head_dim || k->indexing != first.indexing ||
          k->block_cols != first.block_cols)
        return mismatch("attention: kernels '" + first.name + "' and '" +
                        k->name + "' are built for different heads or formats");
    }
    if (Status s = bindParams(*k, *merge, c, params); !s.ok())
      return s;
    kernels->push_back(k);
    merges->push_back(merge);
  }
  const KernelManifest &k = *kernels->front();
  bool paged = k.indexing == KVIndexing::Paged;
  // The kernels read q, K and V and write o in 16-byte chunks of a row.
  struct Named {
    const char *name;
    const HostBuffer *buffer;
    bool rows = false;
  };
  Named required[] = {{"q", &c.q, true},
                      {"k_cache", &c.k_cache, true},
                      {"v_cache", &c.v_cache, true},
                      {"o", &c.o, true},
                      {"lse", &c.lse},
                      {"qo_indptr", &c.qo_indptr},
                      {"kv_indptr", &c.kv_indptr},
                      {"kv_indices", paged ? &c.kv_indices : nullptr},
                      {"kv_last_len", paged ? &c.kv_last_len : nullptr}};
  for (const Named &n : required) {
    if (!n.buffer)
      continue;
    if (!n.buffer->ptr)
      return invalid(std::string("attention: ") + n.name + " is null");
    if (n.rows && n.buffer->ptr % 16)
      return invalid(std::string("attention: ") + n.name +
                     " is not 16-byte aligned");
    if (n.buffer->numel < 0)
      return invalid(std::string("attention: ") + n.name +
                     " has a negative size");
  }
  int64_t rows = 0, outRows = 0, lseRows = 0, blocks = 0, vBlocks = 0;
  const int64_t headElems = int64_t(k.num_qo_heads) * k.head_dim;
  const int64_t blockElems = int64_t(paged ? k.block_cols : 1) *
                             k.num_kv_heads * k.head_dim;
  if (Status s = rowsOf("q", c.q.numel, headElems, k, &rows); !s.ok())
    return s;
  if (Status s = rowsOf("o", c.o.numel, headElems, k, &outRows); !s.ok())
    return s;
  if (Status s = rowsOf("lse", c.lse.numel, k.num_qo_heads, k, &lseRows);
      !s.ok())
    return s;
  if (Status s = rowsOf("k_cache", c.k_cache.numel, blockElems, k, &blocks);
      !s.ok())
    return s;
  if (Status s = rowsOf("v_cache", c.v_cache.numel, blockElems, k, &vBlocks);
      !s.ok())
    return s;
  if (outRows != rows || lseRows != rows)
    return mismatch("attention: q has " + std::to_string(rows) +
                    " rows but o has " + std::to_string(outRows) +
                    " and lse " + std::to_string(lseRows));
  if (vBlocks != blocks)
    return mismatch("attention: k_cache and v_cache differ in size");
  if (rows > kMaxRows || blocks > kMaxRows)
    return invalid("attention: more than 2^31-1 rows or cache blocks");
  // num_pages is the key cache's page count: an empty cache has no page 0
  // for a bad index to fall back on.
  if (paged && blocks == 0 && c.kv_indices.numel > 0)
    return invalid("attention: the KV cache has no pages but kv_indices has " +
                   std::to_string(c.kv_indices.numel) + " entries");
  if (c.qo_indptr.numel < 1 || c.kv_indptr.numel != c.qo_indptr.numel)
    return invalid("attention: qo_indptr and kv_indptr need batch+1 >= 1 "
                   "entries each, got " +
                   std::to_string(c.qo_indptr.numel) + " and " +
                   std::to_string(c.kv_indptr.numel));
  if (paged && c.kv_last_len.numel != c.qo_indptr.numel - 1)
    return invalid("attention: kv_last_len needs batch = " +
                   std::to_string(c.qo_indptr.numel - 1) + " entries, got " +
                   std::to_string(c.kv_last_len.numel));
  if (!(c.sm_scale > 0) || !std::isfinite(c.sm_scale))
    return invalid("attention: sm_scale must be finite and positive");
  bool masked = k.argIndex("custom_mask") >= 0;
  if (masked != (c.mask.ptr != 0))
    return mismatch("attention: kernel '" + k.name + "' " +
                    (masked ? "needs a custom mask" : "takes no custom mask"));
  if (c.mask.numel < 0)
    return invalid("attention: mask has a negative size");
  return Status::success();
}

Status checkHostMergeStates(const Manifest &manifest,
                            const HostMergeStatesCall &c) {
  const KernelManifest *k = nullptr;
  if (Status s = findKernel(manifest, c.kernel, KernelRole::MergeStates, &k);
      !s.ok())
    return s;
  int32_t states = 0;
  while (k->argIndex("v" + std::to_string(states)) >= 0)
    ++states;
  if (c.num_states != states)
    return mismatch("merge_states: kernel '" + k->name + "' merges " +
                    std::to_string(states) + " states, got " +
                    std::to_string(c.num_states));
  if (!c.states || !c.lses)
    return invalid("merge_states: null state arrays");
  for (int32_t i = 0; i < c.num_states; ++i)
    if (!c.states[i] || !c.lses[i])
      return invalid("merge_states: state " + std::to_string(i) + " is null");
  if (!c.o || !c.lse)
    return invalid("merge_states: o or lse is null");
  bool masked = k->argIndex("mask") >= 0;
  if (masked != (c.mask != 0))
    return mismatch("merge_states: kernel '" + k->name + "' " +
                    (masked ? "needs" : "takes no") + " mask");
  if (c.head_dim != k->head_dim)
    return mismatch("merge_states: head dim " + std::to_string(c.head_dim) +
                    " but kernel '" + k->name + "' is built for " +
                    std::to_string(k->head_dim));
  if (c.tokens < 0 || c.heads < 1 || c.tokens * c.heads > kMaxRows)
    return invalid("merge_states: tokens x heads must be in [0, 2^31-1] "
                   "with at least one head");
  return Status::success();
}

Status checkHostAppendKV(const Manifest &manifest, const HostAppendKVCall &c) {
  const KernelManifest *k = nullptr;
  if (Status s = findKernel(manifest, c.kernel, KernelRole::AppendKV, &k);
      !s.ok())
    return s;
  if (!c.key || !c.value || !c.k_cache || !c.v_cache || !c.batch_indices ||
      !c.positions || !c.kv_indptr.ptr || !c.kv_indices.ptr)
    return invalid("append_kv: a buffer is null");
  if (c.head_dim != k->head_dim)
    return mismatch("append_kv: head dim " + std::to_string(c.head_dim) +
                    " but kernel '" + k->name + "' is built for " +
                    std::to_string(k->head_dim));
  if (c.tokens < 0 || c.heads < 1 || c.tokens * c.heads > kMaxRows ||
      c.num_pages < 0 || c.num_pages > kMaxRows)
    return invalid("append_kv: tokens x heads and pages must be in "
                   "[0, 2^31-1] with at least one head");
  if (c.kv_indptr.numel < 1 || c.kv_indptr.numel - 1 > kMaxRows)
    return invalid("append_kv: kv_indptr needs batch+1 >= 1 entries");
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Entries
//===----------------------------------------------------------------------===//

#if ATTN_HAVE_CUDA_H

namespace {
Status copyToHost(void *host, uint64_t device, size_t bytes, uint64_t stream) {
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  CUstream cs = reinterpret_cast<CUstream>(stream);
  if (CUresult r = d->memcpyDtoHAsync(host, CUdeviceptr(device), bytes, cs))
    return cudaFailure(*d, "cuMemcpyDtoHAsync", r);
  if (CUresult r = d->streamSynchronize(cs))
    return cudaFailure(*d, "cuStreamSynchronize", r);
  return Status::success();
}

/// A device buffer of at least `bytes` kept in `*ptr` / `*size` (grown by
/// reallocation once the stream is idle).
Status ensureDeviceBuffer(uint64_t *ptr, size_t *size, size_t bytes,
                          uint64_t stream) {
  if (*ptr && *size >= bytes)
    return Status::success();
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  if (*ptr) {
    if (Status w = streamSynchronize(stream); !w.ok())
      return w;
    d->memFree(CUdeviceptr(*ptr));
    *ptr = 0;
    *size = 0;
  }
  CUdeviceptr p = 0;
  if (CUresult r = d->memAlloc(&p, bytes ? bytes : 1))
    return cudaFailure(*d, "cuMemAlloc", r);
  *ptr = uint64_t(p);
  *size = bytes;
  return Status::success();
}
/// Every pointer argument in `args` is memory the GPU addresses (device,
/// managed or mapped pinned host memory). A buffer from plain host malloc
/// would fault in the kernel; in a host-lowered program it is what
/// bufferization allocates for a result without `outs`, so the message says
/// so.
Status checkDevicePointers(const char *op, const std::vector<KernelArg> &args) {
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  for (const KernelArg &a : args) {
    if (a.kind != ArgKind::Ptr || !a.ptr)
      continue;
    CUdeviceptr device = 0;
    if (d->pointerGetAttribute(&device, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                               CUdeviceptr(a.ptr)) != CUDA_SUCCESS)
      return invalid(std::string(op) + ": " + a.name +
                     " is not memory the GPU can address (a host "
                     "allocation?); in a host-lowered program give the op "
                     "`outs` in device memory so that bufferization does "
                     "not allocate its results on the host");
  }
  return Status::success();
}

/// The image's index_error word: pinned, host-mapped, zeroed.
Status ensureIndexErrorWord(EmbeddedState *state) {
  if (state->index_error)
    return Status::success();
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  void *host = nullptr;
  if (CUresult r = d->memHostAlloc(&host, sizeof(int32_t),
                                   CU_MEMHOSTALLOC_DEVICEMAP |
                                       CU_MEMHOSTALLOC_PORTABLE))
    return cudaFailure(*d, "cuMemHostAlloc", r);
  CUdeviceptr device = 0;
  if (CUresult r = d->memHostGetDevicePointer(&device, host, 0))
    return cudaFailure(*d, "cuMemHostGetDevicePointer", r);
  auto *word = static_cast<volatile int32_t *>(host);
  *word = 0;
  state->index_error_device = uint64_t(device);
  state->index_error.store(word);
  return Status::success();
}
/// The kernels' mask_indptr for `c`'s custom mask: request b's bits start
/// on byte mask_indptr[b], each request qo_len x kv_len bits rounded up to
/// whole bytes. Refuses a mask shorter than that.
Status uploadMaskIndptr(EmbeddedState *state, const HostAttentionCall &c,
                        const KernelManifest &k,
                        const std::vector<int32_t> &qoIndptr,
                        const std::vector<int32_t> &kvIndptr,
                        const std::vector<int32_t> &kvLastLen) {
  const size_t batch = qoIndptr.size() - 1;
  std::vector<int32_t> &indptr = state->mask_indptr_host;
  indptr.assign(batch + 1, 0);
  int64_t bytes = 0;
  for (size_t b = 0; b < batch; ++b) {
    int64_t qo = int64_t(qoIndptr[b + 1]) - qoIndptr[b];
    int64_t kv = requestKVLength(k.indexing, k.block_cols, kvIndptr.data(),
                                 kvLastLen.data(), int32_t(b));
    bytes += (qo * kv + 7) / 8;
    if (bytes > kMaxRows)
      return invalid("attention: the custom mask of this batch would be over "
                     "2^31-1 bytes");
    indptr[b + 1] = int32_t(bytes);
  }
  if (c.mask.numel < bytes)
    return mismatch("attention: the batch's custom mask needs " +
                    std::to_string(bytes) + " bytes (qo_len x kv_len bits "
                    "per request, each from a new byte) but mask holds " +
                    std::to_string(c.mask.numel));
  if (Status s = ensureDeviceBuffer(&state->mask_indptr,
                                    &state->mask_indptr_bytes,
                                    indptr.size() * 4, c.stream);
      !s.ok())
    return s;
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  if (CUresult r = d->memcpyHtoDAsync(CUdeviceptr(state->mask_indptr),
                                      indptr.data(), indptr.size() * 4,
                                      reinterpret_cast<CUstream>(c.stream)))
    return cudaFailure(*d, "cuMemcpyHtoDAsync", r);
  return Status::success();
}
} // namespace

Status deviceAllocManaged(size_t bytes, uint64_t *ptr) {
  if (!ptr)
    return invalid("deviceAllocManaged: null result pointer");
  *ptr = 0;
  Status s;
  const CudaDriver *d = cudaDriverInContext(&s);
  if (!d)
    return s;
  CUdeviceptr p = 0;
  if (CUresult r = d->memAllocManaged(&p, bytes ? bytes : 1,
                                      CU_MEM_ATTACH_GLOBAL))
    return cudaFailure(*d, "cuMemAllocManaged", r);
  *ptr = uint64_t(p);
  return Status::success();
}

Status deviceFree(uint64_t ptr) {
  if (!ptr)
    return Status::success();
  Status s;
  const CudaDriver *d = cudaDriver(&s);
  if (!d)
    return s;
  if (CUresult r = d->memFree(CUdeviceptr(ptr)))
    return cudaFailure(*d, "cuMemFree", r);
  return Status::success();
}

Status streamSynchronize(uint64_t stream) {
  Status s;
  const CudaDriver *d = cudaDriverInContext(&s);
  if (!d)
    return s;
  if (CUresult r = d->streamSynchronize(reinterpret_cast<CUstream>(stream)))
    return cudaFailure(*d, "cuStreamSynchronize", r);
  return Status::success();
}

#else

namespace {
Status noCuda() {
  return Status(StatusCode::CudaUnavailable,
                "attn runtime built without CUDA headers");
}
Status copyToHost(void *, uint64_t, size_t, uint64_t) { return noCuda(); }
Status ensureDeviceBuffer(uint64_t *, size_t *, size_t, uint64_t) {
  return noCuda();
}
Status ensureIndexErrorWord(EmbeddedState *) { return noCuda(); }
Status checkDevicePointers(const char *, const std::vector<KernelArg> &) {
  return noCuda();
}
Status uploadMaskIndptr(EmbeddedState *, const HostAttentionCall &,
                        const KernelManifest &, const std::vector<int32_t> &,
                        const std::vector<int32_t> &,
                        const std::vector<int32_t> &) {
  return noCuda();
}
} // namespace
Status deviceAllocManaged(size_t, uint64_t *ptr) {
  if (ptr)
    *ptr = 0;
  return noCuda();
}
Status deviceFree(uint64_t) { return noCuda(); }
Status streamSynchronize(uint64_t) { return noCuda(); }

#endif

Status hostAttention(EmbeddedModule *m, const HostAttentionCall &c) {
  EmbeddedState *state = nullptr;
  if (Status s = getState(m, &state); !s.ok())
    return s;
  std::vector<const KernelManifest *> kernels, merges;
  std::vector<KernelArg> params;
  if (Status s =
          checkHostAttention(state->manifest, c, &kernels, &merges, &params);
      !s.ok())
    return s;
  std::lock_guard<std::mutex> lock(state->mutex);
  if (Status s = ensureLoaded(m, state); !s.ok())
    return s;
  const KernelManifest &k = *kernels.front();
  bool paged = k.indexing == KVIndexing::Paged;
  // The caller's buffers and parameters (the runtime's own come after the
  // plan), all checked to be device memory before the first copy.
  std::vector<KernelArg> args = {
      KernelArg::pointer("q", c.q.ptr),
      KernelArg::pointer("k_cache", c.k_cache.ptr),
      KernelArg::pointer("v_cache", c.v_cache.ptr),
      KernelArg::pointer("o", c.o.ptr),
      KernelArg::pointer("lse", c.lse.ptr),
      KernelArg::pointer("qo_indptr", c.qo_indptr.ptr),
      KernelArg::pointer("kv_indptr", c.kv_indptr.ptr),
      KernelArg::float32("sm_scale", c.sm_scale)};
  if (paged) {
    args.push_back(KernelArg::pointer("kv_indices", c.kv_indices.ptr));
    args.push_back(KernelArg::pointer("kv_last_len", c.kv_last_len.ptr));
    // Dense caches of whole pages: one page's elements apart.
    args.push_back(KernelArg::int64(
        "page_stride", int64_t(k.block_cols) * k.num_kv_heads * k.head_dim));
  }
  if (c.mask.ptr)
    args.push_back(KernelArg::pointer("custom_mask", c.mask.ptr));
  args.insert(args.end(), params.begin(), params.end());
  if (Status s = checkDevicePointers("attention", args); !s.ok())
    return s;
  if (c.workspace)
    if (Status s = checkDevicePointers(
            "attention", {KernelArg::pointer("workspace", c.workspace)});
        !s.ok())
      return s;

  // The planner's inputs, on the host (this synchronizes the stream).
  const int32_t batch = int32_t(c.qo_indptr.numel - 1);
  std::vector<int32_t> qoIndptr(batch + 1), kvIndptr(batch + 1),
      kvLastLen(paged ? batch : 0);
  if (Status s = copyToHost(qoIndptr.data(), c.qo_indptr.ptr,
                            qoIndptr.size() * 4, c.stream);
      !s.ok())
    return s;
  if (Status s = copyToHost(kvIndptr.data(), c.kv_indptr.ptr,
                            kvIndptr.size() * 4, c.stream);
      !s.ok())
    return s;
  if (paged && batch > 0)
    if (Status s = copyToHost(kvLastLen.data(), c.kv_last_len.ptr,
                              kvLastLen.size() * 4, c.stream);
        !s.ok())
      return s;
  // The stream is idle now: a bad page index of an earlier launch on it
  // fails this call, as it would fail the next plan() in Python.
  if (paged) {
    if (Status s = ensureIndexErrorWord(state); !s.ok())
      return s;
    if (Status s = takeIndexError(state); !s.ok())
      return s;
  }

  const int64_t rows = c.q.numel / (int64_t(k.num_qo_heads) * k.head_dim);
  const int64_t blockElems =
      int64_t(paged ? k.block_cols : 1) * k.num_kv_heads * k.head_dim;
  PlanConfig cfg;
  cfg.num_qo_heads = k.num_qo_heads;
  cfg.num_kv_heads = k.num_kv_heads;
  cfg.head_dim = k.head_dim;
  cfg.indexing = k.indexing;
  cfg.block_size = paged ? k.block_cols : 1;
  cfg.causal = c.causal;
  cfg.window_left = c.window_left;
  cfg.num_sms = state->module->numSms();
  cfg.ctas_per_sm = k.ctas_per_sm;
  cfg.max_batch = batch > 0 ? batch : 1;
  cfg.max_total_q_rows = int32_t(rows > 0 ? rows : 1);
  cfg.num_candidates = int32_t(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i)
    cfg.candidates[i] = kernels[i]->candidate();
  PlanInputs inputs;
  inputs.batch = batch;
  inputs.qo_indptr = qoIndptr.data();
  inputs.kv_indptr = kvIndptr.data();
  inputs.kv_last_len = paged ? kvLastLen.data() : nullptr;
  inputs.num_cache_blocks = int32_t(c.k_cache.numel / blockElems);
  if (qoIndptr[batch] > rows)
    return mismatch("attention: qo_indptr ends at " +
                    std::to_string(qoIndptr[batch]) + " rows but q has " +
                    std::to_string(rows));

  size_t hostBytes = planHostWorkspaceBytes(cfg);
  size_t deviceBytes = planDeviceWorkspaceBytes(cfg);
  state->host_workspace.resize((hostBytes + 3) / 4);
  if (Status s = plan(cfg, inputs, state->host_workspace.data(), hostBytes);
      !s.ok())
    return s;
  // The planner's own output: uploadPlan need not validate it again.
  const PlanView view{state->host_workspace.data()};
  uint64_t workspace = c.workspace;
  size_t workspaceBytes = size_t(c.workspace_bytes);
  if (!workspace) {
    if (Status s = ensureDeviceBuffer(&state->workspace,
                                      &state->workspace_bytes, deviceBytes,
                                      c.stream);
        !s.ok())
      return s;
    workspace = state->workspace;
    workspaceBytes = state->workspace_bytes;
  }
  if (Status s = uploadPlan(view, workspace, workspaceBytes, c.stream); !s.ok())
    return s;
  if (c.mask.ptr)
    if (Status s = uploadMaskIndptr(state, c, k, qoIndptr, kvIndptr, kvLastLen);
        !s.ok())
      return s;

  if (paged) {
    // Separate K and V caches: the index space is the key cache's pages.
    args.push_back(KernelArg::int32("num_pages", inputs.num_cache_blocks));
    args.push_back(
        KernelArg::pointer("index_error", state->index_error_device));
  }
  if (c.mask.ptr)
    args.push_back(KernelArg::pointer("mask_indptr", state->mask_indptr));
  int32_t candidate = view.candidate();
  if (candidate < 0 || candidate >= int32_t(kernels.size()))
    return invalid("attention: the plan picked no candidate");
  return run(*state->module, kernels[candidate]->name, merges[candidate]->name,
             view, workspace, workspaceBytes, args.data(),
             int32_t(args.size()), c.stream);
}

Status takeIndexErrors() {
  std::lock_guard<std::mutex> lock(stateMutex());
  for (EmbeddedState *state : allStates())
    if (Status s = takeIndexError(state); !s.ok())
      return s;
  return Status::success();
}

Status hostMergeStates(EmbeddedModule *m, const HostMergeStatesCall &c) {
  EmbeddedState *state = nullptr;
  if (Status s = getState(m, &state); !s.ok())
    return s;
  if (Status s = checkHostMergeStates(state->manifest, c); !s.ok())
    return s;
  std::lock_guard<std::mutex> lock(state->mutex);
  if (Status s = ensureLoaded(m, state); !s.ok())
    return s;
  // Dense [tokens, heads, dim] states and output, [tokens, heads] LSEs.
  const int64_t rowStride = c.heads * c.head_dim;
  std::vector<std::string> names;
  for (int32_t i = 0; i < c.num_states; ++i) {
    names.push_back("v" + std::to_string(i));
    names.push_back("s" + std::to_string(i));
  }
  std::vector<KernelArg> args = {
      KernelArg::int32("heads", int32_t(c.heads)),
      KernelArg::int64("v_stride", rowStride),
      KernelArg::int64("s_stride", c.heads),
      KernelArg::pointer("o", c.o),
      KernelArg::int64("o_stride", rowStride),
      KernelArg::pointer("lse", c.lse),
      KernelArg::int64("lse_stride", c.heads)};
  for (int32_t i = 0; i < c.num_states; ++i) {
    args.push_back(KernelArg::pointer(names[2 * i].c_str(), c.states[i]));
    args.push_back(KernelArg::pointer(names[2 * i + 1].c_str(), c.lses[i]));
  }
  if (c.mask)
    args.push_back(KernelArg::pointer("mask", c.mask));
  if (Status s = checkDevicePointers("merge_states", args); !s.ok())
    return s;
  return launchRows(*state->module, c.kernel, c.tokens * c.heads, args.data(),
                    int32_t(args.size()), c.stream);
}

Status hostAppendKV(EmbeddedModule *m, const HostAppendKVCall &c) {
  EmbeddedState *state = nullptr;
  if (Status s = getState(m, &state); !s.ok())
    return s;
  if (Status s = checkHostAppendKV(state->manifest, c); !s.ok())
    return s;
  std::lock_guard<std::mutex> lock(state->mutex);
  if (Status s = ensureLoaded(m, state); !s.ok())
    return s;
  const KernelManifest &k = *state->manifest.find(c.kernel);
  size_t droppedBytes = state->dropped ? 256 : 0;
  if (Status s = ensureDeviceBuffer(&state->dropped, &droppedBytes, 256,
                                    c.stream);
      !s.ok())
    return s;
  // Dense caches: [pages, slot, head, dim] (NHD) or [pages, head, slot, dim].
  const int64_t page = k.block_cols, D = c.head_dim;
  const int64_t pageStride = page * c.heads * D;
  const int64_t slotStride = c.layout_hnd ? D : c.heads * D;
  const int64_t headStride = c.layout_hnd ? page * D : D;
  std::vector<KernelArg> args = {
      KernelArg::int32("heads", int32_t(c.heads)),
      KernelArg::int32("batch", int32_t(c.kv_indptr.numel - 1)),
      KernelArg::int32("num_pages", int32_t(c.num_pages)),
      KernelArg::pointer("key", c.key),
      KernelArg::pointer("value", c.value),
      KernelArg::int64("key_stride", c.heads * D),
      KernelArg::int64("value_stride", c.heads * D),
      KernelArg::pointer("batch_indices", c.batch_indices),
      KernelArg::pointer("positions", c.positions),
      KernelArg::pointer("kv_indptr", c.kv_indptr.ptr),
      KernelArg::pointer("kv_indices", c.kv_indices.ptr),
      KernelArg::pointer("k_cache", c.k_cache),
      KernelArg::pointer("v_cache", c.v_cache),
      KernelArg::int64("page_stride", pageStride),
      KernelArg::int64("slot_stride", slotStride),
      KernelArg::int64("head_stride", headStride),
      KernelArg::pointer("dropped", state->dropped)};
  if (Status s = checkDevicePointers("append_kv", args); !s.ok())
    return s;
  return launchRows(*state->module, c.kernel, c.tokens * c.heads, args.data(),
                    int32_t(args.size()), c.stream);
}

} // namespace attnrt
