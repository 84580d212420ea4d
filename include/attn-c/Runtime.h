/*===- attn-c/Runtime.h - C API of the attn runtime ---------------*- C -*-===*\
|*                                                                            *|
|* Part of attn, an MLIR-based attention compiler for LLM inference serving.  *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* The runtime's C API for the Python package and other languages: plan,      *|
|* workspace sizing, module loading, plan upload, run and merge, and launches *|
|* of row kernels (merge_states, append_kv, copy_indices). Every function     *|
|* returns an attnRtStatus; on failure attnRtLastError() returns a message    *|
|* naming the bad input (thread-local, valid until the next call on the same  *|
|* thread). No function throws, allocates device memory, or synchronizes the  *|
|* host.                                                                      *|
|* Exported from libattn_runtime.so.                                          *|
|*                                                                            *|
|* The structs mirror attn/Runtime/Plan.h field for field; the work-list ABI  *|
|* the kernels read is documented there and in docs/Runtime.md.               *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef ATTN_C_RUNTIME_H
#define ATTN_C_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define ATTN_RT_EXPORT __declspec(dllexport)
#else
#define ATTN_RT_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Same numbers as attnrt::StatusCode. */
typedef enum attnRtStatus {
  ATTN_RT_OK = 0,
  ATTN_RT_INVALID_ARGUMENT = 1,
  ATTN_RT_NON_MONOTONE_INDPTR = 2,
  ATTN_RT_BLOCK_INDEX_OUT_OF_RANGE = 3,
  ATTN_RT_LAST_BLOCK_LEN_OUT_OF_RANGE = 4,
  ATTN_RT_HEAD_COUNT_MISMATCH = 5,
  ATTN_RT_WORKSPACE_TOO_SMALL = 6,
  ATTN_RT_GRAPH_MAXIMA_EXCEEDED = 7,
  ATTN_RT_MANIFEST_MISMATCH = 8,
  ATTN_RT_MANIFEST_PARSE_ERROR = 9,
  ATTN_RT_CUDA_UNAVAILABLE = 10,
  ATTN_RT_CUDA_ERROR = 11,
  ATTN_RT_NOT_FOUND = 12,
  ATTN_RT_UNSUPPORTED = 13
} attnRtStatus;

enum { ATTN_RT_MAX_TILE_CANDIDATES = 8 };
enum { ATTN_RT_KV_PAGED = 0, ATTN_RT_KV_RAGGED = 1 };
enum { ATTN_RT_ARG_PTR = 0, ATTN_RT_ARG_I32 = 1, ATTN_RT_ARG_I64 = 2, ATTN_RT_ARG_F32 = 3 };

typedef struct attnRtTileCandidate {
  int32_t q_rows, kv_tile, gqa_pack, cost_per_item, cost_per_kv_token;
  int32_t ctas_per_sm;      /* 0: the config's */
  int32_t min_chunk_tokens; /* 0: the config's */
} attnRtTileCandidate;

/* Mirrors attnrt::PlanConfig (see Plan.h for each field). */
typedef struct attnRtPlanConfig {
  int32_t num_qo_heads, num_kv_heads, head_dim;
  int32_t indexing; /* ATTN_RT_KV_PAGED | ATTN_RT_KV_RAGGED */
  int32_t block_size, causal, window_left, has_custom_mask;
  int32_t num_sms, ctas_per_sm, graph_mode, graph_candidate;
  int32_t max_batch, max_total_q_rows, min_chunk_tokens, disable_split;
  int32_t num_candidates;
  attnRtTileCandidate candidates[ATTN_RT_MAX_TILE_CANDIDATES];
  /* Batch-invariant split (appended after the candidates): > 0 cuts every
   * tile's keys at the multiples of this many tokens, rounded up to the KV
   * granule; 0 off. max_kv_tokens bounds the keys of a plan's tiles per head
   * group (decode: the batch's KV tokens), which sizes the work list. */
  int32_t fixed_split_tokens;
  int64_t max_kv_tokens;
  /* Appended after max_kv_tokens: > 0 caps the rows of the partial buffers
   * (split-KV scratch) below the grid's bound, 2 x CTAs x q_rows; the
   * planner then splits fewer tiles. 0: the bound. */
  int64_t max_partial_rows;
} attnRtPlanConfig;

