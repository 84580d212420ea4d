//===- attn-compile.cpp - the attn compile driver -------------------------===//
//
// Compiles a file of attn IR: runs the preparation passes one by one (timed),
// reports what was chosen for every attention (heads, format, variants, tile,
// shared memory), and writes the prepared IR. This is what `make demo` runs.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Transforms/Passes.h"
#include "attn/Dialect/Attn/Transforms/TileHeuristics.h"
#include "attn/InitAllDialects.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
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
    chip("chip", llvm::cl::desc("target GPU (sm_80, sm_86, sm_89, sm_90, sm_90a)"),
         llvm::cl::init("sm_90"), llvm::cl::cat(attnCategory));
static llvm::cl::opt<bool> candidates(
    "candidates",
    llvm::cl::desc("keep every fitting tile for the runtime planner"),
    llvm::cl::init(false), llvm::cl::cat(attnCategory));

namespace {
/// Wall time of one stage, for the report.
struct StageTime {
  std::string name;
  double ms;
};

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
  times.push_back({name, elapsed.count()});
  return result;
}

/// One line per field of what was chosen for `op`.
void reportAttention(AttentionOp op, const ChipInfo &chipInfo,
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
  os << ", block_rows " << view.getBlockRows() << "\n";
  SmallVector<StringRef> variants = op.getVariantNames();
  os << "    variants  " << (variants.empty() ? "(none)" : "");
  llvm::interleaveComma(variants, os);
  os << "\n";
  auto printTile = [&](TileAttr tile) {
    int64_t smem = getTileSharedMemory(tile, op.getHeadDim());
    os << "q=" << tile.getQ() << " kv=" << tile.getKv()
       << " warps=" << tile.getWarps() << " stages=" << tile.getStages()
       << " gqa_pack=" << tile.getGqaPack() << "  (" << smem / 1024
       << " KiB of " << chipInfo.sharedMemoryPerBlock / 1024
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
  llvm::cl::ParseCommandLineOptions(argc, argv, "attn compile driver\n");

  std::optional<ChipInfo> chipInfo = lookupChip(chip);
  if (!chipInfo) {
    llvm::errs() << "attn-compile: unknown chip '" << chip
                 << "'; expected sm_80, sm_86, sm_89, sm_90 or sm_90a\n";
    return 1;
  }

  DialectRegistry registry;
  registerAllDialects(registry);
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
  times.push_back(
      {"parse + verify",
       std::chrono::duration<double, std::milli>(
           std::chrono::steady_clock::now() - start)
           .count()});

  AttnSelectTilePassOptions tileOptions;
  tileOptions.chip = chip;
  tileOptions.candidates = candidates;
  if (failed(runStage(*module, createAttnExpandVariantsPass(), times)) ||
      failed(runStage(*module, createAttnDecomposeComposedPass(), times)) ||
      failed(runStage(*module, createAttnSelectTilePass(tileOptions), times)) ||
      failed(runStage(*module, createAttnPackGQAPass(), times)))
    return 1;

  llvm::raw_ostream &os = llvm::outs();
  os << "attn-compile: " << inputFile << " for " << chip << "\n";
  module->walk([&](AttentionOp op) { reportAttention(op, *chipInfo, os); });
  unsigned merges = 0;
  module->walk([&](MergeStatesOp) { ++merges; });
  if (merges)
    os << "  " << merges << " attn.merge_states (cascade: one attention per "
       << "view, merged by log-sum-exp)\n";
  os << "  stage times:";
  for (const StageTime &t : times)
    os << " " << t.name << " " << llvm::format("%.1f", t.ms) << " ms;";
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
