//===- attn-compile.cpp - the attn compile driver -------------------------===//
//
// Compiles a file of attn IR: runs the preparation passes one by one (timed),
// reports what was chosen for every attention (heads, format, variants, tile,
// shared memory), generates the kernels and emits PTX / cubin with the
// manifest the runtime loads them with, reporting what ptxas made of each
// kernel. This is what `make demo` runs.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/AttnToGPU.h"
#include "attn/Dialect/Attn/IR/TileLayout.h"
#include "attn/Dialect/Attn/Transforms/Passes.h"
#include "attn/Dialect/Attn/Transforms/TileHeuristics.h"
#include "attn/InitAllDialects.h"
#include "attn/Target/AttentionKernels.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace mlir;
using namespace mlir::attn;

static llvm::cl::OptionCategory attnCategory("attn-compile options");

static llvm::cl::opt<std::string> inputFile(llvm::cl::Positional,
                                            llvm::cl::desc("<input .mlir>"),
                                            llvm::cl::init("-"),
                                            llvm::cl::cat(attnCategory));
static llvm::cl::opt<std::string>
    outputFile("o", llvm::cl::desc("write the prepared IR here"),
               llvm::cl::value_desc("file"), llvm::cl::init(""),
               llvm::cl::cat(attnCategory));
static llvm::cl::opt<std::string>
    chip("chip", llvm::cl::desc("target GPU (sm_80 ... sm_120a)"),
         llvm::cl::init(kDefaultChip), llvm::cl::cat(attnCategory));
static llvm::cl::opt<std::string> features(
    "features",
    llvm::cl::desc("PTX features, e.g. +ptx80 (default: the chip's)"),
    llvm::cl::init(""), llvm::cl::cat(attnCategory));
enum class Emit { None, PTX, Cubin };
static llvm::cl::opt<Emit> emit(
    "emit", llvm::cl::desc("what to emit"), llvm::cl::init(Emit::Cubin),
    llvm::cl::values(clEnumValN(Emit::None, "none", "only the analysis"),
                     clEnumValN(Emit::PTX, "ptx", "PTX and the manifest"),
                     clEnumValN(Emit::Cubin, "cubin",
                                "PTX, cubin (ptxas) and the manifest")),
    llvm::cl::cat(attnCategory));
static llvm::cl::opt<std::string> outputDir(
    "output-dir",
    llvm::cl::desc("write attn_kernels.{ptx,cubin,json} here (default: next "
                   "to nothing, the report only)"),
    llvm::cl::value_desc("dir"), llvm::cl::init(""),
    llvm::cl::cat(attnCategory));
static llvm::cl::opt<std::string> cudaPath(
    "cuda-path", llvm::cl::desc("CUDA toolkit (ptxas, libdevice); default "
                                "$CUDA_HOME or /usr/local/cuda"),
    llvm::cl::init(""), llvm::cl::cat(attnCategory));
static llvm::cl::opt<int64_t> candidate(
    "candidate",
    llvm::cl::desc("compile only tile candidate N of every attention (its "
                   "attention and merge kernels); -1: all"),
    llvm::cl::init(-1), llvm::cl::cat(attnCategory));
static llvm::cl::opt<bool> candidates(
    "candidates",
    llvm::cl::desc("keep every fitting tile for the runtime planner"),
    llvm::cl::init(false), llvm::cl::cat(attnCategory));
static llvm::cl::opt<bool> kvTma(
    "kv-tma",
    llvm::cl::desc("load K/V tiles by TMA where the tile and pages can "
                   "(warp-specialized wgmma tiles, sm_90a)"),
    llvm::cl::init(false), llvm::cl::cat(attnCategory));