/* Mirrors attnrt::PlanInputs (host arrays). */
typedef struct attnRtPlanInputs {
  int32_t batch;
  const int32_t *qo_indptr, *kv_indptr, *kv_last_len, *kv_lens, *kv_indices;
  int32_t num_cache_blocks;
} attnRtPlanInputs;

/* Counts of a made plan. */
typedef struct attnRtPlanSummary {
  int32_t num_ctas, num_items, num_merge_units, num_slots, candidate, tile_q,
      gqa_pack;
  size_t plan_bytes; /* bytes of the flat plan (attnRtUploadPlan copies the parts its counts cover) */
} attnRtPlanSummary;

/* One caller-bound kernel argument, matched by name against the manifest. */
typedef struct attnRtArg {
  const char *name;
  int32_t kind; /* ATTN_RT_ARG_* */
  union {
    uint64_t ptr;
    int32_t i32;
    int64_t i64;
    float f32;
  } value;
} attnRtArg;

typedef struct attnRtModule *attnRtModule_t;

ATTN_RT_EXPORT const char *attnRtLastError(void);
ATTN_RT_EXPORT const char *attnRtStatusName(attnRtStatus status);

/* Workspace sizing: host bytes (the flat plan and the planner's scratch) and
 * device bytes (plan + partials). */
ATTN_RT_EXPORT attnRtStatus attnRtPlanWorkspaceSize(const attnRtPlanConfig *config,
                                                    size_t *host_bytes,
                                                    size_t *device_bytes);
/* Plans one batch step into host_workspace (4-byte aligned). */
ATTN_RT_EXPORT attnRtStatus attnRtPlan(const attnRtPlanConfig *config,
                                       const attnRtPlanInputs *inputs,
                                       void *host_workspace, size_t host_bytes,
                                       attnRtPlanSummary *summary /* nullable */);
/* attnRtPlan, then the plan it wrote copied to device_workspace on `stream`
 * as attnRtUploadPlanSized does (device_bytes checked), in one call: what a
 * serving step does every time. The plan is not validated a second time
 * before the copy (it is this call's own output), which
 * attnRtUploadPlanSized must do for a buffer it is handed: at 256 decode
 * requests that check costs as much as planning. */
ATTN_RT_EXPORT attnRtStatus attnRtPlanAndUpload(
    const attnRtPlanConfig *config, const attnRtPlanInputs *inputs,
    void *host_workspace, size_t host_bytes, uint64_t device_workspace,
    size_t device_bytes, uint64_t stream,
    attnRtPlanSummary *summary /* nullable */);

/* What attnRtPlanAndUploadWith copies besides the plan, and with what.
 * Graph mode's fixed device buffers: the plan's qo_indptr, kv_indptr and
 * kv_last_len go to *_dst (0 skips one), and kv_indices_bytes of the page
 * table at kv_indices to kv_indices_dst (skipped when 0 or the same). A
 * copy_indices kernel (copy_module / copy_kernel; null: the driver's copies)
 * makes several copies in one launch; with reads_host (the host workspace is
 * pinned memory the device maps, attnRtHostIsDeviceMapped) that launch also
 * copies the plan, reading it from the host. `fence` (nullable, see
 * attnRtFenceCreate) is recorded after the last copy that reads the host
 * workspace: wait on it before the next plan rewrites it.
 * copy_table (nonzero: the address of a table in pinned host memory the
 * device maps, 8-byte aligned) defers every copy to a copy_by_table kernel
 * (copy_module / copy_kernel name it): the call writes the copies into the
 * table instead of queuing them, launches nothing and leaves the fence to
 * attnRtCopyByTable, which graph mode's run() captures once (the table's
 * copies, checked against copy_table_words, the capacity it launches
 * with). Zero-initialize, then fill. */
typedef struct attnRtUploadOptions {
  uint64_t qo_indptr_dst;
  uint64_t kv_indptr_dst;
  uint64_t kv_last_len_dst;
  uint64_t kv_indices;
  uint64_t kv_indices_dst;
  size_t kv_indices_bytes;
  attnRtModule_t copy_module;
  const char *copy_kernel;
  int32_t reads_host;
  struct attnRtFence *fence;
  uint64_t copy_table;
  int64_t copy_table_words;
} attnRtUploadOptions;

