//===- attn-gen-kernel.cpp - Generate and compile attn kernels ------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// A test and bring-up driver for the kernel generator and the target back
// end, independent of the attn dialect: builds a decode kernel from flags and
// prints or writes it at the stage asked for.
//
//   attn-gen-kernel --head-dim=128 --qo-heads=32 --kv-heads=8 --page-size=16
//                   --dtype=bf16 --chip=sm_90 --emit=cubin -o decode.cubin
//
// --emit=mlir    the generated gpu.module (upstream dialects)
// --emit=nvvm    after attn-lower-to-nvvm
// --emit=ptx     PTX text
// --emit=cubin   cubin (ptxas) plus a manifest next to it (<output>.json)
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/DecodeKernel.h"
#include "attn/Target/KernelManifest.h"
#include "attn/Target/Serialization.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("attn-gen-kernel options");
static cl::opt<int64_t> headDim("head-dim", cl::init(128), cl::cat(category),
                                cl::desc("Head dimension (64, 128, 256)"));
static cl::opt<int64_t> qoHeads("qo-heads", cl::init(32), cl::cat(category),
                                cl::desc("Query heads"));
static cl::opt<int64_t> kvHeads("kv-heads", cl::init(8), cl::cat(category),
                                cl::desc("KV heads"));
static cl::opt<int64_t> pageSize("page-size", cl::init(16), cl::cat(category),
                                 cl::desc("Tokens per KV page"));
static cl::opt<std::string> dtype("dtype", cl::init("bf16"), cl::cat(category),
                                  cl::desc("bf16 or f16"));
static cl::opt<std::string> layout("layout", cl::init("NHD"),
                                   cl::cat(category),
                                   cl::desc("KV page layout: NHD or HND"));
static cl::opt<int64_t> warps("warps", cl::init(3), cl::cat(category),
                              cl::desc("Warps per CTA"));
static cl::opt<int64_t> stages("stages", cl::init(2), cl::cat(category),
                               cl::desc("cp.async stages per warp"));
static cl::opt<int64_t> minCTAs("min-ctas-per-sm", cl::init(4),
                                cl::cat(category),
                                cl::desc("Occupancy hint (0: none)"));
static cl::opt<std::string> kernelName("name", cl::init(""), cl::cat(category),
                                       cl::desc("Kernel symbol"));
static cl::opt<std::string> chip("chip", cl::init("sm_90"), cl::cat(category),
                                 cl::desc("Target SM"));
static cl::opt<std::string> features("features", cl::init(""),
                                     cl::cat(category),
                                     cl::desc("PTX features (default: per chip)"));
static cl::opt<unsigned> optLevel("opt-level", cl::init(3), cl::cat(category),
                                  cl::desc("LLVM optimisation level"));
static cl::opt<std::string> cudaPath("cuda-path", cl::init(""),
                                     cl::cat(category),
                                     cl::desc("CUDA toolkit root"));
static cl::opt<std::string> emit("emit", cl::init("mlir"), cl::cat(category),
                                 cl::desc("mlir | nvvm | ptx | cubin"));
static cl::opt<std::string> output("o", cl::init("-"), cl::cat(category),
                                   cl::desc("Output file"));
static cl::opt<bool> timing("timing", cl::init(false), cl::cat(category),
                            cl::desc("Print per-stage times to stderr"));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "attn-gen-kernel: " << message << "\n";
  return 1;
}

static int writeFile(llvm::StringRef path, llvm::StringRef bytes) {
  std::string err;
  auto file = mlir::openOutputFile(path, &err);
  if (!file)
    return fail(err);
  file->os() << bytes;
  file->keep();
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "attn kernel generator\n");

  attn::DecodeKernelSpec spec;
  spec.headDim = headDim;
  spec.numQoHeads = qoHeads;
  spec.numKVHeads = kvHeads;
  spec.pageSize = pageSize;
  spec.numWarps = warps;
  spec.numStages = stages;
  spec.minCTAsPerSM = minCTAs;
  spec.kernelName = kernelName;
  spec.chip = chip;
  auto dt = attn::parseDType(dtype);
  if (!dt)
    return fail(llvm::toString(dt.takeError()));
  spec.dtype = *dt;
  auto kvLayout = attn::parseLayout(layout);
  if (!kvLayout)
    return fail(llvm::toString(kvLayout.takeError()));
  spec.layout = *kvLayout;
  if (llvm::Error err = spec.validate())
    return fail(llvm::toString(std::move(err)));

  attn::NVPTXOptions target;
  target.chip = chip;
  target.features = features;
  target.optLevel = optLevel;
  target.cudaPath = cudaPath;
  if (emit != "mlir")
    if (llvm::Error err = target.validate())
      return fail(llvm::toString(std::move(err)));

  DialectRegistry registry;
  attn::registerKernelGenDialects(registry);
  attn::registerTargetDialectsAndInterfaces(registry);
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(UnknownLoc::get(&context));
  if (failed(attn::buildDecodeKernel(*module, spec)))
    return 1;
  if (failed(verify(*module)))
    return fail("generated IR does not verify");

  if (emit == "mlir" || emit == "nvvm") {
    if (emit == "nvvm")
      if (llvm::Error err = attn::lowerToNVVM(*module, target))
        return fail(llvm::toString(std::move(err)));
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    return writeFile(output, text);
  }
  if (emit != "ptx" && emit != "cubin")
    return fail("unknown --emit '" + emit + "' (mlir, nvvm, ptx, cubin)");

  auto compiled = attn::compileGPUModules(*module, target, emit == "cubin");
  if (!compiled)
    return fail(llvm::toString(compiled.takeError()));
  attn::CompiledModule &result = compiled->front();
  if (timing) {
    for (const attn::StageTime &stage : result.stages)
      llvm::errs() << llvm::format("%-14s %8.1f ms\n", stage.stage.c_str(),
                                   stage.milliseconds);
    for (const attn::KernelResourceUsage &k : result.kernels)
      llvm::errs() << k.kernelName << ": " << k.registers << " registers, "
                   << k.spillStoreBytes << "+" << k.spillLoadBytes
                   << " bytes spilled, " << k.sharedMemBytes
                   << " bytes static smem\n";
  }
  if (emit == "ptx")
    return writeFile(output, result.ptx);

  if (output == "-")
    return fail("--emit=cubin needs -o <file>");
  if (int rc = writeFile(output, llvm::StringRef(result.cubin.data(),
                                                 result.cubin.size())))
    return rc;
  const attn::KernelResourceUsage *usage =
      result.kernels.empty() ? nullptr : &result.kernels.front();
  llvm::json::Array kernels;
  kernels.push_back(attn::getDecodeKernelManifest(spec, usage));
  llvm::json::Object manifest = attn::getManifest(
      target, std::move(kernels), llvm::sys::path::filename(output), "");
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest))) << "\n";
  return writeFile(output + ".json", text);
}
