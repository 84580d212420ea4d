//===- KernelManifest.cpp - Writing the JSON kernel manifest --------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Field names follow the runtime's parser (lib/Runtime/Manifest.cpp) and
// docs/Manifest.md: role, threads, shared_bytes, tile, format, cost,
// variant_params and the arguments in order, plus what ptxas reported.
//
//===----------------------------------------------------------------------===//

#include "attn/Target/KernelManifest.h"

using namespace attn;
namespace json = llvm::json;

/// The "args" array of a launch contract.
json::Array attn::getManifestArgs(const KernelLaunchInfo &info) {
  json::Array args;
  for (const KernelArg &arg : info.args) {
    json::Object entry{{"name", arg.name}, {"kind", arg.kind}};
    if (!arg.elementType.empty())
      entry["dtype"] = arg.elementType;
    if (!arg.shape.empty())
      entry["shape"] = arg.shape;
    args.push_back(std::move(entry));
  }
  return args;
}

void attn::addManifestResources(json::Object &kernel,
                                const KernelResourceUsage *usage) {
  if (usage)
    kernel["resources"] =
        json::Object{{"registers", usage->registers},
                     {"spill_store_bytes", usage->spillStoreBytes},
                     {"spill_load_bytes", usage->spillLoadBytes},
                     {"stack_frame_bytes", usage->stackFrameBytes},
                     {"static_shared_bytes", usage->sharedMemBytes}};
}

json::Object attn::getDecodeKernelManifest(
    const DecodeKernelSpec &spec,
    llvm::ArrayRef<std::pair<std::string, std::string>> params,
    const KernelResourceUsage *usage) {
  KernelLaunchInfo info = getDecodeLaunchInfo(spec, params);
  bool ragged = spec.indexing == KVIndexing::Ragged;
  json::Array variantParams;
  for (const auto &[name, kind] : params)
    variantParams.push_back(json::Object{{"name", name}, {"type", kind}});
  json::Array variants;
  for (const std::string &name : spec.variantNames)
    variants.push_back(name);
  json::Object kernel{
      {"name", info.kernelName},
      {"role", "attention"},
      {"threads", info.blockDimX},
      {"shared_bytes", info.dynamicSharedMemBytes},
      {"dtype", stringifyDType(spec.dtype)},
      {"head_dim", spec.headDim},
      {"num_qo_heads", spec.numQoHeads},
      {"num_kv_heads", spec.numKVHeads},
      {"tile", json::Object{{"q", DecodeKernelSpec::kTileRows},
                            {"kv", spec.kvTile},
                            {"warps", spec.numWarps},
                            {"stages", spec.numStages},
                            {"gqa_pack", spec.getGqaPack()}}},
      {"format", json::Object{{"block_rows", 1},
                              {"block_cols", ragged ? 1 : spec.pageSize},
                              {"layout", stringifyLayout(spec.layout)},
                              {"indexing", stringifyIndexing(spec.indexing)}}},
      // The persistent grid this kernel was built for: minCTAsPerSM CTAs
      // resident on every SM (what kept D1 at the copy bandwidth).
      {"ctas_per_sm", std::max<int64_t>(1, spec.minCTAsPerSM)},
      // Splitting KV below ~512 tokens costs more in merging than it gains
      // in balance (measured on the H200, bench/results/*split-decode.md).
      {"cost", json::Object{{"per_item", spec.costPerItem},
                            {"per_kv_token", spec.costPerKVToken},
                            {"min_chunk_tokens", 512}}},
      {"variants", std::move(variants)},
      {"variant_params", std::move(variantParams)},
      {"lse_base", 2},
      {"args", getManifestArgs(info)},
  };
  addManifestResources(kernel, usage);
  return kernel;
}

json::Object attn::getMergeKernelManifest(const MergeKernelSpec &spec,
                                          int64_t numQoHeads,
                                          int64_t numKVHeads,
                                          const KernelResourceUsage *usage) {
  KernelLaunchInfo info = getMergeLaunchInfo(spec);
  json::Object kernel{
      {"name", info.kernelName},
      {"role", "merge"},
      {"threads", info.blockDimX},
      {"shared_bytes", info.dynamicSharedMemBytes},
      {"dtype", stringifyDType(spec.dtype)},
      {"head_dim", spec.headDim},
      {"num_qo_heads", numQoHeads},
      {"num_kv_heads", numKVHeads},
      // One CTA per (merge unit, merge_rows_per_cta rows).
      {"merge_ctas", "unit_rows"},
      {"merge_rows_per_cta", spec.rowsPerCta},
      // Waits with griddepcontrol.wait: may be launched as a programmatic
      // dependent of the attention grid.
      {"pdl", spec.usesPDL() ? 1 : 0},
      {"lse_base", 2},
      {"args", getManifestArgs(info)},
  };
  if (spec.outputTransform) {
    json::Array variants, variantParams;
    for (const std::string &name : spec.variantNames)
      variants.push_back(name);
    for (const auto &[name, kind] : spec.params)
      variantParams.push_back(json::Object{{"name", name}, {"type", kind}});
    kernel["variants"] = std::move(variants);
    kernel["variant_params"] = std::move(variantParams);
    kernel["output_transform"] = true;
  }
  addManifestResources(kernel, usage);
  return kernel;
}

/// The ptxas report of `kernelName` in `usage`, or null.
const KernelResourceUsage *
attn::findResourceUsage(llvm::ArrayRef<KernelResourceUsage> usage,
                        llvm::StringRef kernelName) {
  for (const KernelResourceUsage &k : usage)
    if (k.kernelName == kernelName)
      return &k;
  return nullptr;
}

json::Object attn::getManifest(const NVPTXOptions &options,
                               json::Array kernels, llvm::StringRef cubinFile,
                               llvm::StringRef ptxFile) {
  json::Object doc{{"attn_manifest_version", 1},
                   {"compiler_version", "attn-gen-kernel 0.1"},
                   {"arch", options.chip},
                   {"ptx_features", options.getFeatures()},
                   {"kernels", std::move(kernels)}};
  if (!cubinFile.empty())
    doc["cubin"] = cubinFile.str();
  if (!ptxFile.empty())
    doc["ptx"] = ptxFile.str();
  return doc;
}
