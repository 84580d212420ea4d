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
#include "attn/Version.h"
#include "attn/Dialect/Attn/IR/Attn.h"
#include "attn/Dialect/Attn/IR/TileLayout.h"
#include "attn/Dialect/Attn/Transforms/KernelSignature.h"

using namespace mlir::attn;
namespace json = llvm::json;

void mlir::attn::addManifestResources(json::Object &kernel,
                                      const KernelResourceUsage *usage) {
  if (usage)
    kernel["resources"] =
        json::Object{{"registers", usage->registers},
                     {"spill_store_bytes", usage->spillStoreBytes},
                     {"spill_load_bytes", usage->spillLoadBytes},
                     {"stack_frame_bytes", usage->stackFrameBytes},
                     {"static_shared_bytes", usage->sharedMemBytes}};
}

/// The ptxas report of `kernelName` in `usage`, or null.
const KernelResourceUsage *
mlir::attn::findResourceUsage(llvm::ArrayRef<KernelResourceUsage> usage,
                              llvm::StringRef kernelName) {
  for (const KernelResourceUsage &k : usage)
    if (k.kernelName == kernelName)
      return &k;
  return nullptr;
}

json::Object mlir::attn::getManifest(const NVPTXOptions &options,
                                     json::Array kernels,
                                     llvm::StringRef cubinFile,
                                     llvm::StringRef ptxFile) {
  json::Object doc{{"attn_manifest_version", 1},
                   {"compiler_version", "attn " ATTN_VERSION_STRING},
                   {"arch", options.chip},
                   {"ptx_features", options.getFeatures()},
                   {"kernels", std::move(kernels)}};
  if (!cubinFile.empty())
    doc["cubin"] = cubinFile.str();
  if (!ptxFile.empty())
    doc["ptx"] = ptxFile.str();
  return doc;
}

//===----------------------------------------------------------------------===//
// From the launch contract
//===----------------------------------------------------------------------===//

static llvm::Error manifestError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The manifest's name of an element type.
static std::string getTypeName(mlir::Type type) {
  if (type.isBF16())
    return "bf16";
  if (type.isF16())
    return "f16";
  if (type.isF32())
    return "f32";
  if (type.isInteger(32))
    return "i32";
  if (type.isInteger(8))
    return "u8";
  return "";
}

/// The manifest's kind of a kernel argument type.
static std::string getArgKind(mlir::Type type) {
  if (mlir::isa<mlir::MemRefType>(type))
    return "ptr";
  if (type.isInteger(32))
    return "i32";
  if (type.isInteger(64))
    return "i64";
  if (type.isF32())
    return "f32";
  if (mlir::isa<mlir::LLVM::LLVMPointerType>(type))
    return "tensormap";
  return "";
}