/* attnRtPlanAndUpload with `options` (nullable: none): the plan's copy and
 * graph mode's fixed-buffer copies queued on `stream` in as few driver calls
 * as they take (one launch, where the copy kernel holds them all and reads
 * the host; else a copy per part of the plan, then the fixed buffers in one
 * launch or a copy each), and options->fence recorded after those that
 * read the host workspace. */
ATTN_RT_EXPORT attnRtStatus attnRtPlanAndUploadWith(
    const attnRtPlanConfig *config, const attnRtPlanInputs *inputs,
    void *host_workspace, size_t host_bytes, uint64_t device_workspace,
    size_t device_bytes, const attnRtUploadOptions *options /* nullable */,
    uint64_t stream, attnRtPlanSummary *summary /* nullable */);

/* *mapped = 1 when the device reads host memory [host, host + bytes) at the
 * same addresses (cuMemHostAlloc / cudaHostAlloc / PyTorch's pin_memory under
 * unified addressing), else 0 (pageable memory is not an error). */
ATTN_RT_EXPORT attnRtStatus attnRtHostIsDeviceMapped(const void *host,
                                                     size_t bytes,
                                                     int32_t *mapped);

/* Loads a cubin/fatbin/PTX image with its manifest JSON (NUL-terminated). */
ATTN_RT_EXPORT attnRtStatus attnRtModuleLoad(const void *image, size_t image_bytes,
                                             const char *manifest_json,
                                             attnRtModule_t *module);
ATTN_RT_EXPORT attnRtStatus attnRtModuleLoadFiles(const char *image_path,
                                                  const char *manifest_path,
                                                  attnRtModule_t *module);
ATTN_RT_EXPORT void attnRtModuleDestroy(attnRtModule_t module);
/* Tile candidates of the module's attention kernels, in manifest order. */
ATTN_RT_EXPORT attnRtStatus attnRtModuleCandidates(attnRtModule_t module,
                                                   attnRtTileCandidate *out,
                                                   int32_t capacity,
                                                   int32_t *count);

/* The same, from a manifest alone (no image): what a planner needs before a
 * candidate's kernels are compiled or loaded. */
ATTN_RT_EXPORT attnRtStatus attnRtManifestCandidates(const char *manifest_json,
                                                     attnRtTileCandidate *out,
                                                     int32_t capacity,
                                                     int32_t *count);
/* The candidate attnRtPlan picks for a batch of `batch` requests holding
 * `total_q_rows` query tokens (the smallest tile that holds the average
 * packed query length); -1 when there is none, or when total_q_rows or
 * batch is outside [0, 2^31-1]. Graph mode fixes a candidate
 * for all plans: pick it with this from the first batch. */
ATTN_RT_EXPORT int32_t attnRtSelectTileCandidate(
    const attnRtTileCandidate *candidates, int32_t count, int64_t total_q_rows,
    int64_t batch);

/* The _Sized variants below take the device workspace's size (device_bytes,
 * e.g. attnRtPlanWorkspaceSize's) and refuse, with
 * ATTN_RT_WORKSPACE_TOO_SMALL, a workspace smaller than the plan and its
 * partial buffers reach, before anything is copied or launched; the
 * variants without it cannot check and trust the caller. Every variant
 * validates the host plan first (a corrupt or foreign buffer is
 * ATTN_RT_INVALID_ARGUMENT naming the bad field). */

/* One async host-to-device copy of the plan into the device workspace. */
ATTN_RT_EXPORT attnRtStatus attnRtUploadPlan(const void *host_workspace,
                                             size_t host_bytes,
                                             uint64_t device_workspace,
                                             uint64_t stream);
/* One plain async host-to-device copy of `bytes` on `stream` (the index
 * arrays a plan's kernels read, from pinned memory): cuMemcpyHtoDAsync, no
 * plan check. */
ATTN_RT_EXPORT attnRtStatus attnRtCopyToDevice(const void *host, size_t bytes,
                                               uint64_t device, uint64_t stream);
