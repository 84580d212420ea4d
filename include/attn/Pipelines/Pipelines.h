//===- Pipelines.h - attn pass pipelines ------------------------*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// `attn-lower-to-nvvm`: lowers a module whose gpu.modules are built from
// upstream dialects (gpu, nvgpu, nvvm, vector, scf, arith, memref, math,
// llvm) to gpu.modules of the LLVM/NVVM dialects with an #nvvm.target
// attached, ready for serialization (attn/Target/Serialization.h). Kernels use
// the bare-pointer memref calling convention: one pointer per buffer.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_PIPELINES_PIPELINES_H
#define ATTN_PIPELINES_PIPELINES_H

#include "attn/Dialect/Attn/Utils/TargetInfo.h"

#include "mlir/Pass/PassOptions.h"

#include <memory>

namespace mlir {
class OpPassManager;
class Pass;
} // namespace mlir

namespace mlir::attn {

/// Options of `attn-lower-to-nvvm`. The registered pipeline refuses a chip
/// and features that NVPTXOptions::validate refuses, with its message;
/// callers of buildLowerToNVVMPipeline check them first (LLVM aborts the
/// process on a PTX version too old for the chip when it serializes).
struct LowerToNVVMOptions
    : public mlir::PassPipelineOptions<LowerToNVVMOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("Target SM"),
                           llvm::cl::init(kDefaultChip)};
  Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features, e.g. +ptx80 (default: the chip's)"),
      llvm::cl::init("")};
  Option<unsigned> optLevel{*this, "opt-level",
                            llvm::cl::desc("LLVM optimisation level"),
                            llvm::cl::init(3)};
  Option<bool> barePtrCallConv{
      *this, "bare-ptr-call-conv",
      llvm::cl::desc("Pass memref kernel arguments as bare pointers"),
      llvm::cl::init(true)};
  Option<bool> approximateTrig{
      *this, "approximate-trig",
      llvm::cl::desc("Lower f32 sin/cos through a Cody-Waite reduction and "
                     "the hardware approximation, f32 tanh to tanh.approx "
                     "(attn-approximate-trig)"),
      llvm::cl::init(true)};
};

/// Appends the lowering to `pm` (anchored on builtin.module).
void buildLowerToNVVMPipeline(mlir::OpPassManager &pm,
                              const LowerToNVVMOptions &options);

/// A pass on gpu.module (after convert-gpu-to-nvvm) that gives the
/// zero-sized workgroup globals standing for dynamic shared memory external
/// linkage, so NVPTX emits `.extern .shared .b8 name[]` rather than demoting
/// them to a 1-byte internal array.
std::unique_ptr<mlir::Pass> createExternalizeDynamicSharedMemoryPass();
/// Marks the llvm.func arguments a kernel lists in attn.grid_constant_args
/// (tensor maps) as by-value grid constants (GridConstantParams.cpp).
std::unique_ptr<mlir::Pass> createGridConstantParamsPass();

/// `attn-approximate-trig`: reduces f32 math.sin/math.cos into [-pi, pi]
/// (three-term Cody-Waite) and marks them `afn`, so they lower to
/// sin.approx/cos.approx rather than libdevice's sinf/cosf with its local-
/// memory slow path. Absolute error about 1e-6 for |x| < 2^28 * 2pi. f32
/// math.tanh becomes llvm.intr.tanh {afn}: tanh.approx.f32 (relative error
/// about 2^-11).
std::unique_ptr<mlir::Pass> createApproximateTrigPass();

/// Registers `attn-lower-to-nvvm` and the passes above.
void registerAttnPipelines();

/// Registers `attn-to-nvvm-pipeline`: attn IR to LLVM/NVVM kernels.
void registerAttnToNVVMPipeline();

} // namespace mlir::attn

#endif // ATTN_PIPELINES_PIPELINES_H
