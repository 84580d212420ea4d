//===- AttentionKernels.cpp - a prepared attn module to kernels -----------===//
//
// attn-outline-kernels, then (optionally one tile candidate's kernels
// alone) the manifest entries from the kernels' launch contracts, then
// convert-attn-to-gpu, and the generated gpu.module alone through NVVM, PTX
// and ptxas (the host functions around the attention ops are not lowered
// here).
//
//===----------------------------------------------------------------------===//

#include "attn/Target/AttentionKernels.h"
#include "attn/Conversion/AttnToGPU/AttnToGPU.h"
#include "attn/Dialect/Attn/Transforms/Passes.h"
#include "attn/Target/KernelManifest.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"

#include <chrono>

namespace mlir::attn {

static llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

static constexpr llvm::StringLiteral kGPUModule = "attn_kernels";

namespace {
/// Wall time since construction, for a stage.
struct Stopwatch {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double ms() const {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - start)
        .count();
  }
};
} // namespace

/// Keeps only the kernels of tile candidate `candidate` of every attention
/// (and the merge kernels they pair with).
static llvm::Error keepCandidate(mlir::ModuleOp module,
                                 mlir::gpu::GPUModuleOp gpuModule,
                                 int64_t candidate) {
  llvm::StringSet<> keep;
  llvm::Error err = llvm::Error::success();
  module.walk([&](mlir::attn::AttentionOp op) {
    auto kernels =
        op->getAttrOfType<mlir::ArrayAttr>(mlir::attn::kKernelsAttrName);
    if (!kernels)
      return;
    if (candidate >= int64_t(kernels.size())) {
      if (!err)
        err = error("tile candidate " + llvm::Twine(candidate) +
                    " does not exist: the attention has " +
                    llvm::Twine(kernels.size()));
      return;
    }
    auto ref = mlir::cast<mlir::SymbolRefAttr>(kernels[candidate]);
    llvm::StringRef name = ref.getLeafReference().getValue();
    keep.insert(name);
    if (auto func = gpuModule.lookupSymbol<mlir::gpu::GPUFuncOp>(name))
      if (auto launch = func->getAttrOfType<mlir::attn::LaunchAttr>(
              mlir::attn::LaunchAttr::getAttrName()))
        if (launch.getMerge())
          keep.insert(launch.getMerge().getValue());
  });
  if (err)
    return err;
  // Row kernels belong to no candidate.
  for (auto func : gpuModule.getOps<mlir::gpu::GPUFuncOp>())
    if (auto launch = func->getAttrOfType<mlir::attn::LaunchAttr>(
            mlir::attn::LaunchAttr::getAttrName());
        launch && launch.isRowKernel())
      keep.insert(func.getName());
  for (auto func : llvm::make_early_inc_range(
           gpuModule.getOps<mlir::gpu::GPUFuncOp>()))
    if (!keep.contains(func.getName()))
      func.erase();
  return llvm::Error::success();
}

llvm::Error checkHoldsKernelOps(mlir::ModuleOp module) {
  bool found = false;
  module->walk([&](mlir::Operation *op) {
    if (mlir::isa<mlir::attn::AttentionOp, mlir::attn::MergeStatesOp,
                  mlir::attn::AppendKVOp, mlir::attn::CopyIndicesOp,
                  mlir::attn::CopyByTableOp>(op)) {
      found = true;
      return mlir::WalkResult::interrupt();
    }
    return mlir::WalkResult::advance();
  });
  if (found)
    return llvm::Error::success();
  return error("the module holds no attn.attention, attn.merge_states, "
               "attn.append_kv, attn.copy_indices or attn.copy_by_table to "
               "compile");
}

