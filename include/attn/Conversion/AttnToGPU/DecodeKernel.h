//===- DecodeKernel.h - Generated split-KV decode attention -----*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Builds, with MLIR builders and upstream dialects only (gpu, nvgpu, nvvm,
// vector, scf, arith, memref, math), the kernels of decode attention on the
// planner's work list (attn/Runtime/Plan.h, docs/Manifest.md):
//
//   attention  persistent, grid = plan.num_ctas, one CTA walks its work
//              items; arguments as getDecodeLaunchInfo lists them:
//              cta_indptr, work_items, partial_o, partial_lse, slot_rows,
//              q, k_cache, v_cache, o, lse, qo_indptr, kv_indptr,
//              [kv_indices, kv_last_len,] sm_scale, <variant parameters>
//   merge      one CTA per (merge unit, row), grid-strided: plan,
//              merge_indptr, merge_units, partial_o, partial_lse,
//              slot_rows, o, lse, qo_indptr [, kv_indptr, kv_last_len,
//              <variant parameters> with an output transform]
//
// Every buffer is a bare device pointer (lowered with the bare-pointer memref
// calling convention); scalars are i32/f32. LSE is base 2; a row with no
// visible key yields output 0 and LSE -inf (or the sink's LSE).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOGPU_DECODEKERNEL_H
#define ATTN_CONVERSION_ATTNTOGPU_DECODEKERNEL_H

#include "attn/Conversion/AttnToGPU/KernelSpec.h"
#include "attn/Conversion/AttnToGPU/VariantParams.h"
#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace attn {

/// Appends the decode kernel for `spec`, with the hooks of `variants`
/// inlined, to `gpu.module @<gpuModuleName>` in `module` (created if absent;
/// `module` becomes a GPU container). Returns the kernel's symbol; a kernel
/// of that name already there is reused (identical specs, identical
/// kernels). An invalid spec is reported at `module` and nothing is built.
mlir::FailureOr<std::string>
buildDecodeKernel(mlir::ModuleOp module, const DecodeKernelSpec &spec,
                  llvm::ArrayRef<mlir::attn::VariantOp> variants = {},
                  llvm::StringRef gpuModuleName = "attn_kernels");

/// Appends the LSE merge kernel for `spec` (deduplicated by name likewise).
mlir::FailureOr<std::string>
buildMergeKernel(mlir::ModuleOp module, const MergeKernelSpec &spec,
                 llvm::StringRef gpuModuleName = "attn_kernels");
/// The same, for a spec with `outputTransform`: the output-transform hooks
/// of `variants` apply to the merged rows; spec.params must be
/// getVariantParamArgs(variants) (names and kinds).
mlir::FailureOr<std::string>
buildMergeKernel(mlir::ModuleOp module, const MergeKernelSpec &spec,
                 llvm::ArrayRef<mlir::attn::VariantOp> variants,
                 llvm::StringRef gpuModuleName = "attn_kernels");

/// Registers every dialect the generated kernels are built from.
void registerKernelGenDialects(mlir::DialectRegistry &registry);

} // namespace attn

#endif // ATTN_CONVERSION_ATTNTOGPU_DECODEKERNEL_H
