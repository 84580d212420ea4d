//===- Serialization.cpp - gpu.module to PTX and cubin --------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Runs attn-lower-to-nvvm, translates each gpu.module to PTX (LLVMToPTX.cpp:
// LLVM's NVPTX back end, libdevice linked from the toolkit when math functions
// are used), then assembles the PTX with ptxas -v, keeping its resource report.
// Invoking ptxas here rather than through gpu-module-to-binary keeps the
// report and gives one place to say what is missing.
//
//===----------------------------------------------------------------------===//

#include "attn/Target/Serialization.h"
#include "attn/Pipelines/Pipelines.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"

#include <chrono>

#define DEBUG_TYPE "attn-target"

using namespace mlir;
using namespace mlir::attn;
using llvm::createStringError;

namespace {
/// Milliseconds since construction.
class Stopwatch {
public:
  double elapsedMs() const {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - start)
        .count();
  }

private:
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
};

/// Removes a temporary file when it goes out of scope.
struct TempFile {
  llvm::SmallString<128> path;
  ~TempFile() {
    if (!path.empty())
      llvm::sys::fs::remove(path);
  }
};
} // namespace

void mlir::attn::registerTargetDialectsAndInterfaces(
    DialectRegistry &registry) {
  registry.insert<affine::AffineDialect, arith::ArithDialect,
                  cf::ControlFlowDialect, func::FuncDialect, gpu::GPUDialect,
                  index::IndexDialect, LLVM::LLVMDialect, math::MathDialect,
                  memref::MemRefDialect, nvgpu::NVGPUDialect,
                  NVVM::NVVMDialect, scf::SCFDialect, ub::UBDialect,
                  vector::VectorDialect>();
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  vector::registerConvertVectorToLLVMInterface(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  // attn-to-llvm-pipeline's host bufferization: function boundaries and the
  // tensor ops around the attn ops (tensor.empty destinations, tensor.dim).
  registry.insert<bufferization::BufferizationDialect>();
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(
      registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
}

llvm::Error mlir::attn::lowerToNVVM(ModuleOp module,
                                    const NVPTXOptions &options,
                                    double *milliseconds) {
  if (llvm::Error err = options.validate())
    return err;
  Stopwatch watch;
  PassManager pm(module.getContext());
  LowerToNVVMOptions pipeline;
  pipeline.chip = options.chip;
  pipeline.features = options.getFeatures();
  pipeline.optLevel = options.optLevel;
  buildLowerToNVVMPipeline(pm, pipeline);
  if (failed(pm.run(module)))
    return createStringError("attn-lower-to-nvvm failed (see diagnostics)");
  if (milliseconds)
    *milliseconds = watch.elapsedMs();
  return llvm::Error::success();
}

llvm::SmallVector<KernelResourceUsage>
mlir::attn::parsePtxasLog(llvm::StringRef log) {
  llvm::SmallVector<KernelResourceUsage> kernels;
  llvm::Regex entry("Compiling entry function '([^']+)'");
  llvm::Regex frame("([0-9]+) bytes stack frame, ([0-9]+) bytes spill "
                    "stores, ([0-9]+) bytes spill loads");
  llvm::Regex regs("Used ([0-9]+) registers");
  llvm::Regex smem("([0-9]+) bytes smem");
  llvm::SmallVector<llvm::StringRef> lines;
  log.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    llvm::SmallVector<llvm::StringRef, 4> m;
    if (entry.match(line, &m)) {
      kernels.push_back({});
      kernels.back().kernelName = m[1].str();
      continue;
    }
    if (kernels.empty())
      continue;
    KernelResourceUsage &k = kernels.back();
    if (frame.match(line, &m)) {
      m[1].getAsInteger(10, k.stackFrameBytes);
      m[2].getAsInteger(10, k.spillStoreBytes);
      m[3].getAsInteger(10, k.spillLoadBytes);
    }
    if (regs.match(line, &m))
      m[1].getAsInteger(10, k.registers);
    if (smem.match(line, &m))
      m[1].getAsInteger(10, k.sharedMemBytes);
  }
  return kernels;
}

/// Finds ptxas: <cuda>/bin/ptxas, then PATH.
static llvm::Expected<std::string> findPtxas(const NVPTXOptions &options) {
  llvm::SmallString<256> path(options.getCudaPath());
  llvm::sys::path::append(path, "bin", "ptxas");
  if (llvm::sys::fs::can_execute(path))
    return path.str().str();
  if (llvm::ErrorOr<std::string> onPath =
          llvm::sys::findProgramByName("ptxas"))
    return *onPath;
  return createStringError(
      "ptxas not found: looked for %s and on PATH; set the CUDA toolkit "
      "path (--cuda-path / CUDA_HOME)",
      path.c_str());
}

llvm::Expected<std::vector<char>>
mlir::attn::runPtxas(llvm::StringRef ptx, const NVPTXOptions &options,
                     llvm::SmallVectorImpl<KernelResourceUsage> &usage,
                     std::string &log) {
  llvm::Expected<std::string> ptxas = findPtxas(options);
  if (!ptxas)
    return ptxas.takeError();
  TempFile input, output, messages;
  int fd;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
          "attn-kernel", "ptx", fd, input.path))
    return llvm::errorCodeToError(ec);
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << ptx;
  }
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
          "attn-kernel", "cubin", output.path))
    return llvm::errorCodeToError(ec);
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
          "attn-ptxas", "log", messages.path))
    return llvm::errorCodeToError(ec);

  std::string arch = "-arch=" + options.chip;
  llvm::SmallVector<std::string> extra;
  for (llvm::StringRef opt : llvm::split(options.ptxasOptions, ' '))
    if (!opt.empty())
      extra.push_back(opt.str());
  llvm::SmallVector<llvm::StringRef> argv = {*ptxas, arch, "-v"};
  for (const std::string &opt : extra)
    argv.push_back(opt);
  argv.append({input.path.str(), "-o", output.path.str()});
  std::optional<llvm::StringRef> redirects[] = {
      std::nullopt, messages.path.str(), messages.path.str()};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(*ptxas, argv, std::nullopt, redirects,
                                     /*SecondsToWait=*/0, /*MemoryLimit=*/0,
                                     &execError);
  if (auto buf = llvm::MemoryBuffer::getFile(messages.path))
    log = (*buf)->getBuffer().str();
  if (rc != 0)
    return createStringError("ptxas failed (exit %d%s%s):\n%s", rc,
                             execError.empty() ? "" : ", ",
                             execError.c_str(), log.c_str());
  auto cubin = llvm::MemoryBuffer::getFile(output.path, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
  if (!cubin)
    return createStringError("cannot read ptxas output %s",
                             output.path.c_str());
  usage.append(parsePtxasLog(log));
  return std::vector<char>((*cubin)->getBufferStart(),
                           (*cubin)->getBufferEnd());
}

