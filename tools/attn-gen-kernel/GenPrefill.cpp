//===- GenPrefill.cpp - attn-gen-kernel's prefill path --------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//

#include "ToolOutput.h"
#include "GenPrefill.h"

#include "attn/Conversion/AttnToGPU/DecodeKernel.h"
#include "attn/Dialect/Attn/IR/Attn.h"
#include "attn/Target/KernelManifest.h"
#include "attn/Target/PrefillManifest.h"
#include "attn/Target/Serialization.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"


int attn::genPrefillKernel(PrefillKernelSpec spec,
                           llvm::ArrayRef<std::string> variants,
                           const NVPTXOptions &target, llvm::StringRef emit,
                           llvm::StringRef output, bool timing) {
  if (emit != "mlir" && emit != "nvvm" && emit != "ptx" && emit != "cubin")
    return fail("unknown --emit '" + emit + "' (mlir, nvvm, ptx, cubin)");
  if (emit != "mlir")
    if (llvm::Error err = target.validate())
      return fail(llvm::toString(std::move(err)));

  mlir::DialectRegistry registry;
  registerKernelGenDialects(registry);
  registerTargetDialectsAndInterfaces(registry);
  mlir::MLIRContext context(registry);
  context.loadDialect<mlir::attn::AttnDialect>();
  auto *dialect = context.getLoadedDialect<mlir::attn::AttnDialect>();
  llvm::SmallVector<mlir::attn::VariantOp> variantOps;
  for (const std::string &name : variants) {
    auto op = llvm::dyn_cast_or_null<mlir::attn::VariantOp>(
        dialect->lookupBuiltinVariant(name));
    if (!op)
      return fail("unknown built-in variant '" + name + "'");
    variantOps.push_back(op);
  }
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(&context));
  if (failed(buildPrefillKernelForVariants(*module, spec, variantOps)))
    return 1;
  if (failed(mlir::verify(*module)))
    return fail("generated IR does not verify");
  // What the builder added to the spec (variant names and parameters).
  mlir::FailureOr<PrefillKernelSpec> named =
      getPrefillSpecWithVariants(spec, variantOps);
  if (failed(named))
    return 1;
  spec = *named;

  if (emit == "mlir" || emit == "nvvm") {
    if (emit == "nvvm")
      if (llvm::Error err = lowerToNVVM(*module, target))
        return fail(llvm::toString(std::move(err)));
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    return writeFile(output, text);
  }
  auto compiled = compileGPUModules(*module, target, emit == "cubin");
  if (!compiled)
    return fail(llvm::toString(compiled.takeError()));
  CompiledModule &result = compiled->front();
  if (timing) {
    for (const StageTime &stage : result.stages)
      llvm::errs() << llvm::format("%-14s %8.1f ms\n", stage.stage.c_str(),
                                   stage.milliseconds);
    for (const KernelResourceUsage &k : result.kernels)
      llvm::errs() << k.kernelName << ": " << k.registers << " registers, "
                   << k.spillStoreBytes << "+" << k.spillLoadBytes
                   << " bytes spilled, " << k.sharedMemBytes
                   << " bytes static smem\n";
  }
  if (emit == "ptx")
    return writeFile(output, result.ptx);
  if (output == "-")
    return fail("--emit=cubin needs -o <file>");
  if (int rc = writeFile(output, llvm::StringRef(result.cubin.data(),
                                                 result.cubin.size())))
    return rc;
  const KernelResourceUsage *usage = nullptr;
  for (const KernelResourceUsage &k : result.kernels)
    if (k.kernelName == spec.getKernelName())
      usage = &k;
  llvm::json::Array kernels;
  kernels.push_back(getPrefillKernelManifest(spec, usage));
  llvm::json::Object manifest = getManifest(
      target, std::move(kernels), llvm::sys::path::filename(output), "");
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest))) << "\n";
  return writeFile((output + ".json").str(), text);
}
