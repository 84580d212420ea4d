//===- AttnToGPU.cpp - convert-attn-to-gpu ---------------------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Reads each tiled attn.attention into a plain kernel spec and hands it to a
// generator: decode tiles (q = 16) to the persistent split-KV decode kernel
// (DecodeKernel.cpp), larger tiles to the prefill kernel (PrefillKernel.cpp),
// plus one LSE merge kernel per (head_dim, dtype), or per variant set when
// the variants transform the output (the merge applies the transform). A
// bit-packed custom mask
// operand becomes the kernels' `custom_mask` / `mask_indptr` arguments (the
// offsets are a host-side array: the IR's mask is one flat tensor). The
// generators dedupe by kernel name, which encodes every field of a spec, so
// identical attentions share one kernel. Nothing here builds kernel IR itself.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/LegacyKernels.h"
#include "attn/Conversion/AttnToGPU/DecodeKernel.h"
#include "attn/Conversion/AttnToGPU/PrefillKernel.h"
#include "attn/Conversion/AttnToGPU/VariantHooks.h"
#include "attn/Conversion/Passes.h"
#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/DialectRegistry.h"

#define DEBUG_TYPE "convert-attn-to-gpu"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNLEGACYKERNELSPASS
#include "attn/Conversion/Passes.h.inc"
} // namespace mlir::attn

using namespace mlir;
using namespace mlir::attn;
namespace gen = ::attn;

