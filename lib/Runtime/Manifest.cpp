//===- Manifest.cpp - Kernel manifest parser and validation ---------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Reads the JSON manifest the compiler writes next to a cubin (docs/Manifest.md)
// into KernelManifest records and checks everything the launcher relies on:
// required fields and their types, enum spellings, and that each kernel takes
// the plan arguments its role needs (a row kernel: num_rows).
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/Manifest.h"

#include "Json.h"

#include <cmath>
#include <iterator>
#include <set>

namespace attnrt {

using json::Value;

const char *argKindName(ArgKind k) {
  switch (k) {
  case ArgKind::Ptr: return "ptr";
  case ArgKind::I32: return "i32";
  case ArgKind::I64: return "i64";
  case ArgKind::F32: return "f32";
  case ArgKind::TensorMap: return "tensormap";
  }
  return "?";
}

const char *kernelRoleName(KernelRole role) {
  switch (role) {
  case KernelRole::Attention: return "attention";
  case KernelRole::Merge: return "merge";
  case KernelRole::MergeStates: return "merge_states";
  case KernelRole::AppendKV: return "append_kv";
  case KernelRole::CopyIndices: return "copy_indices";
  }
  return "?";
}

int32_t KernelManifest::argIndex(std::string_view n) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == n)
      return int32_t(i);
  return -1;
}

