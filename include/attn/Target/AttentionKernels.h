//===- AttentionKernels.h - a prepared attn module to kernels ----*- C++ -*-===//
//
// The back half of the compiler in one call: attn-outline-kernels and
// convert-attn-to-gpu on a module whose attentions have tiles (after
// attn-prepare-pipeline), then NVVM, PTX and cubin for the generated
// kernels, and the manifest the runtime loads them with, written from the
// kernels' launch contracts. The compile driver and the C API both use it.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_TARGET_ATTENTIONKERNELS_H
#define ATTN_TARGET_ATTENTIONKERNELS_H

#include "attn/Target/Serialization.h"

#include "llvm/Support/JSON.h"

namespace mlir::gpu {
class GPUModuleOp;
} // namespace mlir::gpu

namespace mlir::attn {

/// Every kernel of one module of attentions, in one image.
struct AttentionKernels {
  std::string ptx;
  /// Empty unless a cubin was asked for.
  std::vector<char> cubin;
  /// docs/Manifest.md, with each kernel's ptxas resources.
  llvm::json::Object manifest;
  llvm::SmallVector<KernelResourceUsage> usage;
  /// "outline", "lower-tiles", "lower-to-nvvm", "llvm-to-ptx", "ptxas".
  llvm::SmallVector<StageTime> stages;
};

/// What to compile.
struct AttentionKernelOptions {
  /// "none": only the manifest (the kernels' contracts, no code); "ptx";
  /// "cubin".
  enum class Emit { None, PTX, Cubin };
  Emit emit = Emit::Cubin;
  /// When >= 0, only the kernels of tile candidate `candidate` of every
  /// attention (its attention kernel and the merge kernel it pairs with):
  /// the runtime compiles the candidate a batch picks on first use.
  int64_t candidate = -1;
};

/// An error unless `module` holds an op that attn compiles kernels for
/// (attn.attention, merge_states, append_kv, copy_indices, copy_by_table):
/// what the compile driver and the C API check before they prepare it.
llvm::Error checkHoldsKernelOps(mlir::ModuleOp module);

/// Generates and compiles the kernels of every tiled attn.attention in
/// `module` (the module gains the generated gpu.module). Diagnostics of the
/// passes go to the context's handler; the error then says which stage
/// failed.
llvm::Expected<AttentionKernels>
compileAttentionKernels(mlir::ModuleOp module, const NVPTXOptions &target,
                        const AttentionKernelOptions &options);

/// The back half of compileAttentionKernels, for kernels already outlined
/// into `gpuModule` (a gpu.module of `module`, in the tile-level form): the
/// manifest entries from the launch contracts, convert-attn-to-gpu on
/// `module`, then NVVM, PTX and (Emit::Cubin) ptxas on a copy of
/// `gpuModule`. `attn-serialize-kernels` calls it, so a pipeline's kernels
/// are byte for byte what attn-compile emits.
llvm::Expected<AttentionKernels>
compileOutlinedKernels(mlir::ModuleOp module, mlir::gpu::GPUModuleOp gpuModule,
                       const NVPTXOptions &target,
                       AttentionKernelOptions::Emit emit);

} // namespace mlir::attn

#endif // ATTN_TARGET_ATTENTIONKERNELS_H