namespace {

/// Writes `dir`/attn_kernels.{ptx,cubin,json}.
LogicalResult writeKernels(const AttentionKernels &kernels,
                           llvm::StringRef dir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
    llvm::errs() << "attn-compile: cannot create " << dir << ": "
                 << ec.message() << "\n";
    return failure();
  }
  auto write = [&](llvm::StringRef name, llvm::StringRef data) {
    llvm::SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    std::string error;
    auto out = openOutputFile(path, &error);
    if (!out) {
      llvm::errs() << "attn-compile: " << error << "\n";
      return false;
    }
    out->os() << data;
    out->keep();
    llvm::outs() << "  wrote " << path << "\n";
    return true;
  };
  llvm::json::Object manifest = kernels.manifest;
  if (!kernels.cubin.empty())
    manifest["cubin"] = "attn_kernels.cubin";
  manifest["ptx"] = "attn_kernels.ptx";
  std::string json = llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  bool ok = write("attn_kernels.ptx", kernels.ptx) &&
            write("attn_kernels.json", json) &&
            (kernels.cubin.empty() ||
             write("attn_kernels.cubin",
                   llvm::StringRef(kernels.cubin.data(), kernels.cubin.size())));
  return success(ok);
}

/// Runs `pass` alone on `module`, timing it.
LogicalResult runStage(ModuleOp module, std::unique_ptr<Pass> pass,
                       SmallVectorImpl<StageTime> &times) {
  PassManager pm(module->getName());
  std::string name = pass->getArgument().str();
  pm.addPass(std::move(pass));
  auto start = std::chrono::steady_clock::now();
  LogicalResult result = pm.run(module);
  std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  times.push_back({std::move(name), elapsed.count()});
  return result;
}

