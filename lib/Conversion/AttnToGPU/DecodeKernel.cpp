//===- DecodeKernel.cpp - Persistent split-KV decode attention ------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The persistent decode kernel on the planner's work list: its entry point,
// arguments, and the parts of the body that move data. One CTA walks the work
// items cta_indptr[c] .. cta_indptr[c+1]-1 (WorkList.cpp); per item:
//
//  1. Load the item's up to 16 packed query rows (token * P + head % P) as
//     mma A fragments once, applying the variants' query transform (e.g.
//     RoPE at the row's position p = kv_len - qo_len + token).
//  2. Split the item's keys [kv_begin, kv_end) into 16-token tiles aligned
//     to absolute multiples of 16 (so a tile never straddles a page of 16 or
//     more tokens). Warp w takes tiles w, w + W, ... and pipelines them
//     through its own shared-memory ring of `numStages` slots with 16-byte
//     cp.async copies gathered by page index; tokens outside the item's
//     range are zero-filled, so stale or NaN data never reaches the math.
//     Page indices are loaded one tile ahead of the copies that need them.
//  3. Per landed tile, the key transform (if any) rewrites K in shared
//     memory at each key's position, then OnlineSoftmax.cpp runs S = Q Kᵀ,
//     the logits hooks, the online softmax and O += P V.
//  4. The warps merge once (OnlineSoftmax.cpp) and write o/lse (Direct
//     items) or the item's partial slot (split items).
//
// Shared memory is XOR-swizzled in 16-byte chunks (chunk ^ (token % 8)) so the
// cp.async stores and the ldmatrix loads are free of bank conflicts.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/DecodeKernel.h"
#include "DecodeEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "attn-decode-kernel"

using namespace mlir;
using namespace ::attn;
using namespace ::attn::detail;

DecodeKernelEmitter::DecodeKernelEmitter(ImplicitLocOpBuilder &b,
                                         const DecodeKernelSpec &spec)
    : b(b), kb(b), spec(spec), smem(getDecodeSmemLayout(spec)),
      D(spec.headDim), G(spec.groupSize()), P(spec.getGqaPack()),
      W(spec.numWarps), S(spec.numStages), PS(spec.pageSize),
      ragged(spec.indexing == KVIndexing::Ragged) {
  eltType = getElementType(b, spec.dtype);
}

//===----------------------------------------------------------------------===//
// Setup
//===----------------------------------------------------------------------===//

void DecodeKernelEmitter::emitSetup(gpu::GPUFuncOp func,
                                    ArrayRef<mlir::attn::VariantOp> variants) {
  auto args = func.getArguments();
  unsigned next = 0;
  ctaIndptr = args[next++], workItems = args[next++];
  partialO = args[next++], partialLse = args[next++];
  slotRows = args[next++], q = args[next++];
  kCache = args[next++], vCache = args[next++];
  out = args[next++], lse = args[next++];
  qoIndptr = args[next++], kvIndptr = args[next++];
  if (!ragged)
    kvIndices = args[next++], kvLastLen = args[next++];
  if (spec.customMask)
    customMask = args[next++], maskIndptr = args[next++];
  smScale = args[next++];

  // The variants' parameters (VariantParams.h: i1 travels as i32).
  SmallVector<Value> params =
      getVariantParamValues(b, func, args.size() - next);
  hooks = mlir::attn::VariantHooks(
      variants, params, {spec.headDim, spec.numQoHeads, spec.numKVHeads});

  tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  lane = kb.remu(tid, 32);
  warp = kb.divu(tid, 32);
  g = kb.divu(lane, 4);
  t = kb.remu(lane, 4);
  scaleLog2 = kb.fmul(smScale, kb.f32(1.4426950408889634f /* log2(e) */));

  // Shared-memory views over the dynamic shared memory.
  Value zero = kb.idx(0);
  auto wg = gpu::AddressSpaceAttr::get(b.getContext(),
                                       gpu::AddressSpace::Workgroup);
  auto bytes = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                               MemRefLayoutAttrInterface{}, wg);
  Value dyn = gpu::DynamicSharedMemoryOp::create(b, bytes);
  auto tilesType = MemRefType::get({W * S * 2 * T, D}, eltType,
                                   MemRefLayoutAttrInterface{}, wg);
  tiles = memref::ViewOp::create(b, tilesType, dyn, zero, ValueRange{});
  auto mergeType =
      MemRefType::get({W * smem.mergeRows, smem.mergeRowStride},
                      b.getF32Type(), MemRefLayoutAttrInterface{}, wg);
  merge = memref::ViewOp::create(b, mergeType, dyn, zero, ValueRange{});
  auto statsType = MemRefType::get({W * 2 * 16}, b.getF32Type(),
                                   MemRefLayoutAttrInterface{}, wg);
  stats = memref::ViewOp::create(b, statsType, dyn, kb.idx(smem.statsOffset),
                                 ValueRange{});

  // Lane l copies 16-byte chunk l % (D/8) of tokens l / (D/8) + i * 32/(D/8).
  copyToken0 = kb.divu(lane, D / 8);
  copyChunk = kb.remu(lane, D / 8);
}

