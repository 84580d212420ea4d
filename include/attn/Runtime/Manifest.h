//===- Manifest.h - Kernel manifest schema and parser -----------*- C++ -*-===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// The compiler writes a JSON manifest next to every cubin/PTX it emits; the
// runtime reads it so that it never guesses a kernel's ABI: the argument list
// (names, kinds, order), threads, dynamic shared memory, tile, KV format,
// dtypes, head configuration and arch. docs/Manifest.md is the schema. The
// parser is a small dependency-free JSON reader (lib/Runtime/Json.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_RUNTIME_MANIFEST_H
#define ATTN_RUNTIME_MANIFEST_H

#include "attn/Runtime/Plan.h"
#include "attn/Runtime/Status.h"

#include <string>
#include <string_view>
#include <vector>

namespace attnrt {

constexpr int32_t kManifestVersion = 1;

/// Kind of one kernel parameter, as the manifest's "kind" string names it.
/// TensorMap: a 128-byte CUtensorMap passed by value, which the launcher
/// encodes from the buffer argument the manifest names as its "source"
/// (never passed by a caller; TensorMap.h).
enum class ArgKind : int32_t { Ptr = 0, I32 = 1, I64 = 2, F32 = 3, TensorMap = 4 };

/// Kernel role: "attention" runs the work list, "merge" runs the merge map;
/// the row kernels "merge_states" (merge N attention states by LSE),
/// "append_kv" (write new K/V tokens into a paged cache) and "copy_indices"
/// (int32 arrays into other buffers, rows of one word) loop over `num_rows`
/// independent rows and take no plan (launchRows).
enum class KernelRole : int32_t {
  Attention = 0,
  Merge = 1,
  MergeStates = 2,
  AppendKV = 3,
  CopyIndices = 4
};

/// Whether kernels of `role` are row kernels (launched by launchRows).
inline bool isRowKernel(KernelRole role) {
  return role == KernelRole::MergeStates || role == KernelRole::AppendKV ||
         role == KernelRole::CopyIndices;
}

/// Parameter names the runtime binds from the plan (docs/Manifest.md). Every
/// other parameter is bound by name from the caller's arguments.
namespace plan_args {
constexpr const char *kPlan = "plan";               ///< flat plan (header first)
constexpr const char *kCtaIndptr = "cta_indptr";
constexpr const char *kWorkItems = "work_items";
constexpr const char *kMergeIndptr = "merge_indptr";
constexpr const char *kMergeUnits = "merge_units";
constexpr const char *kPartialO = "partial_o";
constexpr const char *kPartialLse = "partial_lse";
/// The plan's copies of the index arrays it was made from (Plan.h): a
/// caller's arguments of these names are not read.
constexpr const char *kQoIndptr = "qo_indptr";
constexpr const char *kKvIndptr = "kv_indptr";
constexpr const char *kKvLastLen = "kv_last_len";
constexpr const char *kSlotRows = "slot_rows"; ///< i32: row stride of a partial slot
/// i32: the rows a row kernel loops over; launchRows binds it, not the caller.
constexpr const char *kNumRows = "num_rows";
} // namespace plan_args

/// A merge kernel's launch shape (manifest "merge_ctas"): `Units` one CTA
/// per merge unit, grid min(units, max_ctas); `UnitRows` one CTA per (unit,
/// merge_rows_per_cta rows), grid units * ceil(slot_rows / rows_per_cta).
/// Graph mode: max_ctas either way (the kernel is grid-strided).
enum class MergeGrid : int32_t { Units = 0, UnitRows = 1 };

struct ManifestArg {
  std::string name;
  ArgKind kind = ArgKind::Ptr;
  /// TensorMap: the pointer argument whose rows the map describes, and the
  /// keys of one box (TensorMap.h).
  std::string source;
  int32_t box_rows = 0;
};

struct ManifestVariantParam {
  std::string name;
  ArgKind type = ArgKind::F32;
};

struct KernelManifest {
  std::string name;
  KernelRole role = KernelRole::Attention;
  int32_t threads = 0;
  int32_t shared_bytes = 0; ///< dynamic shared memory
  // "tile": attention kernels only.
  int32_t tile_q = 0, tile_kv = 0, warps = 0, stages = 0, gqa_pack = 1;
  /// "kv_tma" (optional): whole K/V tiles arrive by TMA through the
  /// kernel's tensor-map arguments.
  bool kv_tma = false;
  // "format".
  int32_t block_rows = 1, block_cols = 1;
  KVLayout layout = KVLayout::NHD;
  KVIndexing indexing = KVIndexing::Paged;
  std::string dtype;        ///< "bf16" | "f16" | "f32"
  int32_t head_dim = 0, num_qo_heads = 0, num_kv_heads = 0;
  // "cost" (optional): the planner's TileCandidate cost model.
  int32_t cost_per_item = 0, cost_per_kv_token = 1, min_chunk_tokens = 0;
  /// "ctas_per_sm" (optional): CTAs the kernel keeps resident per SM.
  int32_t ctas_per_sm = 1;
  /// "rows_per_cta" (row kernels, >= 1 there): rows one CTA takes per step
  /// of its grid-strided loop; 0 for the other roles.
  int32_t rows_per_cta = 0;
  std::vector<ManifestVariantParam> variant_params;
  std::vector<ManifestArg> args;
  // Merge kernels: "merge_ctas" (the launch shape) and "pdl".
  MergeGrid merge_grid = MergeGrid::Units;
  int32_t merge_rows_per_cta = 1; ///< "merge_rows_per_cta" (UnitRows)
  /// The kernel waits (griddepcontrol.wait) for the grid before it: the
  /// runtime may launch it with programmatic stream serialization.
  bool pdl = false;

  /// The planner candidate this kernel implements.
  TileCandidate candidate() const {
    return {tile_q, tile_kv, gqa_pack, cost_per_item, cost_per_kv_token,
            ctas_per_sm, min_chunk_tokens};
  }
  /// Index of the argument named `n`, or -1.
  int32_t argIndex(std::string_view n) const;
};

struct Manifest {
  int32_t version = 0;
  std::string compiler_version;
  std::string arch; ///< "sm_80", "sm_90", "sm_90a", ...
  std::vector<KernelManifest> kernels;

  const KernelManifest *find(std::string_view name) const;
};

/// Parses and validates a manifest (required fields, known enums, role-specific
/// plan arguments present, no duplicate names).
Status parseManifest(std::string_view json, Manifest *out);

/// Parses "sm_XY[a]" into the compute capability X*10+Y; -1 on bad input.
int32_t archComputeCapability(std::string_view arch);

const char *argKindName(ArgKind k);
/// The manifest's spelling of `role` ("attention", "merge_states", ...).
const char *kernelRoleName(KernelRole role);

} // namespace attnrt

#endif // ATTN_RUNTIME_MANIFEST_H
