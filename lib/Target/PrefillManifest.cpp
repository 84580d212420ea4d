//===- PrefillManifest.cpp - Manifest entry of a prefill kernel -----------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Field names follow docs/Manifest.md and the runtime's parser. The planner's
// cost model defaults to one unit per key for a whole tile plus a fixed cost
// of about two tiles' worth of keys (Q load, epilogue) per item.
//
//===----------------------------------------------------------------------===//

#include "attn/Target/PrefillManifest.h"
#include "attn/Target/KernelManifest.h"

using namespace attn;
namespace json = llvm::json;

json::Object attn::getPrefillKernelManifest(const PrefillKernelSpec &spec,
                                            const KernelResourceUsage *usage) {
  KernelLaunchInfo info = getPrefillLaunchInfo(spec);
  json::Array variantParams, variants;
  for (const PrefillVariantParam &p : spec.variantParams)
    variantParams.push_back(json::Object{{"name", p.name}, {"type", p.kind}});
  for (const std::string &name : spec.variantNames)
    variants.push_back(name);
  int64_t perToken = spec.costPerKVToken > 0 ? spec.costPerKVToken : 1;
  int64_t perItem =
      spec.costPerItem > 0 ? spec.costPerItem : 2 * spec.tileKV * perToken;
  json::Object kernel{
      {"name", info.kernelName},
      {"role", "attention"},
      {"threads", info.blockDimX},
      {"shared_bytes", info.dynamicSharedMemBytes},
      {"dtype", stringifyDType(spec.dtype)},
      {"head_dim", spec.headDim},
      {"num_qo_heads", spec.numQoHeads},
      {"num_kv_heads", spec.numKVHeads},
      {"tile", json::Object{{"q", spec.tileQ},
                            {"kv", spec.tileKV},
                            {"warps", spec.getNumWarps()},
                            {"stages", spec.numStages},
                            {"gqa_pack", spec.gqaPack}}},
      {"format", json::Object{{"block_rows", spec.tileQ},
                              {"block_cols", spec.getPageSize()},
                              {"layout", stringifyLayout(spec.layout)},
                              {"indexing", stringifyIndexing(spec.indexing)}}},
      {"ctas_per_sm", std::max<int64_t>(1, spec.minCTAsPerSM)},
      {"cost", json::Object{{"per_item", perItem},
                            {"per_kv_token", perToken}}},
      {"variants", std::move(variants)},
      {"variant_params", std::move(variantParams)},
      {"lse_base", 2},
      {"args", getManifestArgs(info)},
  };
  addManifestResources(kernel, usage);
  return kernel;
}
