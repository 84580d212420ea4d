//===- AttnToGPU.h - attn.attention to generated GPU kernels ----*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The C++ entry of `convert-attn-to-gpu`: generates the kernels of every
// tiled attn.attention of a module into one gpu.module and records on each
// op the symbols it launches (`attn.kernel`, `attn.merge_kernel`).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOGPU_ATTNTOGPU_H
#define ATTN_CONVERSION_ATTNTOGPU_ATTNTOGPU_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir::attn {

class AttentionOp;

struct ConvertAttnToGPUOptions {
  /// Target SM the kernels are generated for.
  std::string chip = "sm_90";
  /// The gpu.module that receives the kernels.
  std::string gpuModuleName = "attn_kernels";
};

/// Names of the attributes the conversion sets on each attn.attention.
constexpr llvm::StringLiteral kKernelAttrName = "attn.kernel";
constexpr llvm::StringLiteral kMergeKernelAttrName = "attn.merge_kernel";

/// Generates the kernels of every attn.attention in `module` that has a
/// `tile`. Fails, with a diagnostic on the op, on an attention the
/// generators cannot handle (composed format, custom mask, unsupported tile).
LogicalResult convertAttnToGPU(ModuleOp module,
                               const ConvertAttnToGPUOptions &options);

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOGPU_ATTNTOGPU_H
