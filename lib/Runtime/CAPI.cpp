//===- CAPI.cpp - C API of the attn runtime -------------------------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Thin wrappers over the C++ runtime: convert the C structs, catch everything
// (no exception crosses the C boundary), and keep the last message per thread.
//
//===----------------------------------------------------------------------===//

#include "attn-c/Runtime.h"

#include "attn/Runtime/HostCalls.h"
#include "attn/Runtime/Launcher.h"
#include "attn/Runtime/Plan.h"

#include <limits>
#include <string>

using namespace attnrt;

namespace attnrt {
/// Launcher.cpp: one cuMemcpyHtoDAsync / cuMemcpyDtoDAsync (CudaUnavailable
/// without the CUDA headers). Only the C API exports them, so they are
/// declared here.
Status copyToDevice(const void *host, size_t bytes, uint64_t device,
                    uint64_t stream);
Status copyOnDevice(uint64_t src, size_t bytes, uint64_t dst, uint64_t stream);
} // namespace attnrt

static_assert(sizeof(attnRtTileCandidate) == sizeof(TileCandidate));
static_assert(int(ATTN_RT_UNSUPPORTED) == int(StatusCode::Unsupported));

static thread_local std::string lastError;

static attnRtStatus report(const Status &s) {
  lastError = s.ok() ? std::string() : s.message();
  return static_cast<attnRtStatus>(s.code());
}

static attnRtStatus invalidArg(const char *msg) {
  return report(Status(StatusCode::InvalidArgument, msg));
}

struct attnRtModule {
  std::unique_ptr<Module> module;
};

struct attnRtFence {
  UploadFence fence;
};

template <typename F> static attnRtStatus guarded(F &&f) {
  try {
    return f();
  } catch (const std::exception &e) {
    return report(Status(StatusCode::InvalidArgument,
                         std::string("internal error: ") + e.what()));
  } catch (...) {
    return report(Status(StatusCode::InvalidArgument, "internal error"));
  }
}

static bool toConfig(const attnRtPlanConfig *c, PlanConfig *out) {
  if (!c || c->num_candidates < 0 || c->num_candidates > kMaxTileCandidates)
    return false;
  out->num_qo_heads = c->num_qo_heads;
  out->num_kv_heads = c->num_kv_heads;
  out->head_dim = c->head_dim;
  out->indexing = static_cast<KVIndexing>(c->indexing);
  out->block_size = c->block_size;
  out->causal = c->causal;
  out->window_left = c->window_left;
  out->has_custom_mask = c->has_custom_mask;
  out->num_sms = c->num_sms;
  out->ctas_per_sm = c->ctas_per_sm;
  out->graph_mode = c->graph_mode;
  out->graph_candidate = c->graph_candidate;
  out->max_batch = c->max_batch;
  out->max_total_q_rows = c->max_total_q_rows;
  out->min_chunk_tokens = c->min_chunk_tokens;
  out->disable_split = c->disable_split;
  out->fixed_split_tokens = c->fixed_split_tokens;
  out->max_kv_tokens = c->max_kv_tokens;
  out->max_partial_rows = c->max_partial_rows;
  out->num_candidates = c->num_candidates;
  for (int i = 0; i < c->num_candidates; ++i)
    out->candidates[i] = {c->candidates[i].q_rows, c->candidates[i].kv_tile,
                          c->candidates[i].gqa_pack, c->candidates[i].cost_per_item,
                          c->candidates[i].cost_per_kv_token,
                          c->candidates[i].ctas_per_sm,
                          c->candidates[i].min_chunk_tokens};
  return true;
}

