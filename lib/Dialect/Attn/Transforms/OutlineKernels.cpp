//===- OutlineKernels.cpp - attn.attention to tile-level kernels ----------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// For every attn.attention with a tile (or tile candidates), writes the
// kernels that compute it into `gpu.module @attn_kernels`, in the tile-level
// form of the dialect (AttnTileOps.td), and records their symbols on the op
// (`attn.kernels`, one per tile, in candidate order). Per tile:
//
//  1. The kernel's arguments (KernelSignature.h) and its launch contract
//     (`attn.launch`): threads, dynamic shared memory (TileLayout.h), tile,
//     format, heads, the planner's cost model (TileHeuristics.h), the band
//     the masks declare, and the merge kernel it pairs with.
//  2. The body: the persistent loop over the CTA's work items; per item the
//     visible key range, and when it holds a key the K/V pipeline, the query
//     tile, and a loop of kv_next / qk / online_softmax / pv; then the write.
//     The variants' hooks are composed into the regions of the ops that
//     apply them (HookComposition.h).
//
// One merge kernel per (dtype, head dim, merge shape), or per variant set
// when the variants transform the output. Kernels are named after every
// field that changes their code, so identical attentions share them.
//
//===----------------------------------------------------------------------===//

#include "HookComposition.h"
#include "RowKernels.h"
#include "attn/Dialect/Attn/IR/TileLayout.h"
#include "attn/Dialect/Attn/Transforms/KernelSignature.h"
#include "attn/Dialect/Attn/Transforms/Passes.h"
#include "attn/Dialect/Attn/Transforms/TileHeuristics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNOUTLINEKERNELSPASS
#include "attn/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace mlir::attn

#define DEBUG_TYPE "attn-outline-kernels"

using namespace mlir;
using namespace mlir::attn;

namespace {

/// What the kernels of one attention depend on besides the tile.
struct AttentionInfo {
  Type dtype;
  int64_t headDim, numQoHeads, numKVHeads;
  BsrAttr view;
  SmallVector<VariantOp> variants;
  SmallVector<VariantParamArg> params;
  bool customMask = false;
  bool outputTransform = false;