/* One async device-to-device copy of `bytes` on `stream` (a page table into
 * the fixed buffer a CUDA graph captured): cuMemcpyDtoDAsync. */
ATTN_RT_EXPORT attnRtStatus attnRtCopyOnDevice(uint64_t src, size_t bytes,
                                               uint64_t dst, uint64_t stream);
/* A fence over pinned host buffers that async copies read (a plan's host
 * workspace, refilled every step): attnRtFenceRecord marks the
 * work queued on `stream` so far, attnRtFenceWait blocks until that work has
 * run (returns at once before the first record). The CUDA event is created
 * at the first record, in the stream's context. */
typedef struct attnRtFence *attnRtFence_t;
ATTN_RT_EXPORT attnRtStatus attnRtFenceCreate(attnRtFence_t *fence);
ATTN_RT_EXPORT attnRtStatus attnRtFenceRecord(attnRtFence_t fence,
                                              uint64_t stream);
ATTN_RT_EXPORT attnRtStatus attnRtFenceWait(attnRtFence_t fence);
ATTN_RT_EXPORT void attnRtFenceDestroy(attnRtFence_t fence);
/* *capturing = 1 when `stream` is capturing a CUDA graph (a plan's uploads
 * queued now would be recorded into the graph, not run), else 0. */
/* Launches copy_by_table kernel `kernel` of `module` over the copy table at
 * `table` (what attnRtPlanAndUploadWith wrote with copy_table) with
 * `capacity_words` rows (a captured launch keeps them: at least every
 * table's words), then records `fence` (nullable): while `stream` captures a
 * graph, as the graph's event node, recorded at every replay. `staging`
 * (0: none) is a device buffer of the table's size (24 bytes a row) the
 * table is copied into first (a memcpy node in a capture) and the kernel
 * reads: its CTAs then read the table from device memory, not each across
 * the bus. */
ATTN_RT_EXPORT attnRtStatus attnRtCopyByTable(attnRtModule_t module,
                                              const char *kernel,
                                              const void *table,
                                              uint64_t staging,
                                              int64_t capacity_words,
                                              attnRtFence_t fence,
                                              uint64_t stream);
/* *id = the id of the graph capture `stream` is in, 0 when it is not
 * capturing (one capture from the next: graph mode copies once in each). */
ATTN_RT_EXPORT attnRtStatus attnRtStreamCaptureId(uint64_t stream,
                                                  uint64_t *id);
ATTN_RT_EXPORT attnRtStatus attnRtStreamIsCapturing(uint64_t stream,
                                                    int32_t *capturing);
/* Launches the attention kernel (and the merge kernel when needed; merge_kernel
 * may be NULL only when the plan never splits and is not in graph mode).
 * The plan binds the kernels' plan arguments, among them qo_indptr, kv_indptr
 * and kv_last_len (its copies of the arrays it was made from; docs/Manifest.md);
 * args binds the rest by name. */
ATTN_RT_EXPORT attnRtStatus attnRtRun(attnRtModule_t module,
                                      const char *attention_kernel,
                                      const char *merge_kernel,
                                      const void *host_workspace, size_t host_bytes,
                                      uint64_t device_workspace,
                                      const attnRtArg *args, int32_t num_args,
                                      uint64_t stream);
/* Launches only the merge kernel over the plan's merge map. */
ATTN_RT_EXPORT attnRtStatus attnRtMerge(attnRtModule_t module,
                                        const char *merge_kernel,
                                        const void *host_workspace,
                                        size_t host_bytes, uint64_t device_workspace,
                                        const attnRtArg *args, int32_t num_args,
                                        uint64_t stream);

/* attnRtUploadPlan, attnRtRun and attnRtMerge with the device workspace's
 * size checked. */
ATTN_RT_EXPORT attnRtStatus attnRtUploadPlanSized(const void *host_workspace,
                                                  size_t host_bytes,
                                                  uint64_t device_workspace,
                                                  size_t device_bytes,
                                                  uint64_t stream);
ATTN_RT_EXPORT attnRtStatus attnRtRunSized(
    attnRtModule_t module, const char *attention_kernel,
    const char *merge_kernel, const void *host_workspace, size_t host_bytes,
    uint64_t device_workspace, size_t device_bytes, const attnRtArg *args,
    int32_t num_args, uint64_t stream);
