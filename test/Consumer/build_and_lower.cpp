//===- build_and_lower.cpp - attn from an installed package, in C++ -------===//
//
// What an ML compiler that emits attention does with attn (docs/Embedding.md):
// builds `attn.attention` with the C++ builders (a paged, causal GQA decode:
// 32 query heads over 8 KV heads, d128, pages of 16), then
//
//   1. attn-prepare-pipeline + attn-outline-kernels: every kernel is a
//      gpu.func carrying its launch contract (#attn.launch, docs/Kernels.md),
//      and the attention op lists them in attn.kernels;
//   2. the whole registered attn-to-nvvm-pipeline: the kernels are llvm.funcs
//      marked gpu.kernel in gpu.module @attn_kernels, with an #nvvm.target;
//   3. compileAttentionKernels: PTX with one .entry per kernel, and the
//      manifest the runtime loads it with (docs/Manifest.md).
//
// No GPU or ptxas needed. Includes every installed header first, then
// `using namespace mlir;`: the dialect is mlir::attn, the runtime attnrt, so
// `attn::` below is unambiguous.
//
//===----------------------------------------------------------------------===//

#include "attn_all_headers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

#include <set>
#include <string>

using namespace mlir;

namespace {

int failures = 0;

void expect(bool ok, const llvm::Twine &what) {
  if (!ok) {
    llvm::errs() << "build-and-lower: FAILED " << what << "\n";
    ++failures;
  }
}

/// func.func @decode(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices,
/// kv_last_len) -> (o, lse) around one attn.attention.
OwningOpRef<ModuleOp> buildDecode(MLIRContext &ctx) {
  OpBuilder b(&ctx);
  Location loc = b.getUnknownLoc();
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);

  const int64_t dyn = ShapedType::kDynamic;
  Type bf16 = b.getBF16Type();
  auto queryType = RankedTensorType::get({dyn, 32, 128}, bf16);
  auto cacheType = RankedTensorType::get({dyn, 16, 8, 128}, bf16);
  auto indexType = RankedTensorType::get({dyn}, b.getI32Type());
  auto lseType = RankedTensorType::get({dyn, 32}, b.getF32Type());
  FunctionType fnType = b.getFunctionType(
      {queryType, cacheType, cacheType, indexType, indexType, indexType,
       indexType},
      {queryType, lseType});

  b.setInsertionPointToEnd(module->getBody());
  auto fn = func::FuncOp::create(b, loc, "decode", fnType);
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  auto args = entry->getArguments();

  auto format = attn::BsrAttr::get(&ctx, /*block_rows=*/1, /*block_cols=*/16,
                                   attn::KVLayout::NHD, attn::KVIndexing::paged);
  ArrayAttr variants = b.getArrayAttr({FlatSymbolRefAttr::get(&ctx, "causal")});
  auto attention = attn::AttentionOp::create(
      b, loc, queryType, lseType, /*query=*/args[0], /*key_cache=*/args[1],
      /*value_cache=*/args[2], /*indices=*/args.slice(3, 4), /*mask=*/Value(),
      /*sm_scale=*/Value(), /*params=*/ValueRange(), format, variants,
      /*tile=*/attn::TileAttr(), /*tile_candidates=*/ArrayAttr());
  func::ReturnOp::create(b, loc, attention->getResults());
  return module;
}

/// Runs `pipeline` (registered passes and pipelines, textual, anchored on
/// the module) on `module`.
LogicalResult runPipeline(ModuleOp module, llvm::StringRef pipeline) {
  PassManager pm(module.getContext());
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    return failure();
  return pm.run(module);
}

/// The kernels the attention op says it runs (attn.kernels).
std::set<std::string> listedKernels(ModuleOp module) {
  std::set<std::string> names;
  module.walk([&](attn::AttentionOp op) {
    if (auto kernels = op->getAttrOfType<ArrayAttr>(attn::kKernelsAttrName))
      for (Attribute kernel : kernels)
        names.insert(cast<SymbolRefAttr>(kernel).getLeafReference().str());
  });
  return names;
}

} // namespace

