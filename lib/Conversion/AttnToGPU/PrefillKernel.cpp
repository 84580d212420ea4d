//===- PrefillKernel.cpp - Generated work-list prefill attention ----------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The prefill kernel's skeleton. Per CTA (W = tileQ / 16 warps, warp w owns
// packed rows 16w .. 16w + 15 of the current tile):
//
//  1. Walk work items cta_indptr[c] .. cta_indptr[c+1]-1. For each, read the
//     request's query range (qo_indptr), KV range (kv_indptr, kv_last_len) and
//     the item's rows and keys [kv_begin, kv_end).
//  2. With the @causal variant, stop the KV loop at the last row's position
//     (p = kv_len - qo_len + token): later tiles are fully masked. A custom
//     mask replaces causal: every tile runs, and every tile is masked.
//  3. Issue the Q tile (cp.async, zero-filled past row_count), then the first
//     stages - 1 K/V tiles; once Q lands, load its A fragments.
//  4. Steady state, one CTA barrier per tile: wait for tile j, refill the slot
//     tile j-1 used with tile j + stages - 1 (page ids fetched one tile ahead),
//     then S = Q Kᵀ, mask (diagonal / tail tiles only), online softmax,
//     O += P V (PrefillSoftmax.cpp).
//  5. Normalise and write o/lse directly, or rows 0..row_count-1 of a partial
//     slot (f32 output + base-2 LSE).
//
//===----------------------------------------------------------------------===//

#include "PrefillEmitter.h"
#include "attn/Conversion/AttnToGPU/DecodeKernel.h"
#include "attn/Conversion/AttnToGPU/VariantHooks.h"
#include "attn/Conversion/AttnToGPU/VariantParams.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#define DEBUG_TYPE "attn-prefill-kernel"

using namespace mlir;
using namespace ::attn;
using namespace ::attn::detail;

PrefillEmitter::PrefillEmitter(ImplicitLocOpBuilder &b,
                               const PrefillKernelSpec &spec,
                               const mlir::attn::VariantHooks *hooks)
    : b(b), kb(b), spec(spec), hooks(hooks), smem(getPrefillSmemLayout(spec)),
      D(spec.headDim), Q(spec.tileQ), N(spec.tileKV), S(spec.numStages),
      W(spec.getNumWarps()), P(spec.gqaPack), PS(spec.getPageSize()) {
  eltType = getElementType(b, spec.dtype);
}

//===----------------------------------------------------------------------===//
// Arguments and per-thread setup
//===----------------------------------------------------------------------===//

void PrefillEmitter::bindArguments(gpu::GPUFuncOp func) {
  auto args = func.getArguments();
  unsigned i = 0;
  ++i; // plan: the header is not needed, the item arrays come separately.
  ctaIndptr = args[i++], workItems = args[i++], partialO = args[i++];
  partialLse = args[i++], slotRows = kb.toIndex(args[i++]);
  q = args[i++], kCache = args[i++], vCache = args[i++], out = args[i++];
  lse = args[i++], qoIndptr = args[i++], kvIndptr = args[i++];
  if (spec.indexing == KVIndexing::Paged)
    kvIndices = args[i++], kvLastLen = args[i++];
  if (spec.customMask)
    customMask = args[i++], maskIndptr = args[i++];
  smScale = args[i++];

  tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  lane = kb.remu(tid, 32);
  warp = kb.divu(tid, 32);
  g = kb.divu(lane, 4);
  t = kb.remu(lane, 4);
  scaleLog2 = kb.fmul(smScale, kb.f32(1.4426950408889634f /* log2(e) */));

  auto wg = gpu::AddressSpaceAttr::get(b.getContext(),
                                       gpu::AddressSpace::Workgroup);
  auto bytes = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                               MemRefLayoutAttrInterface{}, wg);
  Value dyn = gpu::DynamicSharedMemoryOp::create(b, bytes);
  auto tilesType = MemRefType::get({smem.totalRows, D}, eltType,
                                   MemRefLayoutAttrInterface{}, wg);
  tiles = memref::ViewOp::create(b, tilesType, dyn, kb.idx(0), ValueRange{});
}

Value PrefillEmitter::localRow(int64_t r) {
  return kb.add(kb.add(kb.mul(warp, 16), g), kb.idx(r * 8));
}
Value PrefillEmitter::rowToken(Value local) {
  Value packed = kb.add(rowBegin, local);
  return P == 1 ? packed : kb.divu(packed, P);
}
Value PrefillEmitter::rowHead(Value local) {
  Value base = kb.mul(headGroup, P);
  if (P == 1)
    return base;
  return kb.add(base, kb.remu(kb.add(rowBegin, local), P));
}
Value PrefillEmitter::rowPos(Value local) {
  return kb.add(posOffset, rowToken(local));
}

//===----------------------------------------------------------------------===//
// Work items
//===----------------------------------------------------------------------===//