/// One line per field of what was chosen for `op`.
void reportAttention(AttentionOp op, const TargetInfo &target,
                     llvm::raw_ostream &os) {
  auto func = op->getParentOfType<func::FuncOp>();
  BsrAttr view = op.getViews().front();
  os << "  @" << (func ? func.getSymName() : StringRef("<module>"))
     << "  attn.attention at " << op.getLoc() << "\n";
  os << "    heads     " << op.getNumQoHeads() << " query / "
     << op.getNumKVHeads() << " KV (GQA group " << op.getGroupSize()
     << "), head_dim " << op.getHeadDim() << ", "
     << op.getQuery().getType().getElementType() << "\n";
  os << "    format    " << stringifyKVIndexing(view.getIndexing()) << " "
     << stringifyKVLayout(view.getLayout());
  if (view.isPaged())
    os << ", " << view.getBlockCols() << "-token pages";
  os << ", block_rows ";
  if (view.hasDynamicBlockRows())
    os << "? (varies by batch)\n";
  else
    os << view.getBlockRows() << "\n";
  SmallVector<StringRef> variants = op.getVariantNames();
  os << "    variants  " << (variants.empty() ? "(none)" : "");
  llvm::interleaveComma(variants, os);
  os << "\n";
  auto printTile = [&](TileAttr tile) {
    int64_t smem = getTileSharedMemory(tile, op.getHeadDim()).bytes;
    os << "q=" << tile.getQ() << " kv=" << tile.getKv()
       << " warps=" << tile.getWarps() << " stages=" << tile.getStages()
       << " gqa_pack=" << tile.getGqaPack()
       << " ctas_per_sm=" << tile.getCtasPerSm()
       << (tile.getKvTma() ? " kv_tma" : "") << "  (" << smem / 1024
       << " KiB of " << target.getSharedMemoryPerBlock() / 1024
       << " KiB shared memory)";
  };
  if (std::optional<TileAttr> tile = op.getTile()) {
    os << "    tile      ";
    printTile(*tile);
    os << "\n";
  }
  if (std::optional<ArrayAttr> tiles = op.getTileCandidates())
    for (auto tile : tiles->getAsRange<TileAttr>()) {
      os << "    candidate ";
      printTile(tile);
      os << "\n";
    }
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::HideUnrelatedOptions(attnCategory);
  // Validated before LLVM sees them: a bad chip or PTX version would abort.
  NVPTXOptions target;
  llvm::cl::ParseCommandLineOptions(argc, argv, "attn compile driver\n");

  llvm::Expected<TargetInfo> targetInfo = TargetInfo::get(chip);
  if (!targetInfo) {
    llvm::errs() << "attn-compile: " << llvm::toString(targetInfo.takeError())
                 << "\n";
    return 1;
  }

  target.chip = chip;
  target.features = features;
  target.cudaPath = cudaPath;
  if (llvm::Error err = target.validate()) {
    llvm::errs() << "attn-compile: " << llvm::toString(std::move(err)) << "\n";
    return 1;
  }

  DialectRegistry registry;
  registerAllDialects(registry);
  registerKernelDialects(registry);
  registerTargetDialectsAndInterfaces(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  SmallVector<StageTime> times;
  auto start = std::chrono::steady_clock::now();
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << "attn-compile: " << error << "\n";
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  if (llvm::Error err = checkHoldsKernelOps(*module)) {
    llvm::errs() << "attn-compile: " << inputFile << ": "
                 << llvm::toString(std::move(err)) << "\n";
    return 1;
  }
  times.push_back(
      {"parse + verify",
       std::chrono::duration<double, std::milli>(
           std::chrono::steady_clock::now() - start)
           .count()});

  AttnSelectTilePassOptions tileOptions;
  tileOptions.chip = chip;
  tileOptions.candidates = candidates;
  tileOptions.kvTma = kvTma;
  if (failed(runStage(*module, createAttnExpandVariantsPass(), times)) ||
      failed(runStage(*module, createAttnDecomposeComposedPass(), times)) ||
      failed(runStage(*module, createAttnSelectTilePass(tileOptions), times)) ||
      failed(runStage(*module, createAttnPackGQAPass(), times)))
    return 1;

  llvm::raw_ostream &os = llvm::outs();
  os << "attn-compile: " << inputFile << " for " << chip << "\n";
  module->walk([&](AttentionOp op) { reportAttention(op, *targetInfo, os); });
  // The row kernels' ops, counted in one walk.
  struct RowOp {
    llvm::StringRef name, what;
    unsigned count;
  };
  RowOp rows[] = {
      {"attn.merge_states", "states merged by log-sum-exp", 0},
      {"attn.append_kv", "new K/V into the pages", 0},
      {"attn.copy_indices", "int32 arrays into other buffers", 0},
      {"attn.copy_by_table", "the copies a device table lists", 0}};
  module->walk([&](Operation *op) {
    for (RowOp &row : rows)
      row.count += op->getName().getStringRef() == row.name;
  });
  for (const RowOp &row : rows)
    if (row.count)
      os << "  " << row.count << " " << row.name << " (a row kernel each: "
         << row.what << ")\n";
  if (emit != Emit::None) {
    AttentionKernelOptions kernelOptions;
    kernelOptions.emit = emit == Emit::Cubin
                             ? AttentionKernelOptions::Emit::Cubin
                             : AttentionKernelOptions::Emit::PTX;
    kernelOptions.candidate = candidate;
    auto kernels = compileAttentionKernels(*module, target, kernelOptions);
    if (!kernels) {
      llvm::errs() << "attn-compile: " << llvm::toString(kernels.takeError())
                   << "\n";
      return 1;
    }
    times.append(kernels->stages.begin(), kernels->stages.end());
    os << "  kernels (" << (emit == Emit::Cubin ? "ptxas -v" : "PTX only")
       << "):\n";
    for (const KernelResourceUsage &u : kernels->usage)
      os << "    " << u.kernelName << ": " << u.registers << " registers, "
         << u.spillStoreBytes << "+" << u.spillLoadBytes
         << " bytes spilled, " << u.stackFrameBytes << " bytes stack\n";
    if (kernels->usage.empty()) {
      if (llvm::json::Array *list = kernels->manifest.getArray("kernels"))
        for (const llvm::json::Value &k : *list)
          os << "    " << *k.getAsObject()->getString("name") << "\n";
    }
    if (!outputDir.empty() && failed(writeKernels(*kernels, outputDir)))
      return 1;
  }
  os << "  stage times:";
  for (const StageTime &t : times)
    os << " " << t.stage << " " << llvm::format("%.1f", t.milliseconds)
       << " ms;";
  os << "\n";

  if (!outputFile.empty()) {
    std::unique_ptr<llvm::ToolOutputFile> out =
        openOutputFile(outputFile, &error);
    if (!out) {
      llvm::errs() << "attn-compile: " << error << "\n";
      return 1;
    }
    module->print(out->os());
    out->keep();
  }
  return 0;
}