  bool paged() const { return view.isPaged(); }
  int64_t pageSize() const { return view.isPaged() ? view.getBlockCols() : 1; }
};

FailureOr<AttentionInfo> getAttentionInfo(AttentionOp op) {
  AttentionInfo info;
  SmallVector<BsrAttr> views = op.getViews();
  if (views.size() != 1)
    return op.emitOpError("has a composed format; run "
                          "attn-decompose-composed before attn-outline-kernels");
  info.view = views.front();
  if (Value mask = op.getMask()) {
    // The kernels read one bit per (row, key); an i1 tensor has no agreed
    // memory layout to read bits from.
    if (!cast<ShapedType>(mask.getType()).getElementType().isInteger(8))
      return op.emitOpError("has an unpacked (i1) custom mask; the generated "
                            "kernels read it bit-packed: pack it into i8, "
                            "little-endian, each request starting on its own "
                            "byte (FlashInfer's packbits)");
    info.customMask = true;
  }
  info.dtype = op.getQuery().getType().getElementType();
  info.headDim = op.getHeadDim();
  info.numQoHeads = op.getNumQoHeads();
  info.numKVHeads = op.getNumKVHeads();
  if (failed(resolveVariants(op, info.variants)))
    return failure();
  FailureOr<SmallVector<VariantParamArg>> params =
      getVariantParamArgs(info.variants);
  if (failed(params))
    return failure();
  info.params = std::move(*params);
  info.outputTransform = llvm::any_of(info.variants, [](VariantOp v) {
    return bool(v.getHook(HookKind::output_transform));
  });
  return info;
}

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

std::string dtypeName(Type t) { return t.isBF16() ? "bf16" : "f16"; }

/// `p<page size>` or `ragged`, and the layout in lower case (`strided`
/// for ragged rows at strides given at launch).
std::string formatWords(const AttentionInfo &info) {
  std::string kv = info.paged() ? llvm::formatv("p{0}", info.pageSize()).str()
                                : std::string("ragged");
  if (info.view.getStrided())
    return kv + "_strided";
  return kv + "_" + stringifyKVLayout(info.view.getLayout()).lower();
}

std::string variantSuffix(const AttentionInfo &info, bool mask) {
  std::string suffix;
  for (VariantOp v : info.variants)
    suffix += "_" + v.getSymName().str();
  if (mask && info.customMask)
    suffix += "_mask";
  return suffix;
}

std::string getAttentionKernelName(const AttentionInfo &info, TileAttr tile) {
  std::string heads = llvm::formatv("{0}_d{1}_h{2}x{3}_{4}",
                                    dtypeName(info.dtype), info.headDim,
                                    info.numQoHeads, info.numKVHeads,
                                    formatWords(info))
                          .str();
  std::string shape =
      tile.warpsSplitKeys()
          ? llvm::formatv("attn_decode_{0}_k{1}_w{2}_s{3}_c{4}", heads,
                          tile.getGqaPack(), tile.getWarps(), tile.getStages(),
                          tile.getCtasPerSm())
                .str()
          : llvm::formatv("attn_prefill_{0}_q{1}_kv{2}_s{3}_k{4}_c{5}", heads,
                          tile.getQ(), tile.getKv(), tile.getStages(),
                          tile.getGqaPack(), tile.getCtasPerSm())
                .str();
  if (tile.getKvTma())
    shape += "_tma";
  return shape + variantSuffix(info, /*mask=*/true);
}

/// Threads of a merge kernel, and how many rows one of its CTAs merges at a
/// time: its threads form parts of head_dim / 8 threads (8 elements each);
/// decode splits a row's keys into many chunks, so the parts share a row;
/// taller tiles split into a few chunks, so each part merges a row alone.
constexpr int64_t kMergeThreads = 256;
int64_t getMergeRows(TileAttr tile, int64_t headDim) {
  return tile.warpsSplitKeys() ? 1 : kMergeThreads / (headDim / 8);
}

std::string getMergeKernelName(const AttentionInfo &info, int64_t rows) {
  std::string name = llvm::formatv("attn_merge_{0}_d{1}", dtypeName(info.dtype),
                                   info.headDim)
                         .str();
  if (rows > 1)
    name += llvm::formatv("_r{0}", rows).str();
  if (!info.outputTransform)
    return name;
  std::string kv = info.paged() ? llvm::formatv("p{0}", info.pageSize()).str()
                                : std::string("ragged");
  return name +
         llvm::formatv("_h{0}x{1}_{2}", info.numQoHeads, info.numKVHeads, kv)
             .str() +
         variantSuffix(info, /*mask=*/false);
}

ArrayAttr getVariantNames(MLIRContext *ctx, const AttentionInfo &info) {
  SmallVector<Attribute> names;
  for (VariantOp v : info.variants)
    names.push_back(StringAttr::get(ctx, v.getSymName()));
  return names.empty() ? ArrayAttr() : ArrayAttr::get(ctx, names);
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// The values the hooks bind to the variant parameters, created at the
/// start of `func`: the argument itself, or `arg != 0` for an i1.
SmallVector<Value> getParamValues(OpBuilder &b, gpu::GPUFuncOp func,
                                  const AttentionInfo &info) {
  SmallVector<Value> values;
  for (const VariantParamArg &p : info.params) {
    Value arg = getKernelArgument(func, p.name);
    if (p.declaredType.isInteger(1)) {
      Value zero = arith::ConstantIntOp::create(b, func.getLoc(), 0, 32);
      arg = arith::CmpIOp::create(b, func.getLoc(), arith::CmpIPredicate::ne,
                                  arg, zero);
    }
    values.push_back(arg);
  }
  return values;
}

/// The body of an attention kernel for `tile`.
void buildAttentionBody(OpBuilder &b, gpu::GPUFuncOp func,
                        const AttentionInfo &info, TileAttr tile,
                        bool pipelined) {
  Location loc = func.getLoc();
  MLIRContext *ctx = b.getContext();
  b.setInsertionPointToStart(&func.getBody().front());
  HookComposer hooks(info.variants, getParamValues(b, func, info),
                     {info.headDim, info.numQoHeads, info.numKVHeads});
  auto arg = [&](StringRef name) { return getKernelArgument(func, name); };
  Value kvIndices = info.paged() ? arg("kv_indices") : Value();
  Value pageStride = info.paged() ? arg("page_stride") : Value();
  Value kvLastLen = info.paged() ? arg("kv_last_len") : Value();
  Value numPages = info.paged() ? arg("num_pages") : Value();
  Value indexError = info.paged() ? arg("index_error") : Value();
  const bool strided = info.view.getStrided();
  Value tokenStride = strided ? arg("kv_token_stride") : Value();
  Value headStride = strided ? arg("kv_head_stride") : Value();
  Value keyMap = tile.getKvTma() ? arg("k_map") : Value();
  Value valueMap = tile.getKvTma() ? arg("v_map") : Value();

  const int64_t rows = tile.getQ(), D = info.headDim;
  const int64_t keys = tile.getKeysPerStep();
  auto itemType = ItemType::get(ctx);
  auto queryType = QueryType::get(ctx, rows, D, info.dtype);
  auto rangeType = KVRangeType::get(ctx, keys);
  auto pipeType = KVPipeType::get(ctx, keys, D, info.dtype);
  auto kvType = KVTileType::get(ctx, keys, D, info.dtype);
  auto scoresType = ScoresType::get(ctx, rows, keys);
  auto probsType = ProbsType::get(ctx, rows, keys, info.dtype);
  auto stateType = SoftmaxType::get(ctx, rows, D);

  auto loop = TileWorkLoopOp::create(b, loc, arg("plan"), arg("cta_indptr"),
                                     arg("work_items"), arg("qo_indptr"),
                                     arg("kv_indptr"), kvLastLen);
  Block *body = b.createBlock(&loop.getBody(), {}, {itemType}, {loc});
  Value item = body->getArgument(0);

  // The keys the item's rows can see: the band the masks declare.
  BandAttr band = hooks.getBand(ctx);
  Value lowerBound;
  IntegerAttr lower, upper;
  if (band) {
    if (band.getLower())
      lower = b.getI64IntegerAttr(*band.getLower());
    else
      lowerBound = hooks.getBandParam(band.getLowerParam());
    if (band.getUpper())
      upper = b.getI64IntegerAttr(*band.getUpper());
  }
  Value range =
      TileKVRangeOp::create(b, loc, rangeType, item, lowerBound, lower, upper);
  Value count = TileKVTileCountOp::create(b, loc, b.getIndexType(), range);
  Value init = TileSoftmaxInitOp::create(b, loc, stateType);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value hasKeys =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, count, zero);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{stateType}, hasKeys,
                                /*withElseRegion=*/true);
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(b, loc, init);

  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  Value pipe = TileKVPrologueOp::create(b, loc, pipeType, range, item,
                                        arg("k_cache"), arg("v_cache"),
                                        kvIndices, pageStride, tokenStride,
                                        headStride, numPages, indexError,
                                        keyMap, valueMap);
  auto query = TileLoadQueryOp::create(b, loc, queryType, item, arg("q"));
  hooks.fill(b, loc, query.getTransform(), HookKind::query_transform);
  Value mask = info.customMask ? arg("custom_mask") : Value();
  Value maskIndptr = info.customMask ? arg("mask_indptr") : Value();
  // One K/V tile's steps: the next tile out of the ring (key transform
  // applied), S = Q Kᵀ, and the softmax of S (logits hooks and masks).
  auto nextTile = [&](Value inFlight, Value j) {
    auto next = TileKVNextOp::create(b, loc, kvType, pipeType, inFlight, j, item,
                                     arg("k_cache"), arg("v_cache"), kvIndices,
                                     pageStride, tokenStride, headStride,
                                     numPages, indexError, keyMap, valueMap);
    hooks.fill(b, loc, next.getKeyTransform(), HookKind::key_transform);
    return next;
  };
  auto qk = [&](Value tile, bool inFlight) {
    auto op = TileQKOp::create(b, loc, scoresType, query, tile);
    op.setInFlight(inFlight);
    return op.getResult();
  };
  auto softmax = [&](Value state, Value scores, Value tile) {
    auto op = TileOnlineSoftmaxOp::create(
        b, loc, stateType, probsType, state, scores, item, tile,
        arg("sm_scale"), mask, maskIndptr,
        /*band_covers_mask=*/hooks.masksAreBanded() && !info.customMask,
        /*await_scores=*/nullptr, /*await_acc=*/nullptr);
    hooks.fill(b, loc, op.getLogitsTransform(), HookKind::logits_transform);
    hooks.fill(b, loc, op.getLogitsMask(), HookKind::logits_mask);
    return op;
  };
  auto pv = [&](Value state, Value probs, Value tile, bool inFlight) {
    auto op = TilePVOp::create(b, loc, stateType, state, probs, tile);
    op.setInFlight(inFlight);
    return op.getResult();
  };
  // After the item's last S: the query tile may take the next item's rows.
  auto prefetchQuery = [&] {
    TilePrefetchQueryOp::create(b, loc, item, arg("q"), arg("work_items"),
                                arg("qo_indptr"));
  };
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value state, drained;
  if (!pipelined) {
    // Step j: tile j, S, softmax, O += P V.
    auto forOp = scf::ForOp::create(b, loc, zero, count, one,
                                    ValueRange{init, pipe});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    auto next = nextTile(forOp.getRegionIterArgs()[1], forOp.getInductionVar());
    auto sm = softmax(forOp.getRegionIterArgs()[0],
                      qk(next.getTile(), /*inFlight=*/false), next.getTile());
    Value updated = pv(sm.getNewState(), sm.getProbs(), next.getTile(),
                       /*inFlight=*/false);
    scf::YieldOp::create(b, loc, ValueRange{updated, next.getNext()});
    b.setInsertionPointAfter(forOp);
    prefetchQuery();
    state = forOp.getResult(0);
    drained = forOp.getResult(1);
  } else {
    // Software-pipelined (isKVLoopPipelined): tile 0's S and softmax first;
    // step j >= 1 issues S of tile j, then P V of tile j - 1, and awaits S
    // (leaving P V running: it was issued last) for the softmax of tile j,
    // which awaits P V only before its last step, the rescale; P V of the
    // last tile follows the loop.
    auto first = nextTile(pipe, zero);
    auto sm0 = softmax(init, qk(first.getTile(), /*inFlight=*/false),
                       first.getTile());
    auto forOp = scf::ForOp::create(
        b, loc, one, count, one,
        SmallVector<Value>{sm0.getNewState(), sm0.getProbs(), first.getTile(),
                           first.getNext()});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(forOp.getBody());
      ValueRange carried = forOp.getRegionIterArgs();
      auto next = nextTile(carried[3], forOp.getInductionVar());
      Value scores = qk(next.getTile(), /*inFlight=*/true);
      Value acc = pv(carried[0], carried[1], carried[2], /*inFlight=*/true);
      auto sm = softmax(acc, scores, next.getTile());
      sm.setAwaitScoresAttr(b.getI64IntegerAttr(1));
      sm.setAwaitAccAttr(b.getI64IntegerAttr(0));
      scf::YieldOp::create(b, loc,
                           SmallVector<Value>{sm.getNewState(), sm.getProbs(),
                                              next.getTile(), next.getNext()});
    }
    prefetchQuery();
    state = pv(forOp.getResult(0), forOp.getResult(1), forOp.getResult(2),
               /*inFlight=*/false);
    drained = forOp.getResult(3);
  }
  TileKVDrainOp::create(b, loc, drained);
  scf::YieldOp::create(b, loc, state);

  b.setInsertionPointAfter(ifOp);
  auto store = TileStoreOp::create(b, loc, ifOp.getResult(0), item, arg("o"),
                                   arg("lse"), arg("partial_o"),
                                   arg("partial_lse"), arg("slot_rows"));
  hooks.fill(b, loc, store.getSink(), HookKind::sink);
  hooks.fill(b, loc, store.getOutputTransform(), HookKind::output_transform);

  b.setInsertionPointAfter(loop);
  gpu::ReturnOp::create(b, loc);
}

