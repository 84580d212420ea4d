//===- HostCalls.h - What host-lowered programs call ------------*- C++ -*-===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// The runtime side of `attn-lower-host-calls`: a compiled program embeds its
// kernels (image + manifest) as an EmbeddedModule and calls one entry per
// attn op (attnRtHostAttention, attnRtHostMergeStates, attnRtHostAppendKV
// in attn-c/Runtime.h) with the base pointers and element counts of its
// memrefs. Each entry checks everything it can against the manifest before
// it touches the driver, loads the module on first use (once per image,
// thread-safe), and then plans and launches with the ordinary
// plan/uploadPlan/run/launchRows.
//
// The attention entry copies the index arrays it plans from (qo_indptr,
// kv_indptr, kv_last_len) device-to-host on the stream and synchronizes the
// stream: the planner runs on the CPU. A workspace of 0 bytes selects one
// the runtime keeps per image (allocated on first use, grown when a batch
// needs more, never freed before exit).
//
// Paged attention kernels check every page index against the key cache's
// page count (`num_pages`, from k_cache's size) and set a word
// (`index_error`) instead of reading outside the cache. The word is
// host-mapped, one per image; a set word is reported, and cleared, as
// BlockIndexOutOfRange by the next attention call on the image (after its
// stream sync) or by takeIndexErrors (attnRtHostTakeStatus), whichever
// comes first.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_RUNTIME_HOSTCALLS_H
#define ATTN_RUNTIME_HOSTCALLS_H

#include "attn/Runtime/Launcher.h"
#include "attn/Runtime/Manifest.h"
#include "attn/Runtime/Status.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace attnrt {

/// attnRtEmbeddedModule, field for field: what the compiler emits per
/// image. `state` is the runtime's (null in the image).
struct EmbeddedModule {
  const void *image = nullptr;
  uint64_t image_bytes = 0;
  const char *manifest_json = nullptr;
  void *state = nullptr;
};

/// A device buffer of a host-lowered op: base pointer and element count.
struct HostBuffer {
  uint64_t ptr = 0;
  int64_t numel = 0;
};

struct HostAttentionCall {
  /// Comma-separated attention kernels (one per tile candidate, in
  /// candidate order) and their merge kernels, in the same order.
  std::string_view kernels, merge_kernels;
  int32_t causal = 0, window_left = -1;
  HostBuffer q, k_cache, v_cache, o, lse;
  HostBuffer qo_indptr, kv_indptr, kv_indices, kv_last_len; ///< numel: length
  /// The custom mask, bit-packed (numel: bytes); only for kernels that take
  /// `custom_mask`. The runtime makes their `mask_indptr`.
  HostBuffer mask;
  float sm_scale = 0;
  /// The variants' runtime parameters: `num_params` comma-separated names
  /// and one 64-bit slot each, read as the manifest types the argument
  /// (f32 bits or an i32 in the low bytes, or a device pointer).
  int32_t num_params = 0;
  std::string_view param_names;
  const uint64_t *param_values = nullptr;
  uint64_t workspace = 0, workspace_bytes = 0, stream = 0;
};

struct HostMergeStatesCall {
  std::string_view kernel;
  int32_t num_states = 0;
  const uint64_t *states = nullptr, *lses = nullptr;
  int64_t tokens = 0, heads = 0, head_dim = 0;
  uint64_t o = 0, lse = 0, mask = 0, stream = 0;
};

struct HostAppendKVCall {
  std::string_view kernel;
  uint64_t key = 0, value = 0;
  int64_t tokens = 0, heads = 0, head_dim = 0;
  uint64_t k_cache = 0, v_cache = 0;
  int64_t num_pages = 0;
  int32_t layout_hnd = 0; ///< 0: [pages, slot, head, dim]; 1: [pages, head, slot, dim]
  uint64_t batch_indices = 0, positions = 0;
  HostBuffer kv_indptr, kv_indices;
  uint64_t stream = 0;
};

/// The manifest of `m`, parsed once and kept in its state.
Status getEmbeddedManifest(EmbeddedModule *m, const Manifest **out);

/// The checks the entries make before the driver: null pointers, negative
/// or disagreeing sizes, kernels absent from the manifest or of another
/// role, heads and head dims that disagree with it, a mask or variant
/// parameters the kernels do not take (or missing ones). `kernels` receives
/// the attention kernels (and `merges` their merge kernels), in order;
/// `params` the variant parameters as kernel arguments (named by the
/// manifest, so the names outlive the call).
Status checkHostAttention(const Manifest &manifest, const HostAttentionCall &c,
                          std::vector<const KernelManifest *> *kernels,
                          std::vector<const KernelManifest *> *merges,
                          std::vector<KernelArg> *params);
Status checkHostMergeStates(const Manifest &manifest,
                            const HostMergeStatesCall &c);
Status checkHostAppendKV(const Manifest &manifest, const HostAppendKVCall &c);

/// The entries: checks, module load on first use, plan (attention), launch.
Status hostAttention(EmbeddedModule *m, const HostAttentionCall &c);
Status hostMergeStates(EmbeddedModule *m, const HostMergeStatesCall &c);
Status hostAppendKV(EmbeddedModule *m, const HostAppendKVCall &c);

/// The first set index_error word of any image (cleared), as
/// BlockIndexOutOfRange; success when none is set. Reads host memory only:
/// call it after the streams the kernels ran on are synchronized.
Status takeIndexErrors();

/// Device memory for programs and tests: managed memory (host and device
/// see the same pointer), its release, and a stream synchronization.
Status deviceAllocManaged(size_t bytes, uint64_t *ptr);
Status deviceFree(uint64_t ptr);
Status streamSynchronize(uint64_t stream);

} // namespace attnrt

#endif // ATTN_RUNTIME_HOSTCALLS_H
