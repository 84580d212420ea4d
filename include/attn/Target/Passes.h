//===- Passes.h - attn passes that embed kernels in a program ---*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// attn-serialize-kernels, attn-lower-host-calls (Passes.td) and
// attn-to-llvm-pipeline: a tensor-level module with attention in it to the
// LLVM dialect, its kernels embedded, its attn ops calls of the runtime.
// They link the whole compiler (AttnTarget), hence their own registration.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_TARGET_PASSES_H
#define ATTN_TARGET_PASSES_H

#include "attn/Dialect/Attn/Utils/TargetInfo.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

namespace mlir::attn {

#define GEN_PASS_DECL
#include "attn/Target/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "attn/Target/Passes.h.inc"

/// The string attribute attn-serialize-kernels puts on each gpu.binary: its
/// manifest (docs/Manifest.md).
inline constexpr llvm::StringLiteral kManifestAttrName = "attn.manifest";

/// The unit attribute that marks the host function argument (an `i64` or
/// `!llvm.ptr` holding a CUstream) whose stream attn-lower-host-calls passes
/// to the runtime calls of that function.
inline constexpr llvm::StringLiteral kStreamArgAttrName = "attn.stream";

/// Registers `attn-to-llvm-pipeline{chip= features= format=}`: attn IR on
/// tensors to the LLVM dialect (prepare, outline, serialize, one-shot
/// bufferization, attn-lower-host-calls, host code to LLVM).
void registerAttnToLLVMPipeline();

/// The passes above (registerAttnTargetPasses, generated) and the pipeline.
inline void registerAttnTargetPassesAndPipelines() {
  registerAttnTargetPasses();
  registerAttnToLLVMPipeline();
}

} // namespace mlir::attn

#endif // ATTN_TARGET_PASSES_H
