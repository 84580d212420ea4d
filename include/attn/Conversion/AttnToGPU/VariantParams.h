//===- VariantParams.h - Variant parameters as kernel arguments -*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The one ABI every generated attention kernel (decode and prefill) uses for
// the runtime parameters of its variants (`attn.variant @v(name : type)`):
//
//   declared type        kernel argument     launch-contract kind
//   f32                  f32                 "f32"
//   i32                  i32                 "i32"
//   i1                   i32 (0 / non-zero)  "i32"
//   memref<?xf32>        flat f32 buffer     "ptr" (dtype f32, [num_qo_heads])
//
// The arguments trail the kernel's fixed ones, variant after variant, in
// declaration order; a name an earlier variant already used is qualified as
// `<variant>_<name>`. Each parameter argument carries `attn.param_type` (the
// declared type), and the hooks see an i1 rebuilt from its i32 and a table
// as the global buffer (the cloned `memref.load` reads it).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOGPU_VARIANTPARAMS_H
#define ATTN_CONVERSION_ATTNTOGPU_VARIANTPARAMS_H

#include "attn/Conversion/AttnToGPU/KernelSpec.h"

#include "mlir/IR/Types.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"

namespace mlir {
class OpBuilder;
namespace gpu {
class GPUFuncOp;
} // namespace gpu
namespace attn {
class VariantOp;
} // namespace attn
} // namespace mlir

namespace attn {

/// A variant parameter as a kernel argument: its (unique) argument name,
/// kind ("f32", "i32" or "ptr" for a memref<?xf32> table) and declared type.
struct VariantParamArg {
  std::string name;
  std::string kind;
  mlir::Type type;
};

/// The launch-contract kind of a declared parameter type, or failure for a
/// type no kernel argument carries.
mlir::FailureOr<std::string> getVariantParamKind(mlir::Type type);

/// The kernel arguments `variants`' parameters become, in order. Fails,
/// with a diagnostic on the variant, on a type no argument can carry.
mlir::FailureOr<llvm::SmallVector<VariantParamArg>>
getVariantParamArgs(llvm::ArrayRef<mlir::attn::VariantOp> variants);

/// Whether `kind` is one a parameter argument may have ("f32", "i32",
/// "ptr").
bool isVariantParamKind(llvm::StringRef kind);

/// The launch-contract entry of a parameter argument: a scalar, or for
/// "ptr" a per-query-head f32 table.
KernelArg getVariantParamKernelArg(llvm::StringRef name, llvm::StringRef kind);

/// Records each parameter's declared type on the trailing `params.size()`
/// arguments of `func` (`attn.param_type`).
void setVariantParamTypes(mlir::gpu::GPUFuncOp func,
                          llvm::ArrayRef<VariantParamArg> params);

/// The values the hooks bind to the trailing `count` arguments of `func`:
/// the argument itself, or `arg != 0` where `attn.param_type` is i1. Creates
/// those comparisons at `b`'s insertion point (inside `func`).
llvm::SmallVector<mlir::Value>
getVariantParamValues(mlir::OpBuilder &b, mlir::gpu::GPUFuncOp func,
                      size_t count);

} // namespace attn

#endif // ATTN_CONVERSION_ATTNTOGPU_VARIANTPARAMS_H
