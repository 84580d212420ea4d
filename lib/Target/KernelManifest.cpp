//===- KernelManifest.cpp - Writing the JSON kernel manifest --------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Field names follow the runtime's parser (lib/Runtime/Manifest.cpp). The
// decode kernel of one CTA per (KV head, request) is launched on a grid, not
// on the planner's work list: its entry says so under "launch" and names the
// grid, so a launcher never has to guess.
//
//===----------------------------------------------------------------------===//

#include "attn/Target/KernelManifest.h"

using namespace attn;
namespace json = llvm::json;

json::Object attn::getDecodeKernelManifest(const DecodeKernelSpec &spec,
                                           const KernelResourceUsage *usage) {
  KernelLaunchInfo info = getDecodeLaunchInfo(spec);
  json::Array args;
  for (const KernelArg &arg : info.args) {
    json::Object entry{{"name", arg.name}, {"kind", arg.kind}};
    if (!arg.elementType.empty())
      entry["dtype"] = arg.elementType;
    if (!arg.shape.empty())
      entry["shape"] = arg.shape;
    args.push_back(std::move(entry));
  }
  json::Object kernel{
      {"name", info.kernelName},
      {"role", "attention"},
      {"launch",
       json::Object{{"mode", "grid"},
                    {"grid", json::Array{info.gridX, info.gridY, "1"}}}},
      {"threads", info.blockDimX},
      {"shared_bytes", info.dynamicSharedMemBytes},
      {"dtype", stringifyDType(spec.dtype)},
      {"head_dim", spec.headDim},
      {"num_qo_heads", spec.numQoHeads},
      {"num_kv_heads", spec.numKVHeads},
      {"tile", json::Object{{"q", 1},
                            {"kv", DecodeKernelSpec::kTileTokens},
                            {"warps", spec.numWarps},
                            {"stages", spec.numStages},
                            {"gqa_pack", spec.groupSize()}}},
      {"format", json::Object{{"block_rows", 1},
                              {"block_cols", spec.pageSize},
                              {"layout", stringifyLayout(spec.layout)},
                              {"indexing", "paged"}}},
      {"lse_base", 2},
      {"args", std::move(args)},
  };
  if (usage)
    kernel["resources"] =
        json::Object{{"registers", usage->registers},
                     {"spill_store_bytes", usage->spillStoreBytes},
                     {"spill_load_bytes", usage->spillLoadBytes},
                     {"stack_frame_bytes", usage->stackFrameBytes},
                     {"static_shared_bytes", usage->sharedMemBytes}};
  return kernel;
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
