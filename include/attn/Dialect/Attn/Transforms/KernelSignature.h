//===- KernelSignature.h - The argument lists of generated kernels -*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// What a generated kernel takes, in order, and how the runtime binds it: the
// plan arrays by name, everything else by the caller's names
// (docs/Manifest.md). Each argument of the gpu.func carries its name as
// `attn.name`; a variant parameter also carries its declared type as
// `attn.param_type`. The kernel manifest is written from these attributes
// and the `attn.launch` contract, nothing else.
//
// Variant parameters trail the fixed arguments, variant after variant, in
// declaration order; a name an earlier variant already used becomes
// `<variant>_<name>`:
//
//   declared type        kernel argument     manifest kind
//   f32                  f32                 "f32"
//   i32                  i32                 "i32"
//   i1                   i32 (0 / non-zero)  "i32"
//   memref<?xf32>        flat f32 buffer     "ptr" ([num_qo_heads])
//
// Tensor maps (tiles with kv_tma) are `!llvm.ptr` arguments in the gpu.func
// and 128-byte by-value parameters (`.param .align 64 .b8 [128]`, read in
// place as `__grid_constant__`) in the PTX: the function lists them in
// `attn.grid_constant_args`, and each names the buffer argument it describes
// in `attn.tensor_map_of` (manifest kind "tensormap", with its "source").
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_TRANSFORMS_KERNELSIGNATURE_H
#define ATTN_DIALECT_ATTN_TRANSFORMS_KERNELSIGNATURE_H

#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <string>

namespace mlir::attn {

/// The attributes a kernel's arguments carry.
inline constexpr llvm::StringLiteral kArgNameAttr = "attn.name";
inline constexpr llvm::StringLiteral kArgParamTypeAttr = "attn.param_type";
inline constexpr llvm::StringLiteral kTensorMapOfAttr = "attn.tensor_map_of";
/// On a kernel: the indices of its by-value tensor-map parameters.
inline constexpr llvm::StringLiteral kGridConstantArgsAttr =
    "attn.grid_constant_args";

/// A variant parameter as a kernel argument: its unique argument name, the
/// type it travels as, and its declared type.
struct VariantParamArg {
  std::string name;
  Type argType;
  Type declaredType;
};

/// The kernel arguments the parameters of `variants` become, in order.
/// Fails, with a diagnostic on the variant, on a type no argument carries.
FailureOr<SmallVector<VariantParamArg>>
getVariantParamArgs(ArrayRef<VariantOp> variants);

/// One argument of a kernel.
struct KernelArgument {
  std::string name;
  Type type;
  /// The declared type of a variant parameter, else null.
  Type paramType;
  /// A tensor map: the name of the buffer argument it describes.
  std::string tensorMapOf = {};
};

/// The flat global buffer of `elementType` a pointer argument is (the
/// bare-pointer convention needs a static shape; kernels index by hand).
MemRefType getKernelBufferType(Type elementType);

/// The arguments of an attention kernel: the plan's work list and partial
/// slots, then q, k_cache, v_cache, o, lse, qo_indptr, kv_indptr,
/// [kv_indices, page_stride, kv_last_len, num_pages, index_error (paged) |
/// kv_token_stride, kv_head_stride (ragged, strided = true)],
/// [custom_mask, mask_indptr], [k_map, v_map (kv_tma: tensor maps of
/// k_cache and v_cache)], sm_scale and the variants' parameters.
SmallVector<KernelArgument>
getAttentionKernelArguments(Type dtype, bool paged, bool stridedKV,
                            bool customMask, bool kvTma,
                            ArrayRef<VariantParamArg> params);

/// The arguments of a merge kernel: plan, merge_indptr, merge_units,
/// partial_o, partial_lse, slot_rows, o, lse, qo_indptr, and with an output
/// transform kv_indptr, [kv_last_len (paged)] and the variants' parameters.
SmallVector<KernelArgument>
getMergeKernelArguments(Type dtype, bool outputTransform, bool paged,
                        ArrayRef<VariantParamArg> params);

/// The arguments of a merge_states kernel of `numStates` states:
/// num_rows, heads, v0 .. v{n-1}, v_stride, s0 .. s{n-1}, s_stride, o,
/// o_stride, lse, lse_stride, [mask].
SmallVector<KernelArgument> getMergeStatesKernelArguments(Type dtype,
                                                          int64_t numStates,
                                                          bool masked);

/// The arguments of an append_kv kernel: num_rows, heads, batch, num_pages,
/// key, value, key_stride, value_stride, batch_indices, positions,
/// kv_indptr, kv_indices, k_cache, v_cache, page_stride, slot_stride,
/// head_stride, dropped.
SmallVector<KernelArgument> getAppendKVKernelArguments(Type dtype);

/// The arguments of a copy_indices kernel of `pairs` arrays: num_rows (the
/// words of all pairs), then n<i>, src<i>, dst<i> for each pair.
SmallVector<KernelArgument> getCopyIndicesKernelArguments(MLIRContext *ctx,
                                                          int64_t pairs);

/// The arguments of a copy_by_table kernel: num_rows (the words the grid
/// is sized for), table (the i64 rows the kernel reads when it runs).
SmallVector<KernelArgument> getCopyByTableKernelArguments(MLIRContext *ctx);

/// Appends `gpu.func @name` with `args` to `gpuModule`: a kernel of
/// `launch.getThreads()` threads carrying the contract as `attn.launch`.
gpu::GPUFuncOp createKernel(OpBuilder &b, Location loc,
                            gpu::GPUModuleOp gpuModule, StringRef name,
                            ArrayRef<KernelArgument> args, LaunchAttr launch);

/// The argument of `func` named `name` (by `attn.name`), or null.
BlockArgument getKernelArgument(FunctionOpInterface func, StringRef name);

} // namespace mlir::attn

#endif // ATTN_DIALECT_ATTN_TRANSFORMS_KERNELSIGNATURE_H
