//===- Serialization.h - gpu.module to PTX and cubin ------------*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The compiler's back end as a C++ API: a ModuleOp holding gpu.modules built
// from upstream dialects goes through `attn-lower-to-nvvm`, LLVM's NVPTX back
// end (PTX) and ptxas (cubin). Options are validated before LLVM is called;
// each stage is timed; ptxas' resource report (registers, spills, shared
// memory) is parsed per kernel.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_TARGET_SERIALIZATION_H
#define ATTN_TARGET_SERIALIZATION_H

#include "attn/Dialect/Attn/Utils/NVPTXOptions.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
namespace gpu {
class GPUModuleOp;
} // namespace gpu
} // namespace mlir

namespace mlir::attn {

/// What ptxas reported for one kernel (`ptxas -v`).
struct KernelResourceUsage {
  std::string kernelName;
  int64_t registers = 0;
  int64_t spillStoreBytes = 0, spillLoadBytes = 0;
  int64_t stackFrameBytes = 0;
  /// Static shared memory (dynamic shared memory is a launch parameter).
  int64_t sharedMemBytes = 0;
};

/// Wall time of one stage.
struct StageTime {
  std::string stage;
  double milliseconds = 0;
};

/// The result of compiling one gpu.module.
struct CompiledModule {
  std::string gpuModuleName;
  std::string ptx;
  /// Empty unless a cubin was asked for.
  std::vector<char> cubin;
  llvm::SmallVector<KernelResourceUsage> kernels;
  /// "lower-to-nvvm", "llvm-to-ptx", "ptxas", in order.
  llvm::SmallVector<StageTime> stages;
  /// Full ptxas -v output.
  std::string ptxasLog;
};

/// Registers what lowering and serialization need in a context: dialects,
/// ConvertToLLVM interfaces, LLVM IR translations, the NVVM target model
/// and the host bufferization models (functions, tensor ops).
void registerTargetDialectsAndInterfaces(mlir::DialectRegistry &registry);

/// Lowers `module` in place with `attn-lower-to-nvvm` for `options`.
/// Diagnostics go to the context's handler.
llvm::Error lowerToNVVM(mlir::ModuleOp module, const NVPTXOptions &options,
                        double *milliseconds = nullptr);

/// Lowers `module` and serializes each of its gpu.modules to PTX and, when
/// `emitCubin`, to a cubin with ptxas from the CUDA toolkit (an error names
/// the path searched when ptxas is missing). `module` is modified.
llvm::Expected<std::vector<CompiledModule>>
compileGPUModules(mlir::ModuleOp module, const NVPTXOptions &options,
                  bool emitCubin);

/// Translates one lowered gpu.module (LLVM and NVVM dialects, an
/// #nvvm.target) to PTX text: LLVM IR, libdevice linked where math functions
/// are used, the target's O-level pipeline without the SLP vectorizer, and
/// the NVPTX code generator (lib/Target/LLVMToPTX.cpp says why).
llvm::Expected<std::string> translateToPTX(mlir::gpu::GPUModuleOp module,
                                           const NVPTXOptions &options);

/// Runs ptxas on `ptx`; returns the cubin and fills `usage` / `log`.
llvm::Expected<std::vector<char>>
runPtxas(llvm::StringRef ptx, const NVPTXOptions &options,
         llvm::SmallVectorImpl<KernelResourceUsage> &usage, std::string &log);

/// Parses `ptxas -v` output into per-kernel resource usage.
llvm::SmallVector<KernelResourceUsage> parsePtxasLog(llvm::StringRef log);

} // namespace mlir::attn

#endif // ATTN_TARGET_SERIALIZATION_H
