//===- SerializeKernels.cpp - outlined kernels to gpu.binary --------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// `attn-serialize-kernels`: each gpu.module of outlined attn kernels goes
// through the same back half as attn-compile (compileOutlinedKernels), so a
// pipeline's kernels are the driver's byte for byte, and becomes a
// gpu.binary holding the image and, as `attn.manifest`, the manifest the
// runtime reads its ABI from. The manifest travels on the binary because the
// launch contracts it is derived from are gone once the kernels are LLVM.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/AttnToGPU.h"
#include "attn/Target/AttentionKernels.h"
#include "attn/Target/Passes.h"

#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNSERIALIZEKERNELSPASS
#include "attn/Target/Passes.h.inc"
} // namespace mlir::attn

using namespace mlir;
using namespace mlir::attn;

namespace {

/// Whether `gm` holds kernels with launch contracts (outlined by attn).
bool hasAttnKernels(gpu::GPUModuleOp gm) {
  return llvm::any_of(gm.getOps<gpu::GPUFuncOp>(), [](gpu::GPUFuncOp f) {
    return f->hasAttr(LaunchAttr::getAttrName());
  });
}

struct AttnSerializeKernelsPass
    : attn::impl::AttnSerializeKernelsPassBase<AttnSerializeKernelsPass> {
  using Base::Base;

  /// What the kernel lowering (run directly, not as a nested pass) builds.
  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registerKernelDialects(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (format != "bin" && format != "isa") {
      module.emitError() << "attn-serialize-kernels: format must be bin or "
                            "isa, got '"
                         << format << "'";
      return signalPassFailure();
    }
    NVPTXOptions target;
    target.chip = chip;
    target.features = features;
    target.cudaPath = cudaPath;
    // LLVM aborts on a bad chip/features pair: refuse it first.
    if (llvm::Error err = target.validate()) {
      module.emitError() << "attn-serialize-kernels: "
                         << llvm::toString(std::move(err));
      return signalPassFailure();
    }
    bool cubin = format == "bin";
    for (auto gm :
         llvm::make_early_inc_range(module.getOps<gpu::GPUModuleOp>()))
      if (hasAttnKernels(gm) && failed(serialize(gm, target, cubin)))
        return signalPassFailure();
  }

  LogicalResult serialize(gpu::GPUModuleOp gm, const NVPTXOptions &target,
                          bool cubin) {
    MLIRContext *ctx = &getContext();
    // A module of its own: the lowering must not touch the host code.
    OwningOpRef<ModuleOp> copy = ModuleOp::create(gm.getLoc());
    (*copy)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                     UnitAttr::get(ctx));
    auto kernels = cast<gpu::GPUModuleOp>(gm->clone());
    copy->getBody()->push_back(kernels);
    llvm::Expected<AttentionKernels> compiled =
        compileOutlinedKernels(*copy, kernels, target,
                               cubin ? AttentionKernelOptions::Emit::Cubin
                                     : AttentionKernelOptions::Emit::PTX);
    if (!compiled)
      return gm.emitError() << "attn-serialize-kernels: "
                            << llvm::toString(compiled.takeError());
    std::string manifest =
        llvm::formatv("{0}", llvm::json::Value(std::move(compiled->manifest)));
    StringRef image =
        cubin ? StringRef(compiled->cubin.data(), compiled->cubin.size())
              : StringRef(compiled->ptx);
    auto nvvmTarget =
        NVVM::NVVMTargetAttr::get(ctx, target.optLevel, "nvptx64-nvidia-cuda",
                                  target.chip, target.getFeatures());
    auto object = gpu::ObjectAttr::get(ctx, nvvmTarget,
                                       cubin ? gpu::CompilationTarget::Binary
                                             : gpu::CompilationTarget::Assembly,
                                       StringAttr::get(ctx, image),
                                       /*properties=*/nullptr,
                                       /*kernels=*/nullptr);
    OpBuilder b(gm);
    auto binary = gpu::BinaryOp::create(b, gm.getLoc(), gm.getName(),
                                        /*offloadingHandler=*/nullptr,
                                        b.getArrayAttr({object}));
    binary->setAttr(kManifestAttrName, StringAttr::get(ctx, manifest));
    gm.erase();
    return success();
  }
};

} // namespace