/// Converts C arguments; at most 64 (the launcher's limit).
static bool toArgs(const attnRtArg *in, int32_t n, KernelArg *out) {
  if (n < 0 || n > 64 || (n > 0 && !in))
    return false;
  for (int32_t i = 0; i < n; ++i) {
    if (in[i].kind < ATTN_RT_ARG_PTR || in[i].kind > ATTN_RT_ARG_F32)
      return false;
    out[i].name = in[i].name;
    out[i].kind = static_cast<ArgKind>(in[i].kind);
    out[i].ptr = 0;
    switch (out[i].kind) {
    case ArgKind::Ptr: out[i].ptr = in[i].value.ptr; break;
    case ArgKind::I32: out[i].i32 = in[i].value.i32; break;
    case ArgKind::I64: out[i].i64 = in[i].value.i64; break;
    case ArgKind::F32: out[i].f32 = in[i].value.f32; break;
    case ArgKind::TensorMap: return false; // encoded by the launcher
    }
  }
  return true;
}

extern "C" {

const char *attnRtLastError(void) { return lastError.c_str(); }

const char *attnRtStatusName(attnRtStatus status) {
  return statusCodeName(static_cast<StatusCode>(status));
}

attnRtStatus attnRtPlanWorkspaceSize(const attnRtPlanConfig *config,
                                     size_t *hostBytes, size_t *deviceBytes) {
  return guarded([&] {
    PlanConfig c;
    if (!toConfig(config, &c))
      return invalidArg("config is null or num_candidates out of range");
    PlanLayout l;
    Status s = computePlanLayout(c, &l);
    if (s.ok()) {
      if (hostBytes) *hostBytes = l.host_bytes;
      if (deviceBytes) *deviceBytes = l.device_bytes;
    }
    return report(s);
  });
}

/// attnRtPlan's work; with `device` nonzero the plan just written goes up to
/// it (sized as attnRtUploadPlanSized) without a second validation: it is
/// the planner's own output, not a caller's buffer.
static attnRtStatus planImpl(const attnRtPlanConfig *config,
                             const attnRtPlanInputs *inputs, void *ws,
                             size_t bytes, uint64_t device, size_t deviceBytes,
                             const attnRtUploadOptions *options,
                             uint64_t stream, attnRtPlanSummary *summary) {
  return guarded([&] {
    PlanConfig c;
    if (!toConfig(config, &c) || !inputs)
      return invalidArg("config or inputs is null, or num_candidates out of range");
    PlanInputs in;
    in.batch = inputs->batch;
    in.qo_indptr = inputs->qo_indptr;
    in.kv_indptr = inputs->kv_indptr;
    in.kv_last_len = inputs->kv_last_len;
    in.kv_lens = inputs->kv_lens;
    in.kv_indices = inputs->kv_indices;
    in.num_cache_blocks = inputs->num_cache_blocks;
    Status s = plan(c, in, ws, bytes);
    const PlanView v{static_cast<const int32_t *>(ws)};
    if (s.ok() && device) {
      FixedBuffers fixed;
      CopyKernel kernel;
      UploadFence *fence = options && options->fence ? &options->fence->fence : nullptr;
      if (options) {
        fixed = {options->qo_indptr_dst,  options->kv_indptr_dst,
                 options->kv_last_len_dst, options->kv_indices,
                 options->kv_indices_dst, options->kv_indices_bytes};
        if (options->copy_module)
          kernel = {options->copy_module->module.get(),
                    options->copy_kernel ? options->copy_kernel : "",
                    options->reads_host != 0};
      }
      if (options && options->copy_table) {
        // Deferred: the table for graph mode's captured copy_by_table.
        const KernelManifest *k =
            kernel.module ? kernel.module->kernel(kernel.name) : nullptr;
        const int32_t rows = k ? copyTableRows(*k) : 0;
        s = rows ? writeCopyTable(v, device, deviceBytes, fixed, rows,
                                  options->copy_table_words,
                                  reinterpret_cast<int64_t *>(options->copy_table))
                 : Status(StatusCode::InvalidArgument,
                          "copy_table needs a copy_by_table kernel in "
                          "copy_module / copy_kernel");
      } else {
        s = uploadPlan(v, device, deviceBytes, fixed, kernel, fence, stream);
      }
    }
    if (s.ok() && summary) {
      summary->num_ctas = v.numCtas();
      summary->num_items = v.numItems();
      summary->num_merge_units = v.numMergeUnits();
      summary->num_slots = v.numSlots();
      summary->candidate = v.candidate();
      summary->tile_q = v.tileQ();
      summary->gqa_pack = v.gqaPack();
      summary->plan_bytes = v.bytes();
    }
    return report(s);
  });
}

attnRtStatus attnRtPlan(const attnRtPlanConfig *config,
                        const attnRtPlanInputs *inputs, void *ws, size_t bytes,
                        attnRtPlanSummary *summary) {
  return planImpl(config, inputs, ws, bytes, 0, 0, nullptr, 0, summary);
}

attnRtStatus attnRtPlanAndUpload(const attnRtPlanConfig *config,
                                 const attnRtPlanInputs *inputs, void *ws,
                                 size_t bytes, uint64_t device,
                                 size_t deviceBytes, uint64_t stream,
                                 attnRtPlanSummary *summary) {
  return attnRtPlanAndUploadWith(config, inputs, ws, bytes, device, deviceBytes,
                                 nullptr, stream, summary);
}

attnRtStatus attnRtPlanAndUploadWith(const attnRtPlanConfig *config,
                                     const attnRtPlanInputs *inputs, void *ws,
                                     size_t bytes, uint64_t device,
                                     size_t deviceBytes,
                                     const attnRtUploadOptions *options,
                                     uint64_t stream,
                                     attnRtPlanSummary *summary) {
  if (!device)
    return guarded([] {
      return invalidArg("attnRtPlanAndUpload: device_workspace is null");
    });
  return planImpl(config, inputs, ws, bytes, device, deviceBytes, options,
                  stream, summary);
}

attnRtStatus attnRtHostIsDeviceMapped(const void *host, size_t bytes,
                                      int32_t *mapped) {
  return guarded([&] {
    if (!mapped)
      return invalidArg("attnRtHostIsDeviceMapped: mapped is null");
    bool m = false;
    Status s = hostIsDeviceMapped(host, bytes, &m);
    *mapped = m;
    return report(s);
  });
}

attnRtStatus attnRtModuleLoad(const void *image, size_t bytes, const char *manifest,
                              attnRtModule_t *module) {
  return guarded([&] {
    if (!manifest || !module)
      return invalidArg("manifest_json and module must not be null");
    auto m = std::make_unique<attnRtModule>();
    Status s = Module::load(image, bytes, manifest, &m->module);
    if (s.ok())
      *module = m.release();
    return report(s);
  });
}

attnRtStatus attnRtModuleLoadFiles(const char *imagePath, const char *manifestPath,
                                   attnRtModule_t *module) {
  return guarded([&] {
    if (!imagePath || !manifestPath || !module)
      return invalidArg("paths and module must not be null");
    auto m = std::make_unique<attnRtModule>();
    Status s = Module::loadFiles(imagePath, manifestPath, &m->module);
    if (s.ok())
      *module = m.release();
    return report(s);
  });
}

void attnRtModuleDestroy(attnRtModule_t module) { delete module; }

/// The tile candidates of `manifest`'s attention kernels, in order.
static attnRtStatus writeCandidates(const Manifest &manifest,
                                    attnRtTileCandidate *out, int32_t capacity,
                                    int32_t *count) {
  int32_t n = 0;
  for (const KernelManifest &k : manifest.kernels) {
    if (k.role != KernelRole::Attention)
      continue;
    if (n < capacity) {
      TileCandidate t = k.candidate();
      out[n] = {t.q_rows, t.kv_tile, t.gqa_pack, t.cost_per_item,
                t.cost_per_kv_token, t.ctas_per_sm, t.min_chunk_tokens};
    }
    ++n;
  }
  *count = n;
  return report(Status::success());
}

attnRtStatus attnRtModuleCandidates(attnRtModule_t module, attnRtTileCandidate *out,
                                    int32_t capacity, int32_t *count) {
  return guarded([&] {
    if (!module || !count || (capacity > 0 && !out))
      return invalidArg("module, out and count must not be null");
    return writeCandidates(module->module->manifest(), out, capacity, count);
  });
}

attnRtStatus attnRtManifestCandidates(const char *manifest_json,
                                      attnRtTileCandidate *out,
                                      int32_t capacity, int32_t *count) {
  return guarded([&] {
    if (!manifest_json || !count || (capacity > 0 && !out))
      return invalidArg("manifest_json, out and count must not be null");
    Manifest manifest;
    if (Status s = parseManifest(manifest_json, &manifest); !s.ok())
      return report(s);
    return writeCandidates(manifest, out, capacity, count);
  });
}

int32_t attnRtSelectTileCandidate(const attnRtTileCandidate *candidates,
                                  int32_t count, int64_t total_q_rows,
                                  int64_t batch) {
  if (!candidates || count < 1 || count > kMaxTileCandidates ||
      total_q_rows < 0 || batch < 0 ||
      total_q_rows > std::numeric_limits<int32_t>::max() ||
      batch > std::numeric_limits<int32_t>::max())
    return -1;
  return selectTileCandidate(
      reinterpret_cast<const TileCandidate *>(candidates), count,
      total_q_rows, batch);
}

/// The device workspace size the unsized entry points pass (with `sized`
/// false: not checked).
constexpr size_t kUnsized = 0;

static attnRtStatus uploadImpl(const void *ws, size_t bytes, uint64_t device,
                               bool sized, size_t deviceBytes, uint64_t stream) {
  return guarded([&] {
    PlanView v;
    if (Status s = viewPlan(ws, bytes, &v); !s.ok())
      return report(s);
    return report(sized ? uploadPlan(v, device, deviceBytes, stream)
                        : uploadPlan(v, device, stream));
  });
}

static attnRtStatus runImpl(attnRtModule_t module, const char *attentionKernel,
                            const char *mergeKernel, const void *ws,
                            size_t bytes, uint64_t device, bool sized,
                            size_t deviceBytes, const attnRtArg *args,
                            int32_t numArgs, uint64_t stream) {
  return guarded([&] {
    if (!module || !attentionKernel)
      return invalidArg("module and attention_kernel must not be null");
    KernelArg converted[64];
    if (!toArgs(args, numArgs, converted))
      return invalidArg("args: null, more than 64, or an unknown kind");
    PlanView v;
    if (Status s = viewPlan(ws, bytes, &v); !s.ok())
      return report(s);
    const char *merge = mergeKernel ? mergeKernel : "";
    return report(sized ? run(*module->module, attentionKernel, merge, v,
                              device, deviceBytes, converted, numArgs, stream)
                        : run(*module->module, attentionKernel, merge, v,
                              device, converted, numArgs, stream));
  });
}

static attnRtStatus mergeImpl(attnRtModule_t module, const char *mergeKernel,
                              const void *ws, size_t bytes, uint64_t device,
                              bool sized, size_t deviceBytes,
                              const attnRtArg *args, int32_t numArgs,
                              uint64_t stream) {
  return guarded([&] {
    if (!module || !mergeKernel)
      return invalidArg("module and merge_kernel must not be null");
    KernelArg converted[64];
    if (!toArgs(args, numArgs, converted))
      return invalidArg("args: null, more than 64, or an unknown kind");
    PlanView v;
    if (Status s = viewPlan(ws, bytes, &v); !s.ok())
      return report(s);
    return report(sized ? runMerge(*module->module, mergeKernel, v, device,
                                   deviceBytes, converted, numArgs, stream)
                        : runMerge(*module->module, mergeKernel, v, device,
                                   converted, numArgs, stream));
  });
}

attnRtStatus attnRtUploadPlan(const void *ws, size_t bytes, uint64_t device,
                              uint64_t stream) {
  return uploadImpl(ws, bytes, device, false, kUnsized, stream);
}

attnRtStatus attnRtCopyToDevice(const void *host, size_t bytes, uint64_t device,
                                uint64_t stream) {
  return guarded([&] {
    if (bytes == 0)
      return report(Status::success());
    if (!host || !device)
      return invalidArg("attnRtCopyToDevice: host or device pointer is null");
    return report(copyToDevice(host, bytes, device, stream));
  });
}

attnRtStatus attnRtCopyOnDevice(uint64_t src, size_t bytes, uint64_t dst,
                                uint64_t stream) {
  return guarded([&] {
    if (bytes == 0)
      return report(Status::success());
    if (!src || !dst)
      return invalidArg("attnRtCopyOnDevice: source or destination is null");
    return report(copyOnDevice(src, bytes, dst, stream));
  });
}

attnRtStatus attnRtFenceCreate(attnRtFence_t *fence) {
  return guarded([&] {
    if (!fence)
      return invalidArg("attnRtFenceCreate: fence is null");
    *fence = new attnRtFence();
    return report(Status::success());
  });
}

attnRtStatus attnRtFenceRecord(attnRtFence_t fence, uint64_t stream) {
  return guarded([&] {
    if (!fence)
      return invalidArg("attnRtFenceRecord: fence is null");
    return report(fence->fence.record(stream));
  });
}

attnRtStatus attnRtFenceWait(attnRtFence_t fence) {
  return guarded([&] {
    if (!fence)
      return invalidArg("attnRtFenceWait: fence is null");
    return report(fence->fence.wait());
  });
}

void attnRtFenceDestroy(attnRtFence_t fence) { delete fence; }

attnRtStatus attnRtCopyByTable(attnRtModule_t module, const char *kernel,
                               const void *table, uint64_t staging,
                               int64_t capacityWords, attnRtFence_t fence,
                               uint64_t stream) {
  return guarded([&] {
    if (!module || !kernel)
      return invalidArg("attnRtCopyByTable: module or kernel is null");
    return report(copyByTable(*module->module, kernel,
                              reinterpret_cast<uint64_t>(table), staging,
                              capacityWords, fence ? &fence->fence : nullptr,
                              stream));
  });
}

attnRtStatus attnRtStreamCaptureId(uint64_t stream, uint64_t *id) {
  return guarded([&] {
    if (!id)
      return invalidArg("attnRtStreamCaptureId: id is null");
    return report(streamCaptureId(stream, id));
  });
}

attnRtStatus attnRtStreamIsCapturing(uint64_t stream, int32_t *capturing) {
  return guarded([&] {
    if (!capturing)
      return invalidArg("attnRtStreamIsCapturing: capturing is null");
    bool c = false;
    Status s = streamIsCapturing(stream, &c);
    *capturing = c;
    return report(s);
  });
}

attnRtStatus attnRtUploadPlanSized(const void *ws, size_t bytes, uint64_t device,
                                   size_t deviceBytes, uint64_t stream) {
  return uploadImpl(ws, bytes, device, true, deviceBytes, stream);
}

attnRtStatus attnRtRun(attnRtModule_t module, const char *attentionKernel,
                       const char *mergeKernel, const void *ws, size_t bytes,
                       uint64_t device, const attnRtArg *args, int32_t numArgs,
                       uint64_t stream) {
  return runImpl(module, attentionKernel, mergeKernel, ws, bytes, device, false,
                 kUnsized, args, numArgs, stream);
}

attnRtStatus attnRtRunSized(attnRtModule_t module, const char *attentionKernel,
                            const char *mergeKernel, const void *ws,
                            size_t bytes, uint64_t device, size_t deviceBytes,
                            const attnRtArg *args, int32_t numArgs,
                            uint64_t stream) {
  return runImpl(module, attentionKernel, mergeKernel, ws, bytes, device, true,
                 deviceBytes, args, numArgs, stream);
}

attnRtStatus attnRtMerge(attnRtModule_t module, const char *mergeKernel,
                         const void *ws, size_t bytes, uint64_t device,
                         const attnRtArg *args, int32_t numArgs, uint64_t stream) {
  return mergeImpl(module, mergeKernel, ws, bytes, device, false, kUnsized,
                   args, numArgs, stream);
}

attnRtStatus attnRtMergeSized(attnRtModule_t module, const char *mergeKernel,
                              const void *ws, size_t bytes, uint64_t device,
                              size_t deviceBytes, const attnRtArg *args,
                              int32_t numArgs, uint64_t stream) {
  return mergeImpl(module, mergeKernel, ws, bytes, device, true, deviceBytes,
                   args, numArgs, stream);
}

attnRtStatus attnRtLaunchRows(attnRtModule_t module, const char *kernel,
                              int64_t numRows, const attnRtArg *args,
                              int32_t numArgs, uint64_t stream) {
  return guarded([&] {
    // The row count and the arguments first: they need no module.
    if (numRows < 0 || numRows > std::numeric_limits<int32_t>::max())
      return report(Status(StatusCode::InvalidArgument,
                           "attnRtLaunchRows: num_rows " +
                               std::to_string(numRows) +
                               " is outside [0, 2^31-1]"));
    KernelArg converted[64];
    if (!toArgs(args, numArgs, converted))
      return invalidArg("args: null, more than 64, or an unknown kind");
    if (!module || !kernel)
      return invalidArg("attnRtLaunchRows: module and kernel must not be null");
    return report(launchRows(*module->module, kernel, numRows, converted,
                             numArgs, stream));
  });
}

} // extern "C"