const KernelManifest *Manifest::find(std::string_view name) const {
  for (const KernelManifest &k : kernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

int32_t archComputeCapability(std::string_view arch) {
  if (arch.size() < 5 || arch.substr(0, 3) != "sm_")
    return -1;
  std::string_view digits = arch.substr(3);
  if (!digits.empty() && digits.back() == 'a')
    digits.remove_suffix(1);
  if (digits.size() < 2 || digits.size() > 3)
    return -1;
  int32_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

namespace {

/// Field readers that record the first error with the field's path.
struct Reader {
  std::string error;

  bool fail(const std::string &msg) {
    if (error.empty())
      error = msg;
    return false;
  }
  bool getInt(const Value &obj, const char *key, const std::string &where,
              int32_t *out, bool required = true) {
    const Value *v = obj.get(key);
    if (!v)
      return required ? fail(where + ": missing \"" + key + "\"") : true;
    if (v->kind != Value::Kind::Number || v->number != std::floor(v->number) ||
        std::fabs(v->number) > 2147483647.0)
      return fail(where + ": \"" + key + "\" must be an integer");
    *out = int32_t(v->number);
    return true;
  }
  bool getString(const Value &obj, const char *key, const std::string &where,
                 std::string *out, bool required = true) {
    const Value *v = obj.get(key);
    if (!v)
      return required ? fail(where + ": missing \"" + key + "\"") : true;
    if (v->kind != Value::Kind::String)
      return fail(where + ": \"" + key + "\" must be a string");
    *out = v->string;
    return true;
  }
  bool kind(const std::string &s, const std::string &where, ArgKind *out) {
    if (s == "ptr") *out = ArgKind::Ptr;
    else if (s == "i32") *out = ArgKind::I32;
    else if (s == "i64") *out = ArgKind::I64;
    else if (s == "f32") *out = ArgKind::F32;
    else if (s == "tensormap") *out = ArgKind::TensorMap;
    else return fail(where + ": unknown kind \"" + s +
                     "\" (ptr, i32, i64, f32, tensormap)");
    return true;
  }
};

/// Whether `name` can name a kernel symbol or an argument: non-empty, at
/// most 1024 bytes, no NUL, control or space characters (a NUL would cut the
/// name the driver looks up short of the one the manifest lists).
bool isSymbolName(const std::string &name) {
  if (name.empty() || name.size() > 1024)
    return false;
  for (unsigned char c : name)
    if (c <= 0x20 || c == 0x7f)
      return false;
  return true;
}

/// "format": required for attention kernels, optional for row kernels
/// (append_kv's page size and layout), the same rules either way.
bool parseFormat(Reader &r, const Value &fmt, const std::string &where,
                 KernelManifest *out) {
  std::string fw = where + ".format", layout, indexing;
  if (fmt.kind != Value::Kind::Object)
    return r.fail(fw + " must be an object");
  if (!r.getInt(fmt, "block_rows", fw, &out->block_rows) ||
      !r.getInt(fmt, "block_cols", fw, &out->block_cols) ||
      !r.getString(fmt, "layout", fw, &layout) ||
      !r.getString(fmt, "indexing", fw, &indexing))
    return false;
  if (out->block_rows < 0 || out->block_cols < 1)
    return r.fail(fw + ": block_rows must be >= 0 and block_cols >= 1");
  if (layout == "NHD") out->layout = KVLayout::NHD;
  else if (layout == "HND") out->layout = KVLayout::HND;
  else return r.fail(fw + ": layout must be NHD or HND");
  if (indexing == "paged") out->indexing = KVIndexing::Paged;
  else if (indexing == "ragged") out->indexing = KVIndexing::Ragged;
  else return r.fail(fw + ": indexing must be paged or ragged");
  return true;
}

bool parseKernel(Reader &r, const Value &k, size_t index, KernelManifest *out) {
  std::string where = "kernels[" + std::to_string(index) + "]";
  if (k.kind != Value::Kind::Object)
    return r.fail(where + " must be an object");
  if (!r.getString(k, "name", where, &out->name))
    return false;
  if (!isSymbolName(out->name))
    return r.fail(where + ": \"name\" must be 1 to 1024 characters without "
                          "NUL, control characters or spaces");
  where += " (" + out->name + ")";
  std::string role;
  if (!r.getString(k, "role", where, &role))
    return false;
  if (role == "attention") out->role = KernelRole::Attention;
  else if (role == "merge") out->role = KernelRole::Merge;
  else if (role == "merge_states") out->role = KernelRole::MergeStates;
  else if (role == "append_kv") out->role = KernelRole::AppendKV;
  else if (role == "copy_indices") out->role = KernelRole::CopyIndices;
  else return r.fail(where + ": role must be \"attention\", \"merge\", "
                             "\"merge_states\", \"append_kv\" or "
                             "\"copy_indices\"");
  const bool rows = isRowKernel(out->role);
  if (!r.getInt(k, "threads", where, &out->threads) ||
      !r.getInt(k, "shared_bytes", where, &out->shared_bytes))
    return false;
  if (out->threads <= 0 || out->threads > 1024 || out->shared_bytes < 0)
    return r.fail(where + ": threads must be in [1, 1024], shared_bytes >= 0");
  if (!r.getString(k, "dtype", where, &out->dtype))
    return false;
  // copy_indices copies words: i32 rows of one element.
  const bool words = out->role == KernelRole::CopyIndices;
  if (words ? out->dtype != "i32"
            : out->dtype != "bf16" && out->dtype != "f16" && out->dtype != "f32")
    return r.fail(where + (words ? ": a copy_indices kernel's dtype is i32"
                                 : ": dtype must be bf16, f16 or f32"));
  if (!r.getInt(k, "head_dim", where, &out->head_dim) ||
      !r.getInt(k, "num_qo_heads", where, &out->num_qo_heads) ||
      !r.getInt(k, "num_kv_heads", where, &out->num_kv_heads))
    return false;
  // Row kernels take their heads as a runtime argument: 0 there means "any".
  if (rows) {
    if (out->head_dim <= 0 || out->num_qo_heads < 0 || out->num_kv_heads < 0 ||
        (out->num_qo_heads > 0 && out->num_kv_heads > 0 &&
         out->num_qo_heads % out->num_kv_heads))
      return r.fail(where + ": head_dim must be positive, head counts >= 0 "
                            "and num_qo_heads a multiple of num_kv_heads");
  } else if (out->head_dim <= 0 || out->num_qo_heads <= 0 ||
             out->num_kv_heads <= 0 || out->num_qo_heads % out->num_kv_heads) {
    return r.fail(where + ": head_dim and head counts must be positive, "
                          "num_qo_heads a multiple of num_kv_heads");
  }
  if (out->role == KernelRole::Attention) {
    const Value *tile = k.get("tile");
    if (!tile || tile->kind != Value::Kind::Object)
      return r.fail(where + ": attention kernel needs a \"tile\" object");
    std::string tw = where + ".tile";
    if (!r.getInt(*tile, "q", tw, &out->tile_q) ||
        !r.getInt(*tile, "kv", tw, &out->tile_kv) ||
        !r.getInt(*tile, "warps", tw, &out->warps, false) ||
        !r.getInt(*tile, "stages", tw, &out->stages, false) ||
        !r.getInt(*tile, "gqa_pack", tw, &out->gqa_pack, false))
      return false;
    if (const Value *tma = tile->get("kv_tma")) {
      if (tma->kind != Value::Kind::Bool)
        return r.fail(tw + ": \"kv_tma\" must be true or false");
      out->kv_tma = tma->boolean;
    }
    if (out->tile_q <= 0 || out->tile_kv <= 0 || out->gqa_pack <= 0 ||
        (out->num_qo_heads / out->num_kv_heads) % out->gqa_pack)
      return r.fail(tw + ": q, kv must be positive and gqa_pack divide the "
                         "GQA group");
    const Value *fmt = k.get("format");
    if (!fmt || fmt->kind != Value::Kind::Object)
      return r.fail(where + ": attention kernel needs a \"format\" object");
    if (!parseFormat(r, *fmt, where, out))
      return false;
    if (const Value *cost = k.get("cost")) {
      std::string cw = where + ".cost";
      if (!r.getInt(*cost, "per_item", cw, &out->cost_per_item) ||
          !r.getInt(*cost, "per_kv_token", cw, &out->cost_per_kv_token) ||
          !r.getInt(*cost, "min_chunk_tokens", cw, &out->min_chunk_tokens,
                    false))
        return false;
      if (out->cost_per_item < 0 || out->cost_per_kv_token <= 0 ||
          out->min_chunk_tokens < 0)
        return r.fail(cw + ": per_item >= 0, per_kv_token >= 1 and "
                           "min_chunk_tokens >= 0");
    }
  }
  if (rows) {
    if (const Value *fmt = k.get("format"))
      if (!parseFormat(r, *fmt, where, out))
        return false;
    if (!r.getInt(k, "rows_per_cta", where, &out->rows_per_cta))
      return false;
    if (out->rows_per_cta < 1)
      return r.fail(where + ": rows_per_cta must be >= 1");
  }
  // The persistent grid's CTAs per SM: attention kernels and row kernels.
  if (out->role != KernelRole::Merge) {
    if (!r.getInt(k, "ctas_per_sm", where, &out->ctas_per_sm, false))
      return false;
    if (out->ctas_per_sm < 1 || out->ctas_per_sm > 64)
      return r.fail(where + ": ctas_per_sm must be in [1, 64]");
  }
  if (out->role == KernelRole::Merge) {
    std::string grid = "units";
    int32_t pdl = 0;
    if (!r.getString(k, "merge_ctas", where, &grid, false) ||
        !r.getInt(k, "pdl", where, &pdl, false) ||
        !r.getInt(k, "merge_rows_per_cta", where, &out->merge_rows_per_cta,
                  false))
      return false;
    if (out->merge_rows_per_cta < 1)
      return r.fail(where + ": merge_rows_per_cta must be >= 1");
    if (grid == "units") out->merge_grid = MergeGrid::Units;
    else if (grid == "unit_rows") out->merge_grid = MergeGrid::UnitRows;
    else return r.fail(where + ": merge_ctas must be \"units\" or \"unit_rows\"");
    if (pdl != 0 && pdl != 1)
      return r.fail(where + ": pdl must be 0 or 1");
    out->pdl = pdl == 1;
  }
  if (const Value *vp = k.get("variant_params")) {
    if (vp->kind != Value::Kind::Array)
      return r.fail(where + ": variant_params must be an array");
    for (size_t i = 0; i < vp->array.size(); ++i) {
      std::string pw = where + ".variant_params[" + std::to_string(i) + "]";
      ManifestVariantParam p;
      std::string type;
      if (!r.getString(vp->array[i], "name", pw, &p.name) ||
          !r.getString(vp->array[i], "type", pw, &type) || !r.kind(type, pw, &p.type))
        return false;
      if (p.type == ArgKind::TensorMap)
        return r.fail(pw + ": a variant parameter is ptr, i32, i64 or f32");
      out->variant_params.push_back(std::move(p));
    }
  }
  const Value *args = k.get("args");
  if (!args || args->kind != Value::Kind::Array)
    return r.fail(where + ": missing \"args\" array");
  std::set<std::string> seen;
  for (size_t i = 0; i < args->array.size(); ++i) {
    std::string aw = where + ".args[" + std::to_string(i) + "]";
    ManifestArg a;
    std::string kind;
    if (!r.getString(args->array[i], "name", aw, &a.name) ||
        !r.getString(args->array[i], "kind", aw, &kind) || !r.kind(kind, aw, &a.kind))
      return false;
    if (!isSymbolName(a.name))
      return r.fail(aw + ": \"name\" must be 1 to 1024 characters without "
                         "NUL, control characters or spaces");
    if (!seen.insert(a.name).second)
      return r.fail(aw + ": duplicate argument name \"" + a.name + "\"");
    if (a.kind == ArgKind::TensorMap &&
        (!r.getString(args->array[i], "source", aw, &a.source) ||
         !r.getInt(args->array[i], "box_rows", aw, &a.box_rows)))
      return false;
    if (a.kind == ArgKind::TensorMap && (a.box_rows < 8 || a.box_rows > 256 ||
                                         a.box_rows % 8))
      return r.fail(aw + ": \"box_rows\" must be a multiple of 8 in [8, 256]");
    out->args.push_back(std::move(a));
  }
  // A tensor map describes a buffer the kernel also takes, by pointer.
  for (const ManifestArg &a : out->args) {
    if (a.kind != ArgKind::TensorMap)
      continue;
    int32_t s = out->argIndex(a.source);
    if (out->role != KernelRole::Attention)
      return r.fail(where + ": tensor map \"" + a.name +
                    "\" in a kernel that is not an attention kernel");
    if (s < 0 || out->args[s].kind != ArgKind::Ptr)
      return r.fail(where + ": tensor map \"" + a.name + "\" describes \"" +
                    a.source + "\", which is not a ptr argument of the kernel");
  }
  // The runtime-bound arguments each role cannot work without.
  struct Required {
    const char *name;
    ArgKind kind;
  };
  static const Required attention[] = {{plan_args::kPlan, ArgKind::Ptr},
                                       {plan_args::kCtaIndptr, ArgKind::Ptr},
                                       {plan_args::kWorkItems, ArgKind::Ptr},
                                       {plan_args::kPartialO, ArgKind::Ptr},
                                       {plan_args::kPartialLse, ArgKind::Ptr}};
  static const Required merge[] = {{plan_args::kPlan, ArgKind::Ptr},
                                   {plan_args::kMergeIndptr, ArgKind::Ptr},
                                   {plan_args::kMergeUnits, ArgKind::Ptr},
                                   {plan_args::kPartialO, ArgKind::Ptr},
                                   {plan_args::kPartialLse, ArgKind::Ptr}};
  static const Required rowArgs[] = {{plan_args::kNumRows, ArgKind::I32}};
  const Required *first = rowArgs, *last = std::end(rowArgs);
  if (out->role == KernelRole::Attention)
    first = attention, last = std::end(attention);
  else if (out->role == KernelRole::Merge)
    first = merge, last = std::end(merge);
  for (const Required *it = first; it != last; ++it) {
    const Required &q = *it;
    int32_t i = out->argIndex(q.name);
    if (i < 0)
      return r.fail(where + ": a " + role + " kernel must take argument \"" +
                    q.name + "\"");
    if (out->args[i].kind != q.kind)
      return r.fail(where + ": argument \"" + q.name + "\" must be " +
                    (q.kind == ArgKind::Ptr ? "a " : "an ") +
                    argKindName(q.kind));
  }
  if (out->args.size() > 64)
    return r.fail(where + ": more than 64 arguments");
  return true;
}

} // namespace

Status parseManifest(std::string_view text, Manifest *out) {
  if (!out)
    return Status(StatusCode::InvalidArgument, "manifest output is null");
  Value doc;
  std::string err;
  if (!json::parse(text, &doc, &err))
    return Status(StatusCode::ManifestParseError, "manifest JSON: " + err);
  if (doc.kind != Value::Kind::Object)
    return Status(StatusCode::ManifestParseError, "manifest must be a JSON object");
  Reader r;
  Manifest m;
  if (!r.getInt(doc, "attn_manifest_version", "manifest", &m.version) ||
      !r.getString(doc, "arch", "manifest", &m.arch) ||
      !r.getString(doc, "compiler_version", "manifest", &m.compiler_version, false))
    return Status(StatusCode::ManifestParseError, r.error);
  if (m.version != kManifestVersion)
    return Status(StatusCode::ManifestMismatch,
                  "manifest version " + std::to_string(m.version) +
                      " is not the supported version " +
                      std::to_string(kManifestVersion));
  if (archComputeCapability(m.arch) < 0)
    return Status(StatusCode::ManifestParseError,
                  "manifest arch \"" + m.arch + "\" is not of the form sm_XY[a]");
  const Value *kernels = doc.get("kernels");
  if (!kernels || kernels->kind != Value::Kind::Array || kernels->array.empty())
    return Status(StatusCode::ManifestParseError,
                  "manifest needs a non-empty \"kernels\" array");
  std::set<std::string> names;
  for (size_t i = 0; i < kernels->array.size(); ++i) {
    KernelManifest k;
    if (!parseKernel(r, kernels->array[i], i, &k))
      return Status(StatusCode::ManifestParseError, r.error);
    if (!names.insert(k.name).second)
      return Status(StatusCode::ManifestParseError,
                    "duplicate kernel name \"" + k.name + "\"");
    m.kernels.push_back(std::move(k));
  }
  *out = std::move(m);
  return Status::success();
}

} // namespace attnrt