int main() {
  DialectRegistry registry;
  attn::registerAllDialects(registry);
  attn::registerTargetDialectsAndInterfaces(registry);
  attn::registerAllPasses();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();

  OwningOpRef<ModuleOp> module = buildDecode(ctx);
  if (failed(verify(*module))) {
    llvm::errs() << "build-and-lower: the built module does not verify\n";
    return 1;
  }

  // 1. The tile-level form: one gpu.func per kernel, each with its contract.
  {
    OwningOpRef<ModuleOp> outlined = module->clone();
    if (failed(runPipeline(*outlined, "attn-prepare-pipeline{chip=sm_90},"
                                      "attn-outline-kernels{chip=sm_90}"))) {
      llvm::errs() << "build-and-lower: prepare + outline failed\n";
      return 1;
    }
    std::set<std::string> listed = listedKernels(*outlined);
    int attention = 0, merge = 0;
    outlined->walk([&](gpu::GPUFuncOp kernel) {
      auto launch = kernel->getAttrOfType<attn::LaunchAttr>(
          attn::LaunchAttr::getAttrName());
      expect(bool(launch), "gpu.func @" + kernel.getName() + " has attn.launch");
      if (!launch)
        return;
      bool isAttention = launch.getRole() == attn::KernelRole::attention;
      (isAttention ? attention : merge)++;
      expect(launch.getThreads() > 0 && launch.getThreads() <= 1024,
             "threads of @" + kernel.getName());
      if (isAttention) {
        expect(listed.count(kernel.getName().str()) == 1,
               "@" + kernel.getName() + " is in attn.kernels");
        expect(launch.getHeadDim() == 128 && launch.getNumQoHeads() == 32 &&
                   launch.getNumKvHeads() == 8,
               "heads of @" + kernel.getName());
        expect(bool(launch.getMerge()), "@" + kernel.getName() + " names its merge");
      }
      llvm::outs() << "build-and-lower: gpu.func @" << kernel.getName() << ": "
                   << stringifyEnum(launch.getRole()) << ", "
                   << launch.getThreads() << " threads, "
                   << launch.getSharedBytes() << " B dynamic shared memory\n";
    });
    expect(attention == 1 && merge == 1,
           "one attention and one merge kernel (got " + llvm::Twine(attention) +
               " and " + llvm::Twine(merge) + ")");
  }

  // 2. The whole compiler as the registered pipeline.
  {
    OwningOpRef<ModuleOp> lowered = module->clone();
    if (failed(runPipeline(*lowered,
                           "attn-to-nvvm-pipeline{chip=sm_90}"))) {
      llvm::errs() << "build-and-lower: attn-to-nvvm-pipeline failed\n";
      return 1;
    }
    std::set<std::string> listed = listedKernels(*lowered);
    expect(!listed.empty(), "attn.kernels after attn-to-nvvm-pipeline");
    auto gpuModule = lowered->lookupSymbol<gpu::GPUModuleOp>("attn_kernels");
    expect(bool(gpuModule), "gpu.module @attn_kernels");
    if (gpuModule) {
      expect(gpuModule.getTargetsAttr() && !gpuModule.getTargetsAttr().empty(),
             "gpu.module @attn_kernels has an #nvvm.target");
      int kernels = 0;
      gpuModule.walk([&](LLVM::LLVMFuncOp fn) {
        if (!fn->hasAttr(gpu::GPUDialect::getKernelFuncAttrName()))
          return;
        ++kernels;
        llvm::outs() << "build-and-lower: llvm.func @" << fn.getName()
                     << " (gpu.kernel)\n";
      });
      expect(kernels == 2, "two kernels after lowering (got " +
                               llvm::Twine(kernels) + ")");
      for (const std::string &name : listed)
        expect(bool(gpuModule.lookupSymbol<LLVM::LLVMFuncOp>(name)),
               "kernel @" + name + " lowered");
    }
  }

  // 3. PTX and the manifest, as attn-compile and the C API make them.
  {
    OwningOpRef<ModuleOp> prepared = module->clone();
    if (failed(runPipeline(*prepared,
                           "attn-prepare-pipeline{chip=sm_90}"))) {
      llvm::errs() << "build-and-lower: attn-prepare-pipeline failed\n";
      return 1;
    }
    attn::NVPTXOptions target;
    target.chip = "sm_90";
    attn::AttentionKernelOptions options;
    options.emit = attn::AttentionKernelOptions::Emit::PTX;
    llvm::Expected<attn::AttentionKernels> kernels =
        attn::compileAttentionKernels(*prepared, target, options);
    if (!kernels) {
      llvm::errs() << "build-and-lower: compileAttentionKernels: "
                   << llvm::toString(kernels.takeError()) << "\n";
      return 1;
    }
    const llvm::json::Array *entries = kernels->manifest.getArray("kernels");
    expect(entries && entries->size() == 2, "two kernels in the manifest");
    if (entries)
      for (const llvm::json::Value &entry : *entries) {
        const llvm::json::Object *object = entry.getAsObject();
        std::optional<llvm::StringRef> name =
            object ? object->getString("name") : std::nullopt;
        expect(bool(name), "a manifest entry with a name");
        if (!name)
          continue;
        expect(kernels->ptx.find(".entry " + name->str()) != std::string::npos,
               "PTX has .entry " + *name);
      }
    llvm::outs() << "build-and-lower: " << kernels->ptx.size() << " bytes of PTX\n";
  }

  if (failures) {
    llvm::errs() << "build-and-lower: " << failures << " check(s) failed\n";
    return 1;
  }
  llvm::outs() << "build-and-lower: OK\n";
  return 0;
}