/// Loads `memref[index], memref[index + 1]` (bf16/f16) as two f32.
static std::pair<Value, Value> loadPairF32(ImplicitLocOpBuilder &b,
                                           Value memref, Value index,
                                           Type eltType) {
  auto load = vector::LoadOp::create(b, VectorType::get({2}, eltType), memref,
                                     ValueRange{index});
  load.setAlignment(4);
  Value wide = arith::ExtFOp::create(b, VectorType::get({2}, b.getF32Type()),
                                     load.getResult());
  return {vector::ExtractOp::create(b, wide, ArrayRef<int64_t>{0}),
          vector::ExtractOp::create(b, wide, ArrayRef<int64_t>{1})};
}

void DecodeKernelEmitter::loadQueryFragments(const WorkItemValues &item) {
  using mlir::attn::HookKind;
  bool transform = hooks.has(HookKind::query_transform);
  Value zeroI32 = kb.i32(0);
  auto rowFragment = [&](int64_t r, int64_t kStep, int64_t half) {
    // Rows past row_count read the item's last row and are zeroed, so no
    // address leaves the query tensor.
    Value base = kb.mul(kb.add(kb.mul(item.qRow[r], spec.numQoHeads),
                               item.head[r]),
                        D);
    int64_t col = kStep * 16 + half * 8;
    Value colValue = kb.add(kb.mul(t, 2), col);
    Value pair;
    if (!transform) {
      pair = loadPackedPair(b, q, kb.add(base, colValue), eltType);
    } else {
      // RoPE-like transforms pair element d with d +- D/2.
      Value pairCol = kb.add(kb.mul(t, 2), (col + D / 2) % D);
      auto [x0, x1] = loadPairF32(b, q, kb.add(base, colValue), eltType);
      auto [p0, p1] = loadPairF32(b, q, kb.add(base, pairCol), eltType);
      Value y0 = hooks.emitQueryTransform(b, b.getLoc(), x0, p0, colValue,
                                          item.qPos[r], item.head[r]);
      Value y1 = hooks.emitQueryTransform(b, b.getLoc(), x1, p1,
                                          kb.add(colValue, 1), item.qPos[r],
                                          item.head[r]);
      pair = packPair(b, y0, y1, eltType);
    }
    return kb.select(item.rowValid[r], pair, zeroI32);
  };
  qFrag.clear();
  for (int64_t ks = 0; ks < D / 16; ++ks)
    qFrag.push_back({rowFragment(0, ks, 0), rowFragment(1, ks, 0),
                     rowFragment(0, ks, 1), rowFragment(1, ks, 1)});
}

//===----------------------------------------------------------------------===//
// Gathering tiles
//===----------------------------------------------------------------------===//

Value DecodeKernelEmitter::tileStart(const WorkItemValues &item, Value tile) {
  return kb.mul(kb.add(item.tileBase, tile), T);
}

SmallVector<Value> DecodeKernelEmitter::loadPageIds(const WorkItemValues &item,
                                                    Value tile) {
  SmallVector<Value> ids;
  Value lastPage = kb.sub(item.numPages, kb.idx(1));
  Value start = tileStart(item, tile);
  for (int64_t i = 0; i < idsPerLane(); ++i) {
    Value token = start;
    if (PS < T)
      token = kb.add(start, kb.add(copyToken0, i * (32 / (D / 8))));
    // Tiles past the end read the last page's index; their copies are
    // zero-filled and their keys masked.
    Value page = kb.mins(kb.divu(token, PS), lastPage);
    ids.push_back(memref::LoadOp::create(
        b, kvIndices, ValueRange{kb.add(item.pageBegin, page)}));
  }
  return ids;
}