llvm::Expected<AttentionKernels>
compileAttentionKernels(mlir::ModuleOp module, const NVPTXOptions &target,
                        const AttentionKernelOptions &options) {
  mlir::MLIRContext *ctx = module.getContext();
  Stopwatch outline;
  mlir::PassManager pm(ctx);
  mlir::attn::AttnOutlineKernelsPassOptions outlineOptions;
  outlineOptions.chip = target.chip;
  outlineOptions.gpuModuleName = kGPUModule.str();
  pm.addPass(mlir::attn::createAttnOutlineKernelsPass(outlineOptions));
  if (mlir::failed(pm.run(module)))
    return error("attn-outline-kernels failed (see the diagnostics)");
  auto gpuModule = module.lookupSymbol<mlir::gpu::GPUModuleOp>(kGPUModule);
  if (!gpuModule || gpuModule.getOps<mlir::gpu::GPUFuncOp>().empty())
    return error("no attn.attention with a tile (run attn-prepare-pipeline "
                 "first), attn.merge_states, attn.append_kv or "
                 "attn.copy_indices or attn.copy_by_table to compile");
  if (options.candidate >= 0)
    if (llvm::Error err = keepCandidate(module, gpuModule, options.candidate))
      return std::move(err);
  // Read before the later stages run: each stage's time is its own, so
  // that the stages add up to the compile (the outline once counted them all).
  const double outlineMs = outline.ms();
  llvm::Expected<AttentionKernels> compiled =
      compileOutlinedKernels(module, gpuModule, target, options.emit);
  if (compiled)
    compiled->stages.insert(compiled->stages.begin(),
                            StageTime{"outline", outlineMs});
  return compiled;
}

llvm::Expected<AttentionKernels>
compileOutlinedKernels(mlir::ModuleOp module, mlir::gpu::GPUModuleOp gpuModule,
                       const NVPTXOptions &target,
                       AttentionKernelOptions::Emit emit) {
  AttentionKernels out;
  mlir::MLIRContext *ctx = module.getContext();
  // The manifest entries come from the launch contracts, before the
  // lowering turns the kernels into LLVM functions.
  llvm::SmallVector<llvm::json::Object> entries;
  for (auto func : gpuModule.getOps<mlir::gpu::GPUFuncOp>()) {
    llvm::Expected<llvm::json::Object> entry = getKernelManifest(func, nullptr);
    if (!entry)
      return entry.takeError();
    entries.push_back(std::move(*entry));
  }
  if (emit == AttentionKernelOptions::Emit::None) {
    llvm::json::Array kernels;
    for (llvm::json::Object &e : entries)
      kernels.push_back(std::move(e));
    out.manifest = getManifest(target, std::move(kernels), "", "");
    return out;
  }

  Stopwatch lower;
  if (mlir::failed(mlir::attn::lowerTileKernels(module)))
    return error("convert-attn-to-gpu failed (see the diagnostics)");
  mlir::OwningOpRef<mlir::ModuleOp> kernels =
      mlir::ModuleOp::create(module.getLoc());
  (*kernels)->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(),
                      mlir::UnitAttr::get(ctx));
  kernels->getBody()->push_back(gpuModule->clone());
  if (mlir::failed(mlir::verify(*kernels)))
    return error("the generated kernels do not verify");
  out.stages.push_back({"lower-tiles", lower.ms()});

  bool cubin = emit == AttentionKernelOptions::Emit::Cubin;
  auto compiled = compileGPUModules(*kernels, target, cubin);
  if (!compiled)
    return compiled.takeError();
  if (compiled->size() != 1)
    return error("expected one gpu.module of kernels");
  CompiledModule &cm = compiled->front();
  out.stages.append(cm.stages.begin(), cm.stages.end());
  out.ptx = std::move(cm.ptx);
  out.cubin = std::move(cm.cubin);
  out.usage = std::move(cm.kernels);

  llvm::json::Array manifestKernels;
  for (llvm::json::Object &entry : entries) {
    std::string name = entry.getString("name")->str();
    addManifestResources(entry, findResourceUsage(out.usage, name));
    manifestKernels.push_back(std::move(entry));
  }
  out.manifest = getManifest(target, std::move(manifestKernels), "", "");
  return out;
}

} // namespace mlir::attn