ATTN_RT_EXPORT attnRtStatus attnRtMergeSized(
    attnRtModule_t module, const char *merge_kernel,
    const void *host_workspace, size_t host_bytes, uint64_t device_workspace,
    size_t device_bytes, const attnRtArg *args, int32_t num_args,
    uint64_t stream);

/* Launches row kernel `kernel` (manifest role "merge_states", "append_kv" or
 * "copy_indices":
 * a grid-strided loop over independent rows, no plan) over num_rows rows.
 * The runtime binds the kernel's `num_rows` argument; args binds every other
 * one by name and must hold exactly those (a missing, mistyped, unknown or
 * repeated name, or one named num_rows, is refused). Grid min(ceil(num_rows
 * / rows_per_cta), SMs x ctas_per_sm), block `threads`, `shared_bytes` of
 * dynamic shared memory. ATTN_RT_INVALID_ARGUMENT for a kernel of another
 * role or num_rows outside [0, 2^31-1]; num_rows 0 launches nothing
 * (ATTN_RT_OK). Everything is checked before the launch. */
ATTN_RT_EXPORT attnRtStatus attnRtLaunchRows(attnRtModule_t module,
                                             const char *kernel,
                                             int64_t num_rows,
                                             const attnRtArg *args,
                                             int32_t num_args, uint64_t stream);

/*===-- Host-lowered programs -------------------------------------------===*\
 * What `attn-lower-host-calls` (docs/Embedding.md, "From one module to a
 * running program") emits calls to. A compiled program embeds its kernels as
 * one attnRtEmbeddedModule per image; the first call on it loads the module
 * (thread-safe, once; the manifest is parsed before that, so bad input is
 * refused without a GPU). Buffers are device pointers with their element
 * counts (index arrays: their lengths), checked against the manifest: a null
 * pointer, an attention's q, K, V or o not 16-byte aligned (its kernels move
 * 16-byte chunks of each row) or a size that disagrees with the kernel is
 * ATTN_RT_INVALID_ARGUMENT / ATTN_RT_MANIFEST_MISMATCH before anything is
 * launched, a kernel not in the manifest ATTN_RT_NOT_FOUND. Unlike the rest
 * of this API these entries may allocate (the per-image workspace) and
 * attnRtHostAttention synchronizes `stream` (below).
 *
 * Every entry also records its first failure per thread for
 * attnRtHostTakeStatus: generated code does not branch on the returned
 * status, so a program checks once after its compiled function returns. */
typedef struct attnRtEmbeddedModule {
  const void *image;         /* cubin, fatbin or PTX */
  uint64_t image_bytes;
  const char *manifest_json; /* NUL-terminated */
  void *state;               /* the runtime's; NULL in the image */
} attnRtEmbeddedModule;

/* attn.attention: plans the batch and runs it. `kernels` lists the
 * attention kernels, one per tile candidate in candidate order, separated by
 * commas; `merge_kernels` their merge kernels in the same order. causal and
 * window_left (< 0: none) are the planner's mask, from the kernels' band.
 * q, o: [rows, Hq, D]; lse: [rows, Hq]; caches: whole blocks of the
 * manifest's format; kv_indices and kv_last_len for paged kernels only (0
 * otherwise). The entry copies qo_indptr, kv_indptr and kv_last_len to the
 * host on `stream` and synchronizes it (the planner runs on the CPU).
 * workspace 0 (workspace_bytes ignored): the runtime's per-image device
 * workspace, allocated on first use and grown as batches need.
 * Paged kernels get num_pages (k_cache's pages) and the image's host-mapped
 * index_error word: a kv_indices entry outside [0, num_pages) reads page 0
 * and sets the word, which the next attnRtHostAttention on the image (after
 * its stream sync) or attnRtHostTakeStatus reports, and clears, as
 * ATTN_RT_BLOCK_INDEX_OUT_OF_RANGE.
 * mask: the custom mask, bit-packed little-endian with each request starting
 * on its own byte (mask_bytes: at least the sum of ceil(qo_len x kv_len / 8));
 * exactly for kernels that take `custom_mask`, 0 otherwise. The runtime
 * computes the kernels' `mask_indptr` from the index arrays.
 * num_params, param_names (comma-separated), param_values: the variants'
 * runtime parameters, exactly the kernels' variant arguments, each value's
 * slot read as the manifest types the argument (an f32's bits or an i32 in
 * the low 32 bits, or a device pointer). */
