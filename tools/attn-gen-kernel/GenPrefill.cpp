//===- GenPrefill.cpp - attn-gen-kernel's prefill path --------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//

#include "ToolOutput.h"
#include "GenPrefill.h"

#include "attn/Target/KernelManifest.h"
#include "attn/Target/PrefillManifest.h"

#include "mlir/IR/Verifier.h"


int attn::genPrefillKernel(PrefillKernelSpec spec,
                           llvm::ArrayRef<std::string> variants,
                           const NVPTXOptions &target, llvm::StringRef emit,
                           llvm::StringRef output, bool timing) {
  if (emit != "mlir" && emit != "nvvm" && emit != "ptx" && emit != "cubin")
    return fail("unknown --emit '" + emit + "' (mlir, nvvm, ptx, cubin)");
  if (emit != "mlir")
    if (llvm::Error err = target.validate())
      return fail(llvm::toString(std::move(err)));

  std::unique_ptr<mlir::MLIRContext> context = createGenContext();
  auto variantOps = lookupBuiltinVariants(*context, variants);
  if (failed(variantOps))
    return 1;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(context.get()));
  if (failed(buildPrefillKernelForVariants(*module, spec, *variantOps)))
    return 1;
  if (failed(mlir::verify(*module)))
    return fail("generated IR does not verify");
  // What the builder added to the spec (variant names and parameters).
  mlir::FailureOr<PrefillKernelSpec> named =
      getPrefillSpecWithVariants(spec, *variantOps);
  if (failed(named))
    return 1;
  spec = *named;

  return emitKernels(*module, target, emit, output, timing,
                     [&](llvm::ArrayRef<KernelResourceUsage> usage) {
                       return llvm::json::Array{getPrefillKernelManifest(
                           spec, findResourceUsage(usage,
                                                   spec.getKernelName()))};
                     });
}