llvm::Expected<std::vector<CompiledModule>>
mlir::attn::compileGPUModules(ModuleOp module, const NVPTXOptions &options,
                              bool emitCubin) {
  double lowerMs = 0;
  if (llvm::Error err = lowerToNVVM(module, options, &lowerMs))
    return std::move(err);

  std::vector<CompiledModule> results;
  for (auto gpuModule : module.getOps<gpu::GPUModuleOp>()) {
    CompiledModule result;
    result.gpuModuleName = gpuModule.getName().str();
    result.stages.push_back({"lower-to-nvvm", lowerMs});

    Stopwatch toPTX;
    llvm::Expected<std::string> ptx = translateToPTX(gpuModule, options);
    if (!ptx)
      return ptx.takeError();
    result.ptx = std::move(*ptx);
    result.stages.push_back({"llvm-to-ptx", toPTX.elapsedMs()});

    if (emitCubin) {
      Stopwatch assemble;
      llvm::Expected<std::vector<char>> cubin =
          runPtxas(result.ptx, options, result.kernels, result.ptxasLog);
      if (!cubin)
        return cubin.takeError();
      result.cubin = std::move(*cubin);
      result.stages.push_back({"ptxas", assemble.elapsedMs()});
    }
    results.push_back(std::move(result));
  }
  if (results.empty())
    return createStringError("the module holds no gpu.module");
  return results;
}