void DecodeKernelEmitter::issueTile(const WorkItemValues &item, Value tile,
                                    Value stage, ValueRange ids) {
  const int64_t tokensPerCopyRow = 32 / (D / 8);
  Value start = tileStart(item, tile);
  Value slotRow = kb.mul(kb.add(kb.mul(warp, S), stage), 2 * T);
  Value eight = kb.idx(8), zero = kb.idx(0);
  const int64_t numKVHeads = spec.numKVHeads;
  for (int64_t i = 0; i < copiesPerLane(); ++i) {
    Value token = kb.add(copyToken0, i * tokensPerCopyRow);
    Value pos = kb.add(start, token);
    Value valid = arith::AndIOp::create(
        b, kb.slt(pos, item.kvEnd),
        arith::CmpIOp::create(b, arith::CmpIPredicate::sge, pos,
                              item.kvBegin));
    Value headRow;
    if (ragged) {
      // Zero-filled copies still name an address: keep it inside the
      // request's rows.
      Value clamped =
          kb.maxs(kb.mins(pos, kb.sub(item.kvLen, kb.idx(1))), zero);
      headRow = kb.add(kb.mul(kb.add(item.pageBegin, clamped), numKVHeads),
                       item.kvHead);
    } else {
      Value offset = kb.remu(pos, PS);
      Value page = kb.toIndex(ids[PS >= T ? 0 : i]);
      if (spec.layout == KVLayout::NHD)
        headRow = kb.add(
            kb.mul(kb.add(kb.mul(page, PS), offset), numKVHeads), item.kvHead);
      else
        headRow = kb.add(
            kb.mul(kb.add(kb.mul(page, numKVHeads), item.kvHead), PS), offset);
    }
    Value src = kb.add(kb.mul(headRow, D), kb.mul(copyChunk, 8));
    Value col = kb.mul(kb.xori(copyChunk, kb.andi(token, kb.idx(7))), 8);
    Value count = kb.select(valid, eight, zero);
    for (int64_t kv = 0; kv < 2; ++kv) {
      Value row = kb.add(slotRow, kb.add(token, kv * T));
      nvgpu::DeviceAsyncCopyOp::create(
          b, tiles, ValueRange{row, col}, kv == 0 ? kCache : vCache,
          ValueRange{src}, b.getIndexAttr(8), count, b.getUnitAttr());
    }
  }
}

