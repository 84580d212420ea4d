//===- AttentionKernels.cpp - a prepared attn module to kernels -----------===//
//
// convert-attn-to-gpu, then the generated gpu.module alone through NVVM, PTX
// and ptxas (the host functions around the attention ops are not lowered
// here), then one manifest entry per kernel from the spec it was built from.
//
//===----------------------------------------------------------------------===//

#include "attn/Target/AttentionKernels.h"
#include "attn/Conversion/AttnToGPU/AttnToGPU.h"
#include "attn/Target/KernelManifest.h"
#include "attn/Target/PrefillManifest.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Verifier.h"

#include <chrono>

namespace attn {

static llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<AttentionKernels>
compileAttentionKernels(mlir::ModuleOp module, const NVPTXOptions &target,
                        bool emitCubin) {
  AttentionKernels out;
  auto start = std::chrono::steady_clock::now();
  mlir::attn::ConvertAttnToGPUOptions options;
  options.chip = target.chip;
  llvm::SmallVector<mlir::attn::GeneratedKernel, 4> generated;
  if (mlir::failed(mlir::attn::convertAttnToGPU(module, options, &generated)))
    return error("kernel generation failed (see the diagnostics)");
  auto gpuModule =
      module.lookupSymbol<mlir::gpu::GPUModuleOp>(options.gpuModuleName);
  if (!gpuModule || generated.empty())
    return error("no attn.attention with a tile: run attn-prepare-pipeline "
                 "first");
  mlir::OwningOpRef<mlir::ModuleOp> kernels =
      mlir::ModuleOp::create(module.getLoc());
  (*kernels)->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(),
                      mlir::UnitAttr::get(module.getContext()));
  kernels->getBody()->push_back(gpuModule->clone());
  if (mlir::failed(mlir::verify(*kernels)))
    return error("the generated kernels do not verify");
  out.stages.push_back(
      {"codegen", std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count()});

  auto compiled = compileGPUModules(*kernels, target, emitCubin);
  if (!compiled)
    return compiled.takeError();
  if (compiled->size() != 1)
    return error("expected one gpu.module of kernels");
  CompiledModule &cm = compiled->front();
  out.stages.append(cm.stages.begin(), cm.stages.end());
  out.ptx = std::move(cm.ptx);
  out.cubin = std::move(cm.cubin);
  out.usage = std::move(cm.kernels);

  llvm::json::Array entries;
  using Kind = mlir::attn::GeneratedKernel::Kind;
  for (const mlir::attn::GeneratedKernel &k : generated) {
    const KernelResourceUsage *usage = findResourceUsage(out.usage, k.name);
    switch (k.kind) {
    case Kind::Decode:
      entries.push_back(getDecodeKernelManifest(k.decode, k.params, usage));
      break;
    case Kind::Prefill:
      entries.push_back(getPrefillKernelManifest(k.prefill, usage));
      break;
    case Kind::Merge:
      entries.push_back(
          getMergeKernelManifest(k.merge, k.numQoHeads, k.numKVHeads, usage));
      break;
    }
  }
  out.manifest = getManifest(target, std::move(entries), "", "");
  return out;
}

} // namespace attn