void PrefillEmitter::emit(gpu::GPUFuncOp func) {
  // After whatever the caller put first (the variant parameters' values).
  b.setInsertionPointToEnd(&func.getBody().front());
  bindArguments(func);
  Value cta = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  auto load = [&](Value memref, Value i) {
    return kb.toIndex(memref::LoadOp::create(b, memref, ValueRange{i}));
  };
  Value first = load(ctaIndptr, cta);
  Value last = load(ctaIndptr, kb.add(cta, 1));
  auto loop = scf::ForOp::create(b, first, last, kb.idx(1));
  b.setInsertionPointToStart(loop.getBody());
  emitItem(loop.getInductionVar());
  b.setInsertionPointAfter(loop);
  gpu::ReturnOp::create(b);
}

void PrefillEmitter::emitItem(Value item) {
  // Every warp is done with the previous item's shared memory.
  gpu::BarrierOp::create(b);
  Value base = kb.mul(item, 8);
  auto field = [&](int64_t k) {
    return memref::LoadOp::create(b, workItems, ValueRange{kb.add(base, k)})
        .getResult();
  };
  request = kb.toIndex(field(0));
  headGroup = kb.toIndex(field(1));
  rowBegin = kb.toIndex(field(2));
  rowCount = kb.toIndex(field(3));
  kvBegin = kb.toIndex(field(4));
  kvEnd = kb.toIndex(field(5));
  slot = kb.toIndex(field(6));
  flags = field(7);

  auto load = [&](Value memref, Value i) {
    return kb.toIndex(memref::LoadOp::create(b, memref, ValueRange{i}));
  };
  Value zero = kb.idx(0);
  qoStart = load(qoIndptr, request);
  qoLen = kb.sub(load(qoIndptr, kb.add(request, 1)), qoStart);
  kvBase = load(kvIndptr, request);
  Value kvCount = kb.sub(load(kvIndptr, kb.add(request, 1)), kvBase);
  if (spec.indexing == KVIndexing::Paged) {
    // Only a request with pages has a last-page length to read.
    Value hasPages = kb.sgt(kvCount, zero);
    auto ifOp = scf::IfOp::create(b, b.getIndexType(), hasPages,
                                  /*withElseRegion=*/true);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    Value lastLen = load(kvLastLen, request);
    scf::YieldOp::create(
        b, ValueRange{kb.add(kb.mul(kb.sub(kvCount, kb.idx(1)), PS), lastLen)});
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(b, ValueRange{zero});
    b.setInsertionPointAfter(ifOp);
    kvLen = ifOp.getResult(0);
  } else {
    kvLen = kvCount;
  }
  posOffset = kb.sub(kvLen, qoLen);
  kvHead = kb.divu(kb.mul(headGroup, P), spec.groupSize());
  firstPos = kb.add(posOffset, P == 1 ? rowBegin : kb.divu(rowBegin, P));
  if (spec.customMask)
    maskBase = kb.mul(load(maskIndptr, request), 8);

  // Keys this item visits: [kv_begin, stop), stop cut at the last row's
  // position with causal block skipping.
  Value stop = kvEnd;
  if (hooks && hooks->uses("causal") && spec.causalBlockSkip &&
      !spec.customMask) {
    Value lastRow = kb.sub(kb.add(rowBegin, rowCount), kb.idx(1));
    Value lastPos =
        kb.add(posOffset, P == 1 ? lastRow : kb.divu(lastRow, P));
    stop = kb.mins(stop, kb.add(lastPos, kb.idx(1)));
  }
  Value span = kb.maxs(kb.sub(stop, kvBegin), zero);
  numTiles = kb.divu(kb.add(span, N - 1), N);

  SoftmaxState st = emitKVLoop();
  emitEpilogue(st);
}

//===----------------------------------------------------------------------===//
// The KV pipeline
//===----------------------------------------------------------------------===//