//===----------------------------------------------------------------------===//
// Host-lowered programs
//===----------------------------------------------------------------------===//

static_assert(sizeof(attnRtEmbeddedModule) == sizeof(EmbeddedModule));

static thread_local Status firstHostFailure;
static thread_local std::string hostMessage;

/// report(), remembering the thread's first failure for attnRtHostTakeStatus.
static attnRtStatus reportHost(const Status &s) {
  if (!s.ok() && firstHostFailure.ok())
    firstHostFailure = s;
  return report(s);
}

attnRtStatus attnRtHostAttention(
    attnRtEmbeddedModule *module, const char *kernels,
    const char *merge_kernels, int32_t causal, int32_t window_left,
    uint64_t q, int64_t q_numel, uint64_t k_cache, int64_t k_cache_numel,
    uint64_t v_cache, int64_t v_cache_numel, uint64_t o, int64_t o_numel,
    uint64_t lse, int64_t lse_numel, uint64_t qo_indptr, int64_t qo_indptr_len,
    uint64_t kv_indptr, int64_t kv_indptr_len, uint64_t kv_indices,
    int64_t kv_indices_len, uint64_t kv_last_len, int64_t kv_last_len_len,
    uint64_t mask, int64_t mask_bytes, float sm_scale, int32_t num_params,
    const char *param_names, const uint64_t *param_values, uint64_t workspace,
    uint64_t workspace_bytes, uint64_t stream) {
  return guarded([&] {
    if (!module || !kernels || !merge_kernels)
      return reportHost(Status(StatusCode::InvalidArgument,
                               "attention: module, kernels and merge_kernels "
                               "must not be null"));
    HostAttentionCall c;
    c.kernels = kernels;
    c.merge_kernels = merge_kernels;
    c.causal = causal;
    c.window_left = window_left;
    c.q = {q, q_numel};
    c.k_cache = {k_cache, k_cache_numel};
    c.v_cache = {v_cache, v_cache_numel};
    c.o = {o, o_numel};
    c.lse = {lse, lse_numel};
    c.qo_indptr = {qo_indptr, qo_indptr_len};
    c.kv_indptr = {kv_indptr, kv_indptr_len};
    c.kv_indices = {kv_indices, kv_indices_len};
    c.kv_last_len = {kv_last_len, kv_last_len_len};
    c.mask = {mask, mask_bytes};
    c.sm_scale = sm_scale;
    c.num_params = num_params;
    c.param_names = param_names ? param_names : "";
    c.param_values = param_values;
    c.workspace = workspace;
    c.workspace_bytes = workspace_bytes;
    c.stream = stream;
    return reportHost(
        hostAttention(reinterpret_cast<EmbeddedModule *>(module), c));
  });
}