namespace {

/// What every generator needs to know about one attention.
struct AttentionShape {
  gen::KernelDType dtype;
  gen::KVLayout layout;
  gen::KVIndexing indexing;
  int64_t pageSize;
  TileAttr tile;
  SmallVector<VariantOp> variants;
  SmallVector<std::string> variantNames;
  /// The op has a (bit-packed) custom mask operand.
  bool customMask = false;
};

/// The dialect's KV enums (ODS) as the runtime's, which the kernel specs and
/// manifests use: the one place the two are mapped.
gen::KVLayout getRuntimeLayout(KVLayout layout) {
  switch (layout) {
  case KVLayout::NHD:
    return gen::KVLayout::NHD;
  case KVLayout::HND:
    return gen::KVLayout::HND;
  }
  llvm_unreachable("unknown KV layout");
}
gen::KVIndexing getRuntimeIndexing(KVIndexing indexing) {
  switch (indexing) {
  case KVIndexing::paged:
    return gen::KVIndexing::Paged;
  case KVIndexing::ragged:
    return gen::KVIndexing::Ragged;
  }
  llvm_unreachable("unknown KV indexing");
}

/// Reads `op` into an AttentionShape, or fails with a diagnostic on `op`.
FailureOr<AttentionShape> getShape(AttentionOp op) {
  AttentionShape shape;
  shape.tile = *op.getTile();
  SmallVector<BsrAttr> views = op.getViews();
  if (views.size() != 1)
    return op.emitOpError("has a composed format; run "
                          "attn-decompose-composed before convert-attn-to-gpu");
  if (Value mask = op.getMask()) {
    // The kernels read one bit per (row, key); an i1 tensor has no agreed
    // memory layout to read bits from.
    if (!cast<ShapedType>(mask.getType()).getElementType().isInteger(8))
      return op.emitOpError("has an unpacked (i1) custom mask; the generated "
                            "kernels read it bit-packed: pack it into i8, "
                            "little-endian, each request starting on its own "
                            "byte (FlashInfer's packbits)");
    shape.customMask = true;
  }
  BsrAttr view = views.front();
  Type elt = op.getQuery().getType().getElementType();
  shape.dtype = elt.isBF16() ? gen::KernelDType::BF16 : gen::KernelDType::F16;
  shape.layout = getRuntimeLayout(view.getLayout());
  shape.indexing = getRuntimeIndexing(view.getIndexing());
  shape.pageSize = view.isRagged() ? 1 : view.getBlockCols();
  if (failed(VariantHooks::resolve(op, shape.variants)))
    return failure();
  for (VariantOp variant : shape.variants)
    shape.variantNames.push_back(variant.getSymName().str());
  return shape;
}

/// Minimum CTAs per SM for a decode kernel of `warps` warps: 12 resident
/// warps per SM is what kept D1 at the copy bandwidth on the H200.
int64_t getDecodeOccupancy(int64_t warps) {
  return std::clamp<int64_t>(12 / warps, 1, 8);
}

/// Generates the decode kernel of `op`; returns what was generated.
FailureOr<GeneratedKernel>
convertDecode(ModuleOp module, AttentionOp op, const AttentionShape &shape,
              const LegacyKernelOptions &options) {
  gen::DecodeKernelSpec spec;
  spec.headDim = op.getHeadDim();
  spec.numQoHeads = op.getNumQoHeads();
  spec.numKVHeads = op.getNumKVHeads();
  spec.pageSize = shape.pageSize;
  spec.dtype = shape.dtype;
  spec.layout = shape.layout;
  spec.indexing = shape.indexing;
  spec.gqaPack = shape.tile.getGqaPack();
  spec.kvTile = shape.tile.getKv();
  spec.numWarps = shape.tile.getWarps();
  spec.numStages = shape.tile.getStages();
  spec.minCTAsPerSM = getDecodeOccupancy(spec.numWarps);
  spec.chip = options.chip;
  spec.variantNames = shape.variantNames;
  spec.customMask = shape.customMask;
  if (llvm::Error err = spec.validate())
    return op.emitOpError("cannot generate its decode kernel: ")
           << llvm::toString(std::move(err));
  auto params = gen::getVariantParamArgs(shape.variants);
  if (failed(params))
    return failure();
  FailureOr<std::string> name = gen::buildDecodeKernel(
      module, spec, shape.variants, options.gpuModuleName);
  if (failed(name))
    return failure();
  GeneratedKernel kernel{GeneratedKernel::Kind::Decode, *name};
  kernel.decode = spec;
  for (const gen::VariantParamArg &p : *params)
    kernel.params.push_back({p.name, p.kind});
  return kernel;
}

/// Generates the prefill kernel of `op`; returns what was generated.
FailureOr<GeneratedKernel>
convertPrefill(ModuleOp module, AttentionOp op, const AttentionShape &shape,
               const LegacyKernelOptions &options) {
  gen::PrefillKernelSpec spec;
  spec.headDim = op.getHeadDim();
  spec.numQoHeads = op.getNumQoHeads();
  spec.numKVHeads = op.getNumKVHeads();
  spec.dtype = shape.dtype;
  spec.indexing = shape.indexing;
  spec.pageSize = shape.pageSize;
  spec.layout = shape.layout;
  spec.tileQ = shape.tile.getQ();
  spec.tileKV = shape.tile.getKv();
  spec.numStages = shape.tile.getStages();
  spec.gqaPack = shape.tile.getGqaPack();
  spec.chip = options.chip;
  spec.customMask = shape.customMask;
  // Masks other than @causal's run on every tile.
  spec.maskEveryTile = llvm::any_of(shape.variants, [](VariantOp v) {
    return v.getSymName() != "causal" && v.getHook(HookKind::logits_mask);
  });
  // The prefill generator appends the variants' names and parameters
  // itself; the expected symbol is the spec's name with them.
  FailureOr<gen::PrefillKernelSpec> named =
      gen::getPrefillSpecWithVariants(spec, shape.variants);
  if (failed(named))
    return failure();
  GeneratedKernel kernel{GeneratedKernel::Kind::Prefill,
                         named->getKernelName()};
  kernel.prefill = *named;
  auto gpuModule =
      module.lookupSymbol<gpu::GPUModuleOp>(options.gpuModuleName);
  if (gpuModule && gpuModule.lookupSymbol(kernel.name))
    return kernel;
  if (failed(gen::buildPrefillKernelForVariants(module, spec, shape.variants,
                                                options.gpuModuleName)))
    return failure();
  return kernel;
}

/// `@<gpuModule>::@<kernel>`.
SymbolRefAttr getKernelRef(MLIRContext *ctx, StringRef gpuModule,
                           StringRef kernel) {
  return SymbolRefAttr::get(ctx, gpuModule,
                            {FlatSymbolRefAttr::get(ctx, kernel)});
}

struct AttnLegacyKernelsPass
    : public mlir::attn::impl::AttnLegacyKernelsPassBase<AttnLegacyKernelsPass> {
  using AttnLegacyKernelsPassBase::AttnLegacyKernelsPassBase;
  void getDependentDialects(DialectRegistry &registry) const override {
    gen::registerKernelGenDialects(registry);
  }
  void runOnOperation() override {
    LegacyKernelOptions options;
    options.chip = chip;
    options.gpuModuleName = gpuModuleName;
    if (failed(buildLegacyKernels(getOperation(), options)))
      signalPassFailure();
  }
};

} // namespace