SoftmaxState PrefillEmitter::emitKVLoop() {
  SmallVector<Value> initValues = SoftmaxState::initial(kb, D / 8).flatten();
  SmallVector<Type> stateTypes(initValues.size(), b.getF32Type());

  // Items without visible keys skip the pipeline (and every index load).
  auto ifOp = scf::IfOp::create(b, stateTypes, kb.sgt(numTiles, kb.idx(0)),
                                /*withElseRegion=*/true);
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(b, initValues);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  {
    // Q is the oldest cp.async group; tiles 0 .. S-2 follow.
    issueQueryTile();
    cpAsyncCommit(b);
    SmallVector<Value> ids = loadPageIds(kb.idx(0));
    for (int64_t s = 0; s + 1 < S; ++s) {
      issueKVTile(kb.idx(s), kb.idx(s), ids);
      cpAsyncCommit(b);
      ids = loadPageIds(kb.idx(s + 1));
    }
    cpAsyncWait(b, S - 1);
    gpu::BarrierOp::create(b);
    transformQueryTile();
    if (spec.keepsQueryInRegisters())
      loadQueryFragments();

    SmallVector<Value> loopInit = initValues;
    loopInit.append(ids);
    auto loop = scf::ForOp::create(b, kb.idx(0), numTiles, kb.idx(1),
                                   loopInit);
    b.setInsertionPointToStart(loop.getBody());
    Value j = loop.getInductionVar();
    ValueRange carried = loop.getRegionIterArgs();
    SoftmaxState st = SoftmaxState::unflatten(
        carried.take_front(initValues.size()), D / 8);
    ValueRange carriedIds = carried.drop_front(initValues.size());

    // Tile j has landed for every thread, and every warp is past tile j-1,
    // whose slot takes tile j + S - 1.
    cpAsyncWait(b, S - 2);
    gpu::BarrierOp::create(b);
    Value stage = kb.remu(j, S);
    transformKeyTile(j, stage);
    Value ahead = kb.add(j, kb.idx(S - 1));
    issueKVTile(ahead, kb.remu(ahead, S), carriedIds);
    cpAsyncCommit(b);
    SmallVector<Value> nextIds = loadPageIds(kb.add(j, kb.idx(S)));

    computeTile(j, stage, st);

    SmallVector<Value> yielded = st.flatten();
    yielded.append(nextIds);
    scf::YieldOp::create(b, yielded);
    b.setInsertionPointAfter(loop);

    // Copies issued past the last tile land before the ring is reused.
    cpAsyncWait(b, 0);
    scf::YieldOp::create(
        b, ValueRange(loop.getResults().take_front(initValues.size())));
  }
  b.setInsertionPointAfter(ifOp);
  return SoftmaxState::unflatten(ifOp.getResults(), D / 8);
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

namespace {
/// Creates the gpu.func with the launch contract's arguments and emits it.
/// The hooks are `fixedHooks` when given, else those of `variants` bound to
/// the trailing parameter arguments (`params`, VariantParams.h).
LogicalResult buildPrefill(ModuleOp module, const PrefillKernelSpec &spec,
                           StringRef gpuModuleName,
                           const mlir::attn::VariantHooks *fixedHooks,
                           ArrayRef<mlir::attn::VariantOp> variants = {},
                           ArrayRef<VariantParamArg> params = {}) {
  if (llvm::Error err = spec.validate())
    return module.emitError("invalid prefill kernel spec: ")
           << llvm::toString(std::move(err));
  assert(spec.variantParams.size() == params.size() &&
         "the spec lists the parameters the kernel binds");
  MLIRContext *ctx = module.getContext();
  loadKernelDialects(ctx);
  ImplicitLocOpBuilder b(module.getLoc(), ctx);
  gpu::GPUModuleOp gpuModule = getOrCreateGPUModule(module, b, gpuModuleName);
  KernelLaunchInfo info = getPrefillLaunchInfo(spec);
  if (gpuModule.lookupSymbol(info.kernelName))
    return module.emitError("kernel '") << info.kernelName
                                        << "' already exists";
  gpu::GPUFuncOp func =
      createKernelFunc(b, gpuModule, info, spec.dtype, spec.minCTAsPerSM);

  // The variants' parameters: declared types on the arguments, then the
  // values the hooks read (first in the body; the emitter appends after).
  setVariantParamTypes(func, params);
  b.setInsertionPointToStart(&func.getBody().front());
  std::optional<mlir::attn::VariantHooks> hooks;
  if (!fixedHooks && !variants.empty())
    hooks.emplace(variants, getVariantParamValues(b, func, params.size()),
                  mlir::attn::HookConfig{spec.headDim, spec.numQoHeads,
                                         spec.numKVHeads});
  PrefillEmitter(b, spec, fixedHooks ? fixedHooks : (hooks ? &*hooks : nullptr))
      .emit(func);
  return success();
}
} // namespace

namespace attn {
LogicalResult buildPrefillKernel(ModuleOp module,
                                       const PrefillKernelSpec &spec,
                                       const mlir::attn::VariantHooks *hooks,
                                       StringRef gpuModuleName) {
  if (!spec.variantParams.empty())
    return module.emitError("prefill kernel: the spec has variant parameters; "
                            "build it with buildPrefillKernelForVariants");
  return buildPrefill(module, spec, gpuModuleName, hooks);
}

FailureOr<PrefillKernelSpec>
getPrefillSpecWithVariants(PrefillKernelSpec spec,
                           ArrayRef<mlir::attn::VariantOp> variants) {
  FailureOr<SmallVector<VariantParamArg>> params =
      getVariantParamArgs(variants);
  if (failed(params))
    return failure();
  for (mlir::attn::VariantOp variant : variants)
    spec.variantNames.push_back(variant.getSymName().str());
  for (const VariantParamArg &p : *params)
    spec.variantParams.push_back({p.name, p.kind});
  return spec;
}

LogicalResult buildPrefillKernelForVariants(
    ModuleOp module, PrefillKernelSpec spec,
    ArrayRef<mlir::attn::VariantOp> variants, StringRef gpuModuleName) {
  FailureOr<SmallVector<VariantParamArg>> params =
      getVariantParamArgs(variants);
  if (failed(params))
    return failure();
  FailureOr<PrefillKernelSpec> named =
      getPrefillSpecWithVariants(std::move(spec), variants);
  if (failed(named))
    return failure();
  return buildPrefill(module, *named, gpuModuleName, /*fixedHooks=*/nullptr,
                      variants, *params);
}
} // namespace attn