attnRtStatus attnRtHostMergeStates(attnRtEmbeddedModule *module,
                                   const char *kernel, int32_t num_states,
                                   const uint64_t *states, const uint64_t *lses,
                                   int64_t tokens, int64_t heads,
                                   int64_t head_dim, uint64_t o, uint64_t lse,
                                   uint64_t mask, uint64_t stream) {
  return guarded([&] {
    if (!module || !kernel)
      return reportHost(Status(StatusCode::InvalidArgument,
                               "merge_states: module and kernel must not be "
                               "null"));
    HostMergeStatesCall c;
    c.kernel = kernel;
    c.num_states = num_states;
    c.states = states;
    c.lses = lses;
    c.tokens = tokens;
    c.heads = heads;
    c.head_dim = head_dim;
    c.o = o;
    c.lse = lse;
    c.mask = mask;
    c.stream = stream;
    return reportHost(
        hostMergeStates(reinterpret_cast<EmbeddedModule *>(module), c));
  });
}

attnRtStatus attnRtHostAppendKV(
    attnRtEmbeddedModule *module, const char *kernel, uint64_t key,
    uint64_t value, int64_t tokens, int64_t heads, int64_t head_dim,
    uint64_t k_cache, uint64_t v_cache, int64_t num_pages, int32_t layout_hnd,
    uint64_t batch_indices, uint64_t positions, uint64_t kv_indptr,
    int64_t kv_indptr_len, uint64_t kv_indices, int64_t kv_indices_len,
    uint64_t stream) {
  return guarded([&] {
    if (!module || !kernel)
      return reportHost(Status(StatusCode::InvalidArgument,
                               "append_kv: module and kernel must not be null"));
    HostAppendKVCall c;
    c.kernel = kernel;
    c.key = key;
    c.value = value;
    c.tokens = tokens;
    c.heads = heads;
    c.head_dim = head_dim;
    c.k_cache = k_cache;
    c.v_cache = v_cache;
    c.num_pages = num_pages;
    c.layout_hnd = layout_hnd;
    c.batch_indices = batch_indices;
    c.positions = positions;
    c.kv_indptr = {kv_indptr, kv_indptr_len};
    c.kv_indices = {kv_indices, kv_indices_len};
    c.stream = stream;
    return reportHost(
        hostAppendKV(reinterpret_cast<EmbeddedModule *>(module), c));
  });
}

