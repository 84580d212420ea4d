//===- ToolOutput.h - What both halves of attn-gen-kernel share -*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The decode half (attn-gen-kernel.cpp) and the prefill half (GenPrefill.cpp)
// differ only in the kernels they build: the context, the built-in variant
// lookup and everything after the build (printing, compiling, timing,
// writing the image and its manifest) are here.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_TOOLS_ATTN_GEN_KERNEL_TOOLOUTPUT_H
#define ATTN_TOOLS_ATTN_GEN_KERNEL_TOOLOUTPUT_H

#include "attn/Dialect/Attn/IR/Attn.h"
#include "attn/Target/Serialization.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"

#include <memory>
#include <string>

namespace attn {

/// Prints `message` as the tool's error; returns the exit status 1.
int fail(const llvm::Twine &message);

/// Writes `bytes` to `path` ("-" is stdout); returns an exit status.
int writeFile(llvm::StringRef path, llvm::StringRef bytes);

/// A context with the kernel generator's and the target's dialects and the
/// attn dialect loaded.
std::unique_ptr<mlir::MLIRContext> createGenContext();

/// The built-in variants named by `names`, in order; reports an unknown
/// name (and returns failure).
mlir::FailureOr<llvm::SmallVector<mlir::attn::VariantOp>>
lookupBuiltinVariants(mlir::MLIRContext &context,
                      llvm::ArrayRef<std::string> names);

/// Emits `module` at stage `emit` (mlir, nvvm, ptx, cubin) to `output`; with
/// cubin also `<output>.json`, the manifest of the kernels `manifestKernels`
/// describes from ptxas' resource usage. `timing` prints the stage times and
/// resources to stderr. Returns the exit status.
int emitKernels(mlir::ModuleOp module, const NVPTXOptions &target,
                llvm::StringRef emit, llvm::StringRef output, bool timing,
                llvm::function_ref<llvm::json::Array(
                    llvm::ArrayRef<KernelResourceUsage>)>
                    manifestKernels);

} // namespace attn

#endif // ATTN_TOOLS_ATTN_GEN_KERNEL_TOOLOUTPUT_H
