//===- ToolOutput.cpp - What both halves of attn-gen-kernel share ---------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//

#include "ToolOutput.h"

#include "attn/Conversion/AttnToGPU/DecodeKernel.h"
#include "attn/Target/KernelManifest.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace attn {

int fail(const llvm::Twine &message) {
  llvm::errs() << "attn-gen-kernel: " << message << "\n";
  return 1;
}

int writeFile(llvm::StringRef path, llvm::StringRef bytes) {
  std::string err;
  auto file = openOutputFile(path, &err);
  if (!file)
    return fail(err);
  file->os() << bytes;
  file->keep();
  return 0;
}

std::unique_ptr<MLIRContext> createGenContext() {
  DialectRegistry registry;
  registerKernelGenDialects(registry);
  registerTargetDialectsAndInterfaces(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadDialect<mlir::attn::AttnDialect>();
  return context;
}

FailureOr<llvm::SmallVector<mlir::attn::VariantOp>>
lookupBuiltinVariants(MLIRContext &context,
                            llvm::ArrayRef<std::string> names) {
  auto *dialect = context.getLoadedDialect<mlir::attn::AttnDialect>();
  llvm::SmallVector<mlir::attn::VariantOp> ops;
  for (const std::string &name : names) {
    auto op = llvm::dyn_cast_or_null<mlir::attn::VariantOp>(
        dialect->lookupBuiltinVariant(name));
    if (!op) {
      fail("unknown built-in variant '" + name + "'");
      return failure();
    }
    ops.push_back(op);
  }
  return ops;
}

int emitKernels(
    ModuleOp module, const NVPTXOptions &target, llvm::StringRef emit,
    llvm::StringRef output, bool timing,
    llvm::function_ref<llvm::json::Array(llvm::ArrayRef<KernelResourceUsage>)>
        manifestKernels) {
  if (emit == "mlir" || emit == "nvvm") {
    if (emit == "nvvm")
      if (llvm::Error err = lowerToNVVM(module, target))
        return fail(llvm::toString(std::move(err)));
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os);
    return writeFile(output, text);
  }
  if (emit != "ptx" && emit != "cubin")
    return fail("unknown --emit '" + emit + "' (mlir, nvvm, ptx, cubin)");

  auto compiled = compileGPUModules(module, target, emit == "cubin");
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
  llvm::json::Object manifest =
      getManifest(target, manifestKernels(result.kernels),
                  llvm::sys::path::filename(output), "");
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest))) << "\n";
  return writeFile((output + ".json").str(), text);
}

} // namespace attn