LogicalResult
mlir::attn::buildLegacyKernels(ModuleOp module,
                             const LegacyKernelOptions &options,
                             SmallVectorImpl<GeneratedKernel> *generated) {
  auto record = [&](GeneratedKernel kernel) {
    if (generated && llvm::none_of(*generated, [&](const GeneratedKernel &k) {
          return k.name == kernel.name;
        }))
      generated->push_back(std::move(kernel));
  };
  SmallVector<AttentionOp> ops;
  module.walk([&](AttentionOp op) {
    if (op.getTile())
      ops.push_back(op);
  });
  MLIRContext *ctx = module.getContext();
  for (AttentionOp op : ops) {
    FailureOr<AttentionShape> shape = getShape(op);
    if (failed(shape))
      return failure();
    FailureOr<GeneratedKernel> kernel =
        shape->tile.getQ() == gen::DecodeKernelSpec::kTileRows
            ? convertDecode(module, op, *shape, options)
            : convertPrefill(module, op, *shape, options);
    if (failed(kernel))
      return failure();
    std::string kernelName = kernel->name;
    record(std::move(*kernel));
    gen::MergeKernelSpec merge;
    merge.headDim = op.getHeadDim();
    merge.dtype = shape->dtype;
    merge.chip = options.chip;
    // Prefill splits tall tiles (64-128 rows) into a few chunks: a row per
    // part. Decode splits short tiles into many: parts share a row.
    if (shape->tile.getQ() != gen::DecodeKernelSpec::kTileRows)
      merge.rowsPerCta = merge.getPartsPerCta();
    // Partials are untransformed: an output transform applies once, to the
    // merged rows, so the merge kernel carries the variants' hooks.
    if (llvm::any_of(shape->variants, [](VariantOp v) {
          return bool(v.getHook(HookKind::output_transform));
        })) {
      auto params = gen::getVariantParamArgs(shape->variants);
      if (failed(params))
        return failure();
      merge.outputTransform = true;
      merge.variantNames = shape->variantNames;
      for (const gen::VariantParamArg &p : *params)
        merge.params.push_back({p.name, p.kind});
      merge.numQoHeads = op.getNumQoHeads();
      merge.numKVHeads = op.getNumKVHeads();
      merge.indexing = shape->indexing;
      merge.pageSize = shape->pageSize;
    }
    FailureOr<std::string> mergeKernel = gen::buildMergeKernel(
        module, merge, shape->variants, options.gpuModuleName);
    if (failed(mergeKernel))
      return failure();
    GeneratedKernel mergeRecord{GeneratedKernel::Kind::Merge, *mergeKernel};
    mergeRecord.merge = merge;
    mergeRecord.numQoHeads = op.getNumQoHeads();
    mergeRecord.numKVHeads = op.getNumKVHeads();
    record(std::move(mergeRecord));
    op->setAttr(kKernelAttrName,
                getKernelRef(ctx, options.gpuModuleName, kernelName));
    op->setAttr(kMergeKernelAttrName,
                getKernelRef(ctx, options.gpuModuleName, *mergeKernel));
  }
  return success();
}