/// The body of a merge kernel.
void buildMergeBody(OpBuilder &b, gpu::GPUFuncOp func,
                    const AttentionInfo &info, bool outputTransform) {
  Location loc = func.getLoc();
  b.setInsertionPointToStart(&func.getBody().front());
  auto arg = [&](StringRef name) { return getKernelArgument(func, name); };
  Value kvIndptr, kvLastLen;
  SmallVector<Value> params;
  if (outputTransform) {
    kvIndptr = arg("kv_indptr");
    kvLastLen = info.paged() ? arg("kv_last_len") : Value();
    params = getParamValues(b, func, info);
  }
  auto merge = TileMergeOp::create(
      b, loc, arg("plan"), arg("merge_indptr"), arg("merge_units"),
      arg("partial_o"), arg("partial_lse"), arg("slot_rows"), arg("o"),
      arg("lse"), arg("qo_indptr"), kvIndptr, kvLastLen);
  if (outputTransform) {
    HookComposer hooks(info.variants, params,
                       {info.headDim, info.numQoHeads, info.numKVHeads});
    hooks.fill(b, loc, merge.getOutputTransform(), HookKind::output_transform);
  }
  gpu::ReturnOp::create(b, loc);
}

gpu::GPUModuleOp getOrCreateGPUModule(ModuleOp module, StringRef name) {
  OpBuilder b(module.getContext());
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  b.getUnitAttr());
  if (auto existing = module.lookupSymbol<gpu::GPUModuleOp>(name))
    return existing;
  b.setInsertionPointToEnd(module.getBody());
  return gpu::GPUModuleOp::create(b, module.getLoc(), name);
}

