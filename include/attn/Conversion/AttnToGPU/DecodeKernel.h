//===- DecodeKernel.h - Generated paged-KV decode attention -----*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Builds, with MLIR builders and upstream dialects only (gpu, nvgpu, nvvm,
// vector, scf, arith, memref, math), a gpu.module holding a paged-KV batch
// decode attention kernel for a DecodeKernelSpec. The kernel's arguments and
// launch shape are those of getDecodeLaunchInfo (KernelSpec.h):
//
//   kernel(q, k_cache, v_cache, kv_indptr, kv_indices, kv_last_page_len,
//          out, lse, sm_scale)         grid (num_kv_heads, batch)
//
// Every buffer is a bare device pointer (lowered with the bare-pointer memref
// calling convention); sm_scale is an f32. LSE is base 2; a request with no
// keys yields output 0 and LSE -inf.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOGPU_DECODEKERNEL_H
#define ATTN_CONVERSION_ATTNTOGPU_DECODEKERNEL_H

#include "attn/Conversion/AttnToGPU/KernelSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace mlir {
class DialectRegistry;
namespace gpu {
class GPUModuleOp;
} // namespace gpu
} // namespace mlir

namespace attn {

/// Appends `gpu.module @<gpuModuleName>` with the decode kernel for `spec` to
/// `module` (creating the gpu.module if absent, so several kernels can share
/// one) and marks `module` as a GPU container. An invalid spec is reported
/// as an error at `module`'s location and nothing is built.
mlir::LogicalResult buildDecodeKernel(mlir::ModuleOp module,
                                      const DecodeKernelSpec &spec,
                                      llvm::StringRef gpuModuleName =
                                          "attn_kernels");

/// Registers every dialect the generated kernels are built from.
void registerKernelGenDialects(mlir::DialectRegistry &registry);

} // namespace attn

#endif // ATTN_CONVERSION_ATTNTOGPU_DECODEKERNEL_H