ATTN_RT_EXPORT attnRtStatus attnRtHostAttention(
    attnRtEmbeddedModule *module, const char *kernels,
    const char *merge_kernels, int32_t causal, int32_t window_left,
    uint64_t q, int64_t q_numel, uint64_t k_cache, int64_t k_cache_numel,
    uint64_t v_cache, int64_t v_cache_numel, uint64_t o, int64_t o_numel,
    uint64_t lse, int64_t lse_numel, uint64_t qo_indptr, int64_t qo_indptr_len,
    uint64_t kv_indptr, int64_t kv_indptr_len, uint64_t kv_indices,
    int64_t kv_indices_len, uint64_t kv_last_len, int64_t kv_last_len_len,
    uint64_t mask, int64_t mask_bytes, float sm_scale, int32_t num_params,
    const char *param_names, const uint64_t *param_values, uint64_t workspace,
    uint64_t workspace_bytes, uint64_t stream);

/* attn.merge_states over dense [tokens, heads, head_dim] states and output
 * and [tokens, heads] LSEs: num_states pointers in states and lses; mask 0
 * unless the kernel is the masked one. No synchronization. */
ATTN_RT_EXPORT attnRtStatus attnRtHostMergeStates(
    attnRtEmbeddedModule *module, const char *kernel, int32_t num_states,
    const uint64_t *states, const uint64_t *lses, int64_t tokens,
    int64_t heads, int64_t head_dim, uint64_t o, uint64_t lse, uint64_t mask,
    uint64_t stream);

/* attn.append_kv of dense [tokens, heads, head_dim] keys and values into
 * dense paged caches of num_pages pages ([pages, page, heads, D], or
 * [pages, heads, page, D] with layout_hnd = 1). No synchronization. */
ATTN_RT_EXPORT attnRtStatus attnRtHostAppendKV(
    attnRtEmbeddedModule *module, const char *kernel, uint64_t key,
    uint64_t value, int64_t tokens, int64_t heads, int64_t head_dim,
    uint64_t k_cache, uint64_t v_cache, int64_t num_pages, int32_t layout_hnd,
    uint64_t batch_indices, uint64_t positions, uint64_t kv_indptr,
    int64_t kv_indptr_len, uint64_t kv_indices, int64_t kv_indices_len,
    uint64_t stream);

/* The first failure of an attnRtHost* entry on this thread since the last
 * call (ATTN_RT_OK if none), its message in *message (may be NULL; valid
 * until the next attnRtHost* call on the thread); clears it. With none, a
 * set index_error word of any image (above) is the failure: call this after
 * synchronizing the stream the program ran on. */
ATTN_RT_EXPORT attnRtStatus attnRtHostTakeStatus(const char **message);

/* Managed device memory (one pointer for host and device), for programs
 * that fill inputs on the host; its release; a stream synchronization. */
ATTN_RT_EXPORT attnRtStatus attnRtDeviceAllocManaged(size_t bytes,
                                                     uint64_t *ptr);
ATTN_RT_EXPORT attnRtStatus attnRtDeviceFree(uint64_t ptr);
ATTN_RT_EXPORT attnRtStatus attnRtStreamSynchronize(uint64_t stream);

/* The allocation entries MLIR's gpu-to-llvm lowers gpu.alloc and gpu.dealloc
 * to, for the programs attn-lower-host-calls makes: a buffer such a program
 * allocates itself (a result without caller-given outs) is managed memory,
 * host_shared or not. A failure returns NULL and is the thread's
 * attnRtHostTakeStatus. (MLIR's own CUDA runtime wrappers define the same
 * two entries with the same meaning; a program may link either.) */
ATTN_RT_EXPORT void *mgpuMemAlloc(uint64_t bytes, void *stream,
                                  bool host_shared);
ATTN_RT_EXPORT void mgpuMemFree(void *ptr, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* ATTN_C_RUNTIME_H */