llvm::Expected<json::Object>
mlir::attn::getKernelManifest(mlir::gpu::GPUFuncOp kernel,
                              const KernelResourceUsage *usage) {
  std::string name = kernel.getName().str();
  auto launch = kernel->getAttrOfType<LaunchAttr>(LaunchAttr::getAttrName());
  if (!launch)
    return manifestError("kernel @" + name + " has no attn.launch contract: "
                         "only kernels attn-outline-kernels wrote can be "
                         "launched by the runtime");
  json::Array args, variantParams;
  for (unsigned i = 0, e = kernel.getNumArguments(); i < e; ++i) {
    auto argName = kernel.getArgAttrOfType<mlir::StringAttr>(i, kArgNameAttr);
    if (!argName)
      return manifestError("kernel @" + name + ": argument #" +
                           llvm::Twine(i) + " has no attn.name");
    mlir::Type type = kernel.getArgument(i).getType();
    std::string kind = getArgKind(type);
    if (kind.empty())
      return manifestError("kernel @" + name + ": argument '" +
                           argName.getValue() +
                           "' has a type no kernel argument may have");
    json::Object arg{{"name", argName.getValue()}, {"kind", kind}};
    if (auto memref = mlir::dyn_cast<mlir::MemRefType>(type))
      arg["dtype"] = getTypeName(memref.getElementType());
    if (kind == "tensormap") {
      auto source = kernel.getArgAttrOfType<mlir::StringAttr>(i, kTensorMapOfAttr);
      if (!source)
        return manifestError("kernel @" + name + ": tensor map argument '" +
                             argName.getValue() +
                             "' names no buffer (attn.tensor_map_of)");
      if (!launch.getTile() || !launch.getFormat())
        return manifestError("kernel @" + name + ": tensor map argument '" +
                             argName.getValue() +
                             "' in a kernel without a tile and a format");
      arg["source"] = source.getValue();
      // Keys per box: the compiler's decision (getKVBoxRows), which the
      // runtime encodes the map with.
      arg["box_rows"] = getKVBoxRows(launch.getTile(), launch.getHeadDim(),
                                     launch.getFormat());
    }
    args.push_back(std::move(arg));
    if (kernel.getArgAttrOfType<mlir::TypeAttr>(i, kArgParamTypeAttr))
      variantParams.push_back(
          json::Object{{"name", argName.getValue()}, {"type", kind}});
  }
  json::Array variants;
  if (mlir::ArrayAttr names = launch.getVariants())
    for (auto v : names.getAsRange<mlir::StringAttr>())
      variants.push_back(v.getValue());
  json::Object entry{
      {"name", name},
      {"role", stringifyKernelRole(launch.getRole())},
      {"threads", launch.getThreads()},
      {"shared_bytes", launch.getSharedBytes()},
      {"ctas_per_sm", launch.getCtasPerSm()},
      {"dtype", getTypeName(launch.getDtype())},
      {"head_dim", launch.getHeadDim()},
      {"num_qo_heads", launch.getNumQoHeads()},
      {"num_kv_heads", launch.getNumKvHeads()},
      {"lse_base", 2},
      {"args", std::move(args)},
  };
  if (!variants.empty())
    entry["variants"] = std::move(variants);
  if (!variantParams.empty())
    entry["variant_params"] = std::move(variantParams);
  if (BsrAttr format = launch.getFormat())
    entry["format"] = json::Object{
        {"block_rows",
         format.hasDynamicBlockRows() ? 0 : format.getBlockRows()},
        {"block_cols", format.isPaged() ? format.getBlockCols() : 1},
        {"layout", stringifyKVLayout(format.getLayout())},
        {"indexing", stringifyKVIndexing(format.getIndexing())}};
  if (launch.isAttention()) {
    TileAttr tile = launch.getTile();
    entry["tile"] = json::Object{{"q", tile.getQ()},
                                 {"kv", tile.getKv()},
                                 {"warps", tile.getWarps()},
                                 {"stages", tile.getStages()},
                                 {"gqa_pack", tile.getGqaPack()}};
    if (tile.getKvTma())
      entry.getObject("tile")->try_emplace("kv_tma", true);
    entry["cost"] = json::Object{{"per_item", launch.getCostPerItem()},
                                 {"per_kv_token", launch.getCostPerKvToken()},
                                 {"min_chunk_tokens", launch.getMinChunk()}};
    if (BandAttr band = launch.getBand()) {
      json::Object b;
      if (band.getLower())
        b["lower"] = *band.getLower();
      if (band.getUpper())
        b["upper"] = *band.getUpper();
      if (band.getLowerParam())
        b["lower_param"] = band.getLowerParam().getValue();
      if (band.getUpperParam())
        b["upper_param"] = band.getUpperParam().getValue();
      entry["band"] = std::move(b);
    }
    if (launch.getCustomMask())
      entry["custom_mask"] = true;
    if (mlir::FlatSymbolRefAttr merge = launch.getMerge())
      entry["merge_kernel"] = merge.getValue();
  } else if (launch.isRowKernel()) {
    // Grid-strided over the num_rows rows given at launch.
    entry["rows_per_cta"] = launch.getMergeRows();
  } else {
    // One CTA per (merge unit, merge_rows_per_cta rows), grid-strided.
    entry["merge_ctas"] = "unit_rows";
    entry["merge_rows_per_cta"] = launch.getMergeRows();
    // Waits with griddepcontrol.wait: may be launched as a programmatic
    // dependent of the attention grid.
    entry["pdl"] = launch.getPdl() ? 1 : 0;
    if (launch.getOutputTransform())
      entry["output_transform"] = true;
  }
  addManifestResources(entry, usage);
  return entry;
}
