//===- attn-gen-kernel.cpp - Generate and compile attn kernels ------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// A test and bring-up driver for the kernel generator and the target back
// end: builds the persistent split-KV decode kernel (with built-in variants
// named by --variants) and the LSE merge kernel from flags, and prints or
// writes them at the stage asked for.
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

#include "ToolOutput.h"
#include "GenPrefill.h"
#include "attn/Conversion/AttnToGPU/DecodeKernel.h"
#include "attn/Dialect/Attn/IR/Attn.h"
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
using ::attn::fail;
using ::attn::writeFile;
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
static cl::opt<int64_t> gqaPack("gqa-pack", cl::init(0), cl::cat(category),
                                cl::desc("Query heads packed per KV head "
                                         "(0: the whole group)"));
static cl::opt<int64_t> kvTile("kv-tile", cl::init(64), cl::cat(category),
                               cl::desc("Planner granule (manifest tile.kv)"));
static cl::opt<bool> ragged("ragged", cl::init(false), cl::cat(category),
                            cl::desc("Ragged (contiguous) KV instead of pages"));
static cl::opt<bool>
    customMask("custom-mask", cl::init(false), cl::cat(category),
               cl::desc("Read a bit-packed custom mask (custom_mask, "
                        "mask_indptr arguments)"));
static cl::list<std::string>
    variants("variants", cl::CommaSeparated, cl::cat(category),
             cl::desc("Built-in variants to inline, in order "
                      "(causal, sliding_window, soft_cap, alibi, rope, ...)"));
static cl::opt<bool> withMerge("merge", cl::init(true), cl::cat(category),
                               cl::desc("Also generate the LSE merge kernel"));
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


static cl::opt<std::string> kind("kind", cl::init("decode"), cl::cat(category),
                                 cl::desc("decode | prefill"));
static cl::opt<int64_t> tileQ("tile-q", cl::init(128), cl::cat(category),
                              cl::desc("Prefill: packed rows per tile (64, 128)"));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "attn kernel generator\n");
  if (kind == "prefill") {
    ::attn::PrefillKernelSpec pf;
    pf.headDim = headDim, pf.numQoHeads = qoHeads, pf.numKVHeads = kvHeads;
    pf.pageSize = pageSize, pf.tileQ = tileQ, pf.tileKV = kvTile;
    pf.numStages = stages, pf.gqaPack = gqaPack > 0 ? gqaPack : 1;
    pf.kernelName = kernelName, pf.chip = chip;
    pf.minCTAsPerSM = minCTAs.getNumOccurrences() ? minCTAs : 0;
    pf.indexing = ragged ? ::attn::KVIndexing::Ragged
                         : ::attn::KVIndexing::Paged;
    pf.customMask = customMask;
    auto pdt = ::attn::parseDType(dtype);
    auto play = ::attn::parseLayout(layout);
    if (!pdt || !play) {
      llvm::consumeError(pdt.takeError()), llvm::consumeError(play.takeError());
      return fail("bad --dtype or --layout");
    }
    pf.dtype = *pdt, pf.layout = *play;
    ::attn::NVPTXOptions pt;
    pt.chip = chip, pt.features = features, pt.optLevel = optLevel;
    pt.cudaPath = cudaPath;
    std::vector<std::string> names(variants.begin(), variants.end());
    return ::attn::genPrefillKernel(pf, names, pt, emit, output, timing);
  }

  ::attn::DecodeKernelSpec spec;
  spec.headDim = headDim;
  spec.numQoHeads = qoHeads;
  spec.numKVHeads = kvHeads;
  spec.pageSize = pageSize;
  spec.gqaPack = gqaPack;
  spec.kvTile = kvTile;
  spec.numWarps = warps;
  spec.numStages = stages;
  spec.minCTAsPerSM = minCTAs;
  spec.kernelName = kernelName;
  spec.chip = chip;
  spec.customMask = customMask;
  spec.indexing = ragged ? ::attn::KVIndexing::Ragged
                         : ::attn::KVIndexing::Paged;
  auto dt = ::attn::parseDType(dtype);
  if (!dt)
    return fail(llvm::toString(dt.takeError()));
  spec.dtype = *dt;
  auto kvLayout = ::attn::parseLayout(layout);
  if (!kvLayout)
    return fail(llvm::toString(kvLayout.takeError()));
  spec.layout = *kvLayout;
  for (const std::string &v : variants)
    spec.variantNames.push_back(v);
  if (llvm::Error err = spec.validate())
    return fail(llvm::toString(std::move(err)));
  ::attn::MergeKernelSpec mergeSpec;
  mergeSpec.headDim = headDim;
  mergeSpec.dtype = *dt;
  mergeSpec.chip = chip;

  ::attn::NVPTXOptions target;
  target.chip = chip;
  target.features = features;
  target.optLevel = optLevel;
  target.cudaPath = cudaPath;
  if (emit != "mlir")
    if (llvm::Error err = target.validate())
      return fail(llvm::toString(std::move(err)));

  std::unique_ptr<MLIRContext> context = ::attn::createGenContext();
  auto variantOps = ::attn::lookupBuiltinVariants(*context, variants);
  if (failed(variantOps))
    return 1;
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(context.get()));
  FailureOr<std::string> decodeName =
      ::attn::buildDecodeKernel(*module, spec, *variantOps);
  if (failed(decodeName))
    return 1;
  FailureOr<std::string> mergeName = std::string();
  if (withMerge)
    mergeName = ::attn::buildMergeKernel(*module, mergeSpec);
  if (failed(mergeName))
    return 1;
  if (failed(verify(*module)))
    return fail("generated IR does not verify");
  auto params = ::attn::getVariantParamArgs(*variantOps);
  if (failed(params))
    return 1;
  SmallVector<std::pair<std::string, std::string>> paramKinds;
  for (const ::attn::VariantParamArg &p : *params)
    paramKinds.push_back({p.name, p.kind});

  return ::attn::emitKernels(
      *module, target, emit, output, timing,
      [&](ArrayRef<::attn::KernelResourceUsage> usage) {
        llvm::json::Array kernels;
        kernels.push_back(::attn::getDecodeKernelManifest(
            spec, paramKinds, ::attn::findResourceUsage(usage, *decodeName)));
        if (withMerge)
          kernels.push_back(::attn::getMergeKernelManifest(
              mergeSpec, spec.numQoHeads, spec.numKVHeads,
              ::attn::findResourceUsage(usage, *mergeName)));
        return kernels;
      });
}