struct AttnOutlineKernelsPass
    : attn::impl::AttnOutlineKernelsPassBase<AttnOutlineKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    llvm::Expected<TargetInfo> target = TargetInfo::get(chip);
    if (!target) {
      getOperation().emitError()
          << "attn-outline-kernels: " << llvm::toString(target.takeError());
      return signalPassFailure();
    }
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) {
      if (op.getTile() || op.getTileCandidates())
        ops.push_back(op);
    });
    for (AttentionOp op : ops)
      if (failed(outline(op, *target)))
        return signalPassFailure();
    // merge_states, append_kv and the copies in host code (not inside an
    // attention, whose own merges are its merge kernel's) become row kernels.
    SmallVector<Operation *> rowOps;
    getOperation().walk([&](Operation *op) {
      if (isa<MergeStatesOp, AppendKVOp, CopyIndicesOp, CopyByTableOp>(op) &&
          !op->getParentOfType<gpu::GPUModuleOp>())
        rowOps.push_back(op);
    });
    if (rowOps.empty())
      return;
    gpu::GPUModuleOp gm = getOrCreateGPUModule(getOperation(), gpuModuleName);
    for (Operation *op : rowOps) {
      LogicalResult done =
          llvm::TypeSwitch<Operation *, LogicalResult>(op)
              .Case([&](MergeStatesOp m) {
                return outlineMergeStates(m, gm, *target);
              })
              .Case([&](AppendKVOp a) { return outlineAppendKV(a, gm, *target); })
              .Case([&](CopyIndicesOp c) {
                return outlineCopyIndices(c, gm, *target);
              })
              .Case([&](CopyByTableOp c) {
                return outlineCopyByTable(c, gm, *target);
              });
      if (failed(done))
        return signalPassFailure();
    }
  }

  /// The merge kernel for `info`'s partial results of `rows` rows per CTA.
  FlatSymbolRefAttr getOrBuildMerge(OpBuilder &b, gpu::GPUModuleOp gm,
                                    const AttentionInfo &info, int64_t rows,
                                    const TargetInfo &target, Location loc) {
    MLIRContext *ctx = b.getContext();
    std::string name = getMergeKernelName(info, rows);
    if (!gm.lookupSymbol(name)) {
      bool transform = info.outputTransform;
      auto launch = LaunchAttr::get(
          ctx, KernelRole::merge, StringAttr::get(ctx, target.getName()),
          kMergeThreads, getMergeSharedBytes(kMergeThreads, rows),
          /*ctas_per_sm=*/1, info.dtype,
          info.headDim, info.numQoHeads, info.numKVHeads, /*tile=*/{},
          transform ? info.view : BsrAttr(), 0, 1, 0, /*band=*/{},
          /*custom_mask=*/false, /*merge=*/{}, rows, target.hasPDL(),
          transform, transform ? getVariantNames(ctx, info) : ArrayAttr());
      gpu::GPUFuncOp func = createKernel(
          b, loc, gm, name,
          getMergeKernelArguments(info.dtype, transform, info.paged(),
                                  info.params),
          launch);
      buildMergeBody(b, func, info, transform);
    }
    return FlatSymbolRefAttr::get(ctx, name);
  }

  LogicalResult outline(AttentionOp op, const TargetInfo &target) {
    FailureOr<AttentionInfo> info = getAttentionInfo(op);
    if (failed(info))
      return failure();
    MLIRContext *ctx = op.getContext();
    gpu::GPUModuleOp gm = getOrCreateGPUModule(getOperation(), gpuModuleName);
    OpBuilder b(ctx);
    SmallVector<TileAttr> tiles;
    if (std::optional<TileAttr> tile = op.getTile())
      tiles.push_back(*tile);
    else
      llvm::append_range(tiles, op.getTileCandidates()->getAsRange<TileAttr>());

    SmallVector<Attribute> kernels;
    for (TileAttr tile : tiles) {
      auto emitError = [&] { return op.emitOpError(); };
      if (failed(checkTileFits(tile, info->headDim, target, emitError)))
        return failure();
      if (tile.getKvTma() && !getKVBoxRows(tile, info->headDim, info->view))
        return op.emitOpError()
               << "tile " << tile << " loads K/V by TMA, one box per page or "
               << "per tile: the pages of " << info->view
               << " neither hold whole tiles nor are a multiple of 8 keys "
               << "dividing the tile (and of the producer's "
               << 1024 / info->headDim
               << " rows per copy round); drop kv_tma";
      FlatSymbolRefAttr merge =
          getOrBuildMerge(b, gm, *info, getMergeRows(tile, info->headDim),
                          target, op.getLoc());
      std::string name = getAttentionKernelName(*info, tile);
      if (!gm.lookupSymbol(name)) {
        TileCost cost = getTileCost(tile);
        TileMMA mma = getTileMMA(tile, info->headDim, target);
        // Masks are ANDed: the band any of them declares holds for all.
        BandAttr band = HookComposer(info->variants, {}, {}).getBand(ctx);
        auto launch = LaunchAttr::get(
            ctx, KernelRole::attention, StringAttr::get(ctx, target.getName()),
            getTileThreads(tile, mma),
            getTileSharedMemory(tile, info->headDim, mma).bytes,
            tile.getCtasPerSm(), info->dtype, info->headDim, info->numQoHeads,
            info->numKVHeads, tile, info->view, cost.perItem, cost.perKVToken,
            cost.minChunk, band, info->customMask, merge,
            /*merge_rows=*/1, /*pdl=*/false, /*output_transform=*/false,
            getVariantNames(ctx, *info));
        gpu::GPUFuncOp func = createKernel(
            b, op.getLoc(), gm, name,
            getAttentionKernelArguments(info->dtype, info->paged(),
                                        info->view.getStrided(),
                                        info->customMask, tile.getKvTma(),
                                        info->params),
            launch);
        buildAttentionBody(b, func, *info, tile, isKVLoopPipelined(tile, mma));
      }
      kernels.push_back(SymbolRefAttr::get(
          ctx, gpuModuleName, {FlatSymbolRefAttr::get(ctx, name)}));
    }
    op->setAttr(kKernelsAttrName, ArrayAttr::get(ctx, kernels));
    return success();
  }

};

} // namespace
