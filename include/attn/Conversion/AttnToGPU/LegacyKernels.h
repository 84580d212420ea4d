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

#ifndef ATTN_CONVERSION_ATTNTOGPU_LEGACYKERNELS_H
#define ATTN_CONVERSION_ATTNTOGPU_LEGACYKERNELS_H

#include "attn/Conversion/AttnToGPU/DecodeKernel.h"
#include "attn/Conversion/AttnToGPU/PrefillKernel.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir::attn {

class AttentionOp;

struct LegacyKernelOptions {
  /// Target SM the kernels are generated for.
  std::string chip = "sm_90";
  /// The gpu.module that receives the kernels.
  std::string gpuModuleName = "attn_kernels";
};

/// Names of the attributes the conversion sets on each attn.attention.
constexpr llvm::StringLiteral kKernelAttrName = "attn.kernel";
constexpr llvm::StringLiteral kMergeKernelAttrName = "attn.merge_kernel";

/// One kernel the conversion generated, with the spec its manifest entry is
/// written from (lib/Target's get*KernelManifest).
struct GeneratedKernel {
  enum class Kind { Decode, Prefill, Merge };
  Kind kind;
  std::string name;
  ::attn::DecodeKernelSpec decode;
  ::attn::PrefillKernelSpec prefill;
  ::attn::MergeKernelSpec merge;
  /// Decode: the variant parameters (name, kind) in argument order.
  llvm::SmallVector<std::pair<std::string, std::string>> params;
  /// Merge: the head counts of the attention it serves.
  int64_t numQoHeads = 0, numKVHeads = 0;
};

/// Generates the kernels of every attn.attention in `module` that has a
/// `tile`, and, when `generated` is given, appends each distinct kernel to
/// it. Fails, with a diagnostic on the op, on an attention the generators
/// cannot handle (composed format, custom mask, unsupported tile).
LogicalResult
buildLegacyKernels(ModuleOp module, const LegacyKernelOptions &options,
                 SmallVectorImpl<GeneratedKernel> *generated = nullptr);

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOGPU_LEGACYKERNELS_H