attnRtStatus attnRtHostTakeStatus(const char **message) {
  // A bad page index is found by the kernel, after its call returned.
  if (firstHostFailure.ok())
    firstHostFailure = takeIndexErrors();
  hostMessage = firstHostFailure.message();
  auto code = static_cast<attnRtStatus>(firstHostFailure.code());
  firstHostFailure = Status::success();
  if (message)
    *message = hostMessage.c_str();
  return code;
}

attnRtStatus attnRtDeviceAllocManaged(size_t bytes, uint64_t *ptr) {
  return guarded([&] { return report(deviceAllocManaged(bytes, ptr)); });
}

attnRtStatus attnRtDeviceFree(uint64_t ptr) {
  return guarded([&] { return report(deviceFree(ptr)); });
}

attnRtStatus attnRtStreamSynchronize(uint64_t stream) {
  return guarded([&] { return report(streamSynchronize(stream)); });
}

void *mgpuMemAlloc(uint64_t bytes, void * /*stream*/, bool /*host_shared*/) {
  uint64_t ptr = 0;
  if (bytes == 0)
    return nullptr;
  guarded([&] { return reportHost(deviceAllocManaged(bytes, &ptr)); });
  return reinterpret_cast<void *>(ptr);
}

void mgpuMemFree(void *ptr, void * /*stream*/) {
  guarded([&] { return reportHost(deviceFree(uint64_t(ptr))); });
}
