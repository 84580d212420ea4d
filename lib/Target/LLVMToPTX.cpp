//===- LLVMToPTX.cpp - gpu.module to PTX through LLVM's NVPTX back end ----===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The #nvvm.target's own serializer runs LLVM's O-level pipeline as a C
// compiler needs it. attn's kernels arrive from MLIR already unrolled and
// vectorized, so the SLP vectorizer, half of that pipeline's time on a wgmma
// prefill kernel, finds nothing to do: the PTX is byte-identical without it.
// It is the one pass dropped. (Loop strength reduction, two thirds of code
// generation's time on the same kernel, is not: without it the prefill
// consumers spill, 236 bytes at 168 registers.)
//
// Everything else (translation, libdevice linking, the rest of the pipeline,
// the target machine) is MLIR's, through ModuleToObject's hooks.
//
//===----------------------------------------------------------------------===//

#include "attn/Target/Serialization.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Target/LLVM/NVVM/Utils.h"

#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;
using namespace mlir::attn;
using llvm::createStringError;

namespace {
/// MLIR's NVVM serialization with attn's optimization pipeline, stopping at
/// PTX.
class PTXSerializer : public NVVM::SerializeGPUModuleBase {
public:
  PTXSerializer(gpu::GPUModuleOp module, NVVM::NVVMTargetAttr target,
                const gpu::TargetOptions &targetOptions)
      : SerializeGPUModuleBase(*module, target, targetOptions) {}

protected:
  /// The O-level pipeline without the SLP vectorizer.
  LogicalResult optimizeModule(llvm::Module &module, int level) override {
    if (level < 0 || level > 3)
      return getOperation().emitError()
             << "LLVM opt level " << level << " is not in 0..3";
    FailureOr<llvm::TargetMachine *> machine = getOrCreateTargetMachine();
    if (failed(machine))
      return getOperation().emitError()
             << "no LLVM target machine for " << triple << " " << chip;
    llvm::PipelineTuningOptions tuning;
    tuning.LoopUnrolling = true;
    tuning.LoopInterleaving = true;
    tuning.LoopVectorization = true;
    tuning.SLPVectorization = false;
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder builder(*machine, tuning);
    builder.registerModuleAnalyses(mam);
    builder.registerCGSCCAnalyses(cgam);
    builder.registerFunctionAnalyses(fam);
    builder.registerLoopAnalyses(lam);
    builder.crossRegisterProxies(lam, fam, cgam, mam);
    static const llvm::OptimizationLevel levels[] = {
        llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
        llvm::OptimizationLevel::O2, llvm::OptimizationLevel::O3};
    llvm::ModulePassManager pipeline =
        level == 0 ? builder.buildO0DefaultPipeline(levels[0])
                   : builder.buildPerModuleDefaultPipeline(levels[level]);
    pipeline.run(module, mam);
    return success();
  }

  /// PTX text, never a binary: ptxas runs separately (runPtxas).
  FailureOr<SmallVector<char, 0>>
  moduleToObject(llvm::Module &module) override {
    FailureOr<llvm::TargetMachine *> machine = getOrCreateTargetMachine();
    if (failed(machine))
      return getOperation().emitError()
             << "no LLVM target machine for " << triple << " " << chip;
    FailureOr<SmallString<0>> ptx = translateModuleToISA(
        module, **machine, [&] { return getOperation().emitError(); });
    if (failed(ptx))
      return failure();
    return SmallVector<char, 0>(ptx->begin(), ptx->end());
  }
};
} // namespace

llvm::Expected<std::string>
mlir::attn::translateToPTX(gpu::GPUModuleOp module,
                           const NVPTXOptions &options) {
  ArrayAttr targets = module.getTargetsAttr();
  auto target = targets && !targets.empty()
                    ? dyn_cast<NVVM::NVVMTargetAttr>(targets[0])
                    : NVVM::NVVMTargetAttr();
  if (!target)
    return createStringError("gpu.module @%s has no #nvvm.target",
                             module.getName().str().c_str());
  NVVM::SerializeGPUModuleBase::init();
  gpu::TargetOptions targetOptions(options.getCudaPath());
  PTXSerializer serializer(module, target, targetOptions);
  std::optional<SmallVector<char, 0>> ptx = serializer.run();
  if (!ptx)
    return createStringError("PTX generation failed for gpu.module @%s",
                             module.getName().str().c_str());
  std::string text(ptx->begin(), ptx->end());
  while (!text.empty() && text.back() == '\0')
    text.pop_back();
  return text;
}