void DecodeKernelEmitter::transformKeys(const WorkItemValues &item, Value tile,
                                        Value stage) {
  using mlir::attn::HookKind;
  if (!hooks.has(HookKind::key_transform))
    return;
  // Each lane rewrites pairs (d, d + D/2) of K in place: the element and the
  // one a rotate-half transform pairs it with, at the key's own position.
  Value kRow0 = kb.mul(kb.add(kb.mul(warp, S), stage), 2 * T);
  Value start = tileStart(item, tile);
  const int64_t half = D / 2, perLane = T * half / 32;
  auto loop = scf::ForOp::create(b, kb.idx(0), kb.idx(perLane), kb.idx(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value pairIndex = kb.add(lane, kb.mul(loop.getInductionVar(), 32));
  Value token = kb.divu(pairIndex, half);
  Value d0 = kb.remu(pairIndex, half);
  Value d1 = kb.add(d0, half);
  Value swz = kb.andi(token, kb.idx(7));
  auto column = [&](Value d) {
    return kb.add(kb.mul(kb.xori(kb.divu(d, 8), swz), 8), kb.remu(d, 8));
  };
  Value row = kb.add(kRow0, token);
  Value c0 = column(d0), c1 = column(d1);
  Type f32 = b.getF32Type();
  Value x0 = arith::ExtFOp::create(
      b, f32, memref::LoadOp::create(b, tiles, ValueRange{row, c0}).getResult());
  Value x1 = arith::ExtFOp::create(
      b, f32, memref::LoadOp::create(b, tiles, ValueRange{row, c1}).getResult());
  Value pos = kb.add(start, token);
  Value y0 = hooks.emitKeyTransform(b, b.getLoc(), x0, x1, d0, pos,
                                    item.kvHead);
  Value y1 = hooks.emitKeyTransform(b, b.getLoc(), x1, x0, d1, pos,
                                    item.kvHead);
  memref::StoreOp::create(b, arith::TruncFOp::create(b, eltType, y0), tiles,
                          ValueRange{row, c0});
  memref::StoreOp::create(b, arith::TruncFOp::create(b, eltType, y1), tiles,
                          ValueRange{row, c1});
}

//===----------------------------------------------------------------------===//
// Main loop
//===----------------------------------------------------------------------===//

SoftmaxState DecodeKernelEmitter::emitMainLoop(const WorkItemValues &item) {
  SmallVector<Value> initValues = SoftmaxState::initial(kb, D / 8).flatten();
  SmallVector<Type> stateTypes(initValues.size(), b.getF32Type());

  // Warps without tiles (and empty items) skip the pipeline, so no page
  // index is read for an empty request.
  auto ifOp =
      scf::IfOp::create(b, stateTypes, kb.sgt(item.numIters, kb.idx(0)),
                        /*withElseRegion=*/true);
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(b, initValues);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  {
    // Prologue: fill numStages - 1 slots.
    auto tileOf = [&](Value iter) { return kb.add(warp, kb.mul(iter, W)); };
    SmallVector<Value> ids = ragged ? SmallVector<Value>{}
                                    : loadPageIds(item, warp);
    for (int64_t s = 0; s + 1 < S; ++s) {
      issueTile(item, tileOf(kb.idx(s)), kb.idx(s), ids);
      cpAsyncCommit(b);
      if (!ragged)
        ids = loadPageIds(item, tileOf(kb.idx(s + 1)));
    }

    SmallVector<Value> loopInit = initValues;
    loopInit.append(ids);
    auto loop =
        scf::ForOp::create(b, kb.idx(0), item.numIters, kb.idx(1), loopInit);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getInductionVar();
    ValueRange carried = loop.getRegionIterArgs();
    SoftmaxState st = SoftmaxState::unflatten(
        carried.take_front(initValues.size()), D / 8);
    ValueRange carriedIds = carried.drop_front(initValues.size());

    // Refill the slot freed one iteration ago, then fetch the page indices
    // of the tile after it.
    Value ahead = kb.add(it, kb.idx(S - 1));
    issueTile(item, tileOf(ahead), kb.remu(ahead, S), carriedIds);
    cpAsyncCommit(b);
    SmallVector<Value> nextIds;
    if (!ragged)
      nextIds = loadPageIds(item, tileOf(kb.add(it, kb.idx(S))));

    cpAsyncWait(b, S - 1);
    syncWarp(b);
    if (hooks.has(mlir::attn::HookKind::key_transform)) {
      transformKeys(item, tileOf(it), kb.remu(it, S));
      syncWarp(b);
    }
    computeTile(item, tileOf(it), kb.remu(it, S), st);
    syncWarp(b);

    SmallVector<Value> yielded = st.flatten();
    yielded.append(nextIds);
    scf::YieldOp::create(b, yielded);
    b.setInsertionPointAfter(loop);

    // Copies issued past the last tile must land before the slots are reused.
    cpAsyncWait(b, 0);
    syncWarp(b);
    scf::YieldOp::create(
        b, ValueRange(loop.getResults().take_front(initValues.size())));
  }
  b.setInsertionPointAfter(ifOp);
  return SoftmaxState::unflatten(ifOp.getResults(), D / 8);
}

void DecodeKernelEmitter::emit(gpu::GPUFuncOp func,
                               ArrayRef<mlir::attn::VariantOp> variants) {
  b.setInsertionPointToStart(&func.getBody().front());
  emitSetup(func, variants);
  emitWorkLoop();
  gpu::ReturnOp::create(b);
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

static FailureOr<std::string>
buildDecodeKernelImpl(ModuleOp module, const DecodeKernelSpec &spec,
                        ArrayRef<mlir::attn::VariantOp> variants,
                        StringRef gpuModuleName) {
  if (llvm::Error err = spec.validate())
    return module.emitError("invalid decode kernel spec: ")
           << llvm::toString(std::move(err));
  MLIRContext *ctx = module.getContext();
  loadKernelDialects(ctx);
  FailureOr<SmallVector<VariantParamArg>> params =
      getVariantParamArgs(variants);
  if (failed(params))
    return failure();

  ImplicitLocOpBuilder b(module.getLoc(), ctx);
  gpu::GPUModuleOp gpuModule = getOrCreateGPUModule(module, b, gpuModuleName);
  std::string name = spec.getKernelName();
  if (gpuModule.lookupSymbol(name))
    return name; // Identical specs generate identical kernels.

  SmallVector<std::pair<std::string, std::string>> paramKinds;
  for (const VariantParamArg &p : *params)
    paramKinds.push_back({p.name, p.kind});
  KernelLaunchInfo info = getDecodeLaunchInfo(spec, paramKinds);
  gpu::GPUFuncOp func =
      createKernelFunc(b, gpuModule, info, spec.dtype, spec.minCTAsPerSM);
  // The declared type of each parameter argument (an i1 travels as i32, a
  // memref<?xf32> table as a flat f32 buffer the cloned hook loads from).
  setVariantParamTypes(func, *params);
  DecodeKernelEmitter(b, spec).emit(func, variants);
  return name;
}

static FailureOr<std::string>
buildMergeKernelImpl(ModuleOp module, const MergeKernelSpec &spec,
                     ArrayRef<mlir::attn::VariantOp> variants,
                     StringRef gpuModuleName) {
  if (llvm::Error err = spec.validate())
    return module.emitError("invalid merge kernel spec: ")
           << llvm::toString(std::move(err));
  MLIRContext *ctx = module.getContext();
  loadKernelDialects(ctx);
  // With an output transform the kernel binds every variant parameter, in
  // the attention kernel's order and names.
  SmallVector<VariantParamArg> params;
  if (spec.outputTransform) {
    FailureOr<SmallVector<VariantParamArg>> all = getVariantParamArgs(variants);
    if (failed(all))
      return failure();
    params = std::move(*all);
    if (params.size() != spec.params.size())
      return module.emitError("merge kernel spec lists ")
             << spec.params.size() << " variant parameters, its variants have "
             << params.size();
  }
  ImplicitLocOpBuilder b(module.getLoc(), ctx);
  gpu::GPUModuleOp gpuModule = getOrCreateGPUModule(module, b, gpuModuleName);
  std::string name = spec.getKernelName();
  if (gpuModule.lookupSymbol(name))
    return name;
  KernelLaunchInfo info = getMergeLaunchInfo(spec);
  gpu::GPUFuncOp func = createKernelFunc(b, gpuModule, info, spec.dtype, 0);
  if (spec.outputTransform)
    setVariantParamTypes(func, params);
  emitMergeKernelBody(b, func, spec, variants);
  return name;
}

void ::attn::registerKernelGenDialects(DialectRegistry &registry) {
  registry.insert<arith::ArithDialect, gpu::GPUDialect, LLVM::LLVMDialect,
                  math::MathDialect, memref::MemRefDialect,
                  nvgpu::NVGPUDialect, scf::SCFDialect,
                  vector::VectorDialect, mlir::attn::AttnDialect>();
  insertNVVMDialect(registry);
}

namespace attn {
FailureOr<std::string> buildDecodeKernel(ModuleOp module,
                                         const DecodeKernelSpec &spec,
                                         ArrayRef<mlir::attn::VariantOp> variants,
                                         StringRef gpuModuleName) {
  return buildDecodeKernelImpl(module, spec, variants, gpuModuleName);
}
FailureOr<std::string> buildMergeKernel(ModuleOp module,
                                        const MergeKernelSpec &spec,
                                        StringRef gpuModuleName) {
  return buildMergeKernelImpl(module, spec, {}, gpuModuleName);
}
FailureOr<std::string>
buildMergeKernel(ModuleOp module, const MergeKernelSpec &spec,
                 ArrayRef<mlir::attn::VariantOp> variants,
                 StringRef gpuModuleName) {
  return buildMergeKernelImpl(module, spec, variants, gpuModuleName);
}
} // namespace attn
