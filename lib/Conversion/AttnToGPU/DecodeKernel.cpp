//===- DecodeKernel.cpp - Generated paged-KV decode attention -------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The decode kernel body. One CTA per (KV head, request); the G = Hq / Hkv
// query heads of the GQA group are the rows of a 16-row mma tile (rows >= G
// are zero). The algorithm, per CTA:
//
//  1. Read the request's page range from kv_indptr / kv_last_page_len, and
//     load the query rows as mma A fragments once (kept in registers).
//  2. Split the request's keys into tiles of 16 tokens. Warp w takes tiles
//     w, w + W, w + 2W, ... and pipelines them through its own shared-memory
//     ring of `numStages` slots with 16-byte cp.async copies gathered by page
//     index (tokens past the end are zero-filled, so stale or NaN data in a
//     last page's tail never reaches the math). Page indices are loaded one
//     tile ahead of the copies that need them.
//  3. Per tile: S = Q Kᵀ (ldmatrix + mma.sync m16n8k16, f32 accumulate),
//     scaled by sm_scale * log2(e), masked past kv_len; online softmax in
//     base 2 (running max m, running sum l per row); the probabilities are
//     already laid out as the A operand of P V (the C fragment of two n-tiles
//     is the A fragment of one k16 step), V comes in with ldmatrix.trans.
//  4. Each warp leaves m, l and its unnormalised output in shared memory; after
//     one CTA barrier all threads merge the warps' states, normalise, and
//     write out[b, h, :] and lse[b, h] = m + log2(l) (or 0 and -inf for a
//     request with no keys).
//
// Shared memory is XOR-swizzled in 16-byte chunks (chunk ^ (token % 8)) so the
// cp.async stores and the ldmatrix loads are free of bank conflicts.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/DecodeKernel.h"
#include "KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"


#define DEBUG_TYPE "attn-decode-kernel"

using namespace mlir;
using namespace attn;
using namespace attn::detail;

/// Static extent of the flat 1-D memrefs standing for device buffers: the
/// bare-pointer convention needs static shapes, and kernels index by hand.
static constexpr int64_t kFlatExtent = int64_t(1) << 40;

namespace {

/// The per-warp online-softmax state, carried through the main loop.
struct SoftmaxState {
  /// Running max and sum (per thread partial) of rows g and g + 8.
  Value m[2], l[2];
  /// Output accumulator: headDim / 8 mma n-tiles of 4 f32 each.
  SmallVector<SmallVector<Value, 4>> acc;
};

/// Emits the body of one decode kernel into a gpu.func.
class DecodeKernelEmitter {
public:
  DecodeKernelEmitter(ImplicitLocOpBuilder &b, const DecodeKernelSpec &spec)
      : b(b), kb(b), spec(spec), smem(getDecodeSmemLayout(spec)),
        D(spec.headDim), G(spec.groupSize()), W(spec.numWarps),
        S(spec.numStages), PS(spec.pageSize) {
    eltType = spec.dtype == KernelDType::BF16 ? Type(b.getBF16Type())
                                              : Type(b.getF16Type());
  }

  void emit(gpu::GPUFuncOp func);

private:
  static constexpr int64_t T = DecodeKernelSpec::kTileTokens;
  /// 16-byte copies per lane per tile, for K (and again for V).
  int64_t copiesPerLane() const { return T * D / 8 / 32; }
  /// Page ids each lane needs per tile: one when a tile lies in one page.
  int64_t idsPerLane() const { return PS >= T ? 1 : copiesPerLane(); }
  bool hasUpperRows() const { return G > 8; }

  void emitSetup(gpu::GPUFuncOp func);
  void loadQueryFragments();
  SmallVector<Value> loadPageIds(Value tile);
  void issueTile(Value tile, Value stage, ValueRange ids);
  void computeTile(Value tile, Value stage, SoftmaxState &st);
  SoftmaxState emitMainLoop();
  void emitMerge(SoftmaxState &st);

  SmallVector<Value> flatten(const SoftmaxState &st) const;
  SoftmaxState unflatten(ValueRange values) const;

  ImplicitLocOpBuilder &b;
  KernelBuilder kb;
  const DecodeKernelSpec &spec;
  DecodeSmemLayout smem;
  const int64_t D, G, W, S, PS;
  Type eltType;

  // Arguments.
  Value q, kCache, vCache, indptr, indices, lastLen, out, lse, smScale;
  // Shared-memory views.
  Value tiles, merge, stats;
  // Thread coordinates and per-request values (all index unless noted).
  Value kvHead, batch, tid, lane, warp, g, t;
  Value pageBegin, numPages, kvLen, numIters, scaleLog2 /*f32*/;
  // Lane-constant parts of the copy addresses.
  Value copyToken0, copyChunk;
  /// Query A fragments: headDim / 16 k-steps of 4 packed i32.
  SmallVector<SmallVector<Value, 4>> qFrag;
};

} // namespace

//===----------------------------------------------------------------------===//
// Setup
//===----------------------------------------------------------------------===//

void DecodeKernelEmitter::emitSetup(gpu::GPUFuncOp func) {
  auto args = func.getArguments();
  q = args[0], kCache = args[1], vCache = args[2], indptr = args[3];
  indices = args[4], lastLen = args[5], out = args[6], lse = args[7];
  smScale = args[8];

  kvHead = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  batch = gpu::BlockIdOp::create(b, gpu::Dimension::y);
  tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  lane = kb.remu(tid, 32);
  warp = kb.divu(tid, 32);
  g = kb.divu(lane, 4);
  t = kb.remu(lane, 4);

  // Page range and length of this request.
  auto loadIndex = [&](Value memref, Value i) {
    return kb.toIndex(memref::LoadOp::create(b, memref, ValueRange{i}));
  };
  pageBegin = loadIndex(indptr, batch);
  Value pageEnd = loadIndex(indptr, kb.add(batch, 1));
  numPages = kb.sub(pageEnd, pageBegin);
  Value last = loadIndex(lastLen, batch);
  Value zero = kb.idx(0);
  kvLen = kb.select(kb.sgt(numPages, zero),
                    kb.add(kb.mul(kb.sub(numPages, kb.idx(1)), PS), last),
                    zero);
  Value numTiles = kb.divu(kb.add(kvLen, T - 1), T);
  numIters = kb.select(kb.sgt(numTiles, warp),
                       kb.divu(kb.add(kb.sub(numTiles, warp), W - 1), W),
                       zero);
  scaleLog2 = kb.fmul(smScale, kb.f32(1.4426950408889634f /* log2(e) */));

  // Shared-memory views over the dynamic shared memory.
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

void DecodeKernelEmitter::loadQueryFragments() {
  Value zeroI32 = kb.i32(0);
  auto rowFragment = [&](int64_t rowOffset, int64_t kStep, int64_t half) {
    // Row g + rowOffset of the group; rows past G read row G - 1 and are
    // zeroed, so no address leaves the query tensor.
    Value row = kb.add(g, rowOffset);
    Value valid = kb.slt(row, kb.idx(G));
    Value clamped = kb.mins(row, kb.idx(G - 1));
    Value head = kb.add(kb.mul(kvHead, G), clamped);
    Value base = kb.mul(kb.add(kb.mul(batch, spec.numQoHeads), head), D);
    Value col = kb.add(kb.mul(t, 2), kStep * 16 + half * 8);
    Value pair = loadPackedPair(b, q, kb.add(base, col), eltType);
    return kb.select(valid, pair, zeroI32);
  };
  for (int64_t ks = 0; ks < D / 16; ++ks) {
    SmallVector<Value, 4> frag;
    frag.push_back(rowFragment(0, ks, 0));
    frag.push_back(hasUpperRows() ? rowFragment(8, ks, 0) : zeroI32);
    frag.push_back(rowFragment(0, ks, 1));
    frag.push_back(hasUpperRows() ? rowFragment(8, ks, 1) : zeroI32);
    qFrag.push_back(frag);
  }
}

//===----------------------------------------------------------------------===//
// Gathering tiles
//===----------------------------------------------------------------------===//

SmallVector<Value> DecodeKernelEmitter::loadPageIds(Value tile) {
  SmallVector<Value> ids;
  Value lastPage = kb.sub(numPages, kb.idx(1));
  Value tileStart = kb.mul(tile, T);
  for (int64_t i = 0; i < idsPerLane(); ++i) {
    Value token = tileStart;
    if (PS < T)
      token = kb.add(tileStart, kb.add(copyToken0, i * (32 / (D / 8))));
    // Tiles past the end read the last page's index; their copies are
    // zero-filled and their keys masked.
    Value page = kb.mins(kb.divu(token, PS), lastPage);
    ids.push_back(memref::LoadOp::create(b, indices,
                                         ValueRange{kb.add(pageBegin, page)}));
  }
  return ids;
}

void DecodeKernelEmitter::issueTile(Value tile, Value stage, ValueRange ids) {
  const int64_t tokensPerCopyRow = 32 / (D / 8);
  Value tileStart = kb.mul(tile, T);
  Value slotRow = kb.mul(kb.add(kb.mul(warp, S), stage), 2 * T);
  Value eight = kb.idx(8), zero = kb.idx(0);
  const int64_t numKVHeads = spec.numKVHeads;
  for (int64_t i = 0; i < copiesPerLane(); ++i) {
    Value token = kb.add(copyToken0, i * tokensPerCopyRow);
    Value pos = kb.add(tileStart, token);
    Value valid = kb.slt(pos, kvLen);
    Value offset = kb.remu(pos, PS);
    Value page = kb.toIndex(ids[PS >= T ? 0 : i]);
    Value headRow;
    if (spec.layout == KVLayout::NHD)
      headRow = kb.add(kb.mul(kb.add(kb.mul(page, PS), offset), numKVHeads),
                       kvHead);
    else
      headRow = kb.add(kb.mul(kb.add(kb.mul(page, numKVHeads), kvHead), PS),
                       offset);
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

//===----------------------------------------------------------------------===//
// One tile: S = Q Kᵀ, online softmax, O += P V
//===----------------------------------------------------------------------===//

void DecodeKernelEmitter::computeTile(Value tile, Value stage,
                                      SoftmaxState &st) {
  Value kRow0 = kb.mul(kb.add(kb.mul(warp, S), stage), 2 * T);
  Value vRow0 = kb.add(kRow0, kb.idx(T));
  Value zeroF = kb.f32(0.0f);
  Value seven = kb.idx(7);

  // S = Q Kᵀ: two n-tiles of 8 tokens. Lane l addresses row l % 8 of matrix
  // l / 8 = (token half, d half): (0,lo) (0,hi) (1,lo) (1,hi).
  SmallVector<SmallVector<Value, 4>> s(2, SmallVector<Value, 4>(4, zeroF));
  Value kToken = kb.add(kb.mul(kb.divu(lane, 16), 8), kb.remu(lane, 8));
  Value kHalf = kb.remu(kb.divu(lane, 8), 2);
  Value kSwz = kb.andi(kToken, seven);
  for (int64_t ks = 0; ks < D / 16; ++ks) {
    Value chunk = kb.add(kHalf, kb.idx(ks * 2));
    Value col = kb.mul(kb.xori(chunk, kSwz), 8);
    auto regs = ldmatrixX4(b, tiles, kb.add(kRow0, kToken), col,
                           /*transpose=*/false);
    s[0] = mmaM16N8K16(b, spec.dtype, qFrag[ks], {regs[0], regs[1]}, s[0]);
    s[1] = mmaM16N8K16(b, spec.dtype, qFrag[ks], {regs[2], regs[3]}, s[1]);
  }

  // Scale to base 2 and mask keys past the end.
  Value tileStart = kb.mul(tile, T);
  Value negInf = kb.negInf();
  for (int64_t nt = 0; nt < 2; ++nt)
    for (int64_t i = 0; i < 4; ++i) {
      Value token = kb.add(kb.mul(t, 2), kb.idx(nt * 8 + (i & 1)));
      Value valid = kb.slt(kb.add(tileStart, token), kvLen);
      s[nt][i] = kb.select(valid, kb.fmul(s[nt][i], scaleLog2), negInf);
    }

  // Online softmax per row (row g: elements 0,1; row g + 8: elements 2,3).
  for (int64_t r = 0; r < (hasUpperRows() ? 2 : 1); ++r) {
    Value rowMax = kb.fmax(kb.fmax(s[0][2 * r], s[0][2 * r + 1]),
                           kb.fmax(s[1][2 * r], s[1][2 * r + 1]));
    Value mNew = kb.fmax(st.m[r], kb.quadMax(rowMax));
    // A row that has seen only masked keys keeps m = -inf; subtract 0 then.
    Value mUse = kb.select(kb.foeq(mNew, negInf), zeroF, mNew);
    Value alpha = kb.exp2(kb.fsub(st.m[r], mUse));
    Value sum = zeroF;
    for (int64_t nt = 0; nt < 2; ++nt)
      for (int64_t j = 0; j < 2; ++j) {
        s[nt][2 * r + j] = kb.exp2(kb.fsub(s[nt][2 * r + j], mUse));
        sum = kb.fadd(sum, s[nt][2 * r + j]);
      }
    st.l[r] = kb.fadd(kb.fmul(st.l[r], alpha), sum);
    st.m[r] = mNew;
    for (auto &frag : st.acc) {
      frag[2 * r] = kb.fmul(frag[2 * r], alpha);
      frag[2 * r + 1] = kb.fmul(frag[2 * r + 1], alpha);
    }
  }

  // P as the A operand of one k16 step: a0 = row g tokens 2t.., a1 = row g+8,
  // a2 = row g tokens 2t+8.., a3 = row g+8.
  Value zeroI32 = kb.i32(0);
  SmallVector<Value, 4> p = {
      packPair(b, s[0][0], s[0][1], eltType),
      hasUpperRows() ? packPair(b, s[0][2], s[0][3], eltType) : zeroI32,
      packPair(b, s[1][0], s[1][1], eltType),
      hasUpperRows() ? packPair(b, s[1][2], s[1][3], eltType) : zeroI32};

  // O += P V. V fragments through ldmatrix.trans; lane l addresses row l % 8
  // of matrix l / 8 = (token half, d n-tile): (0,2j) (1,2j) (0,2j+1) (1,2j+1).
  Value vToken = kb.add(kb.mul(kb.remu(kb.divu(lane, 8), 2), 8),
                        kb.remu(lane, 8));
  Value vTile = kb.divu(lane, 16);
  Value vSwz = kb.andi(vToken, seven);
  for (int64_t dp = 0; dp < D / 16; ++dp) {
    Value chunk = kb.add(vTile, kb.idx(2 * dp));
    Value col = kb.mul(kb.xori(chunk, vSwz), 8);
    auto regs = ldmatrixX4(b, tiles, kb.add(vRow0, vToken), col,
                           /*transpose=*/true);
    st.acc[2 * dp] =
        mmaM16N8K16(b, spec.dtype, p, {regs[0], regs[1]}, st.acc[2 * dp]);
    st.acc[2 * dp + 1] = mmaM16N8K16(b, spec.dtype, p, {regs[2], regs[3]},
                                     st.acc[2 * dp + 1]);
  }
}

//===----------------------------------------------------------------------===//
// Main loop
//===----------------------------------------------------------------------===//

SmallVector<Value> DecodeKernelEmitter::flatten(const SoftmaxState &st) const {
  SmallVector<Value> values = {st.m[0], st.m[1], st.l[0], st.l[1]};
  for (const auto &frag : st.acc)
    values.append(frag.begin(), frag.end());
  return values;
}

SoftmaxState DecodeKernelEmitter::unflatten(ValueRange values) const {
  SoftmaxState st;
  st.m[0] = values[0], st.m[1] = values[1];
  st.l[0] = values[2], st.l[1] = values[3];
  for (int64_t nt = 0; nt < D / 8; ++nt)
    st.acc.push_back(SmallVector<Value, 4>(values.slice(4 + 4 * nt, 4)));
  return st;
}

SoftmaxState DecodeKernelEmitter::emitMainLoop() {
  SoftmaxState init;
  init.m[0] = init.m[1] = kb.negInf();
  init.l[0] = init.l[1] = kb.f32(0.0f);
  for (int64_t nt = 0; nt < D / 8; ++nt)
    init.acc.push_back(SmallVector<Value, 4>(4, init.l[0]));
  SmallVector<Value> initValues = flatten(init);
  SmallVector<Type> stateTypes(initValues.size(), b.getF32Type());

  // Warps without tiles (and requests without pages) skip the pipeline, so
  // no page index is read for an empty request.
  auto ifOp = scf::IfOp::create(b, stateTypes, kb.sgt(numIters, kb.idx(0)),
                                /*withElseRegion=*/true);
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(b, initValues);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  {
    // Prologue: fill numStages - 1 slots.
    auto tileOf = [&](Value iter) { return kb.add(warp, kb.mul(iter, W)); };
    SmallVector<Value> ids = loadPageIds(warp);
    for (int64_t s = 0; s + 1 < S; ++s) {
      issueTile(tileOf(kb.idx(s)), kb.idx(s), ids);
      cpAsyncCommit(b);
      ids = loadPageIds(tileOf(kb.idx(s + 1)));
    }

    SmallVector<Value> loopInit = initValues;
    loopInit.append(ids);
    auto loop = scf::ForOp::create(b, kb.idx(0), numIters, kb.idx(1),
                                   loopInit);
    b.setInsertionPointToStart(loop.getBody());
    Value it = loop.getInductionVar();
    ValueRange carried = loop.getRegionIterArgs();
    SoftmaxState st = unflatten(carried.take_front(initValues.size()));
    ValueRange carriedIds = carried.drop_front(initValues.size());

    // Refill the slot freed one iteration ago, then fetch the page indices
    // of the tile after it.
    Value ahead = kb.add(it, kb.idx(S - 1));
    issueTile(tileOf(ahead), kb.remu(ahead, S), carriedIds);
    cpAsyncCommit(b);
    SmallVector<Value> nextIds = loadPageIds(tileOf(kb.add(it, kb.idx(S))));

    cpAsyncWait(b, S - 1);
    syncWarp(b);
    computeTile(tileOf(it), kb.remu(it, S), st);
    syncWarp(b);

    SmallVector<Value> yielded = flatten(st);
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
  return unflatten(ifOp.getResults());
}

//===----------------------------------------------------------------------===//
// Merging the warps
//===----------------------------------------------------------------------===//

void DecodeKernelEmitter::emitMerge(SoftmaxState &st) {
  const int64_t rows = hasUpperRows() ? 2 : 1;
  for (int64_t r = 0; r < rows; ++r)
    st.l[r] = kb.quadSum(st.l[r]);

  // Every warp is past its main loop before the tiles become merge buffers.
  gpu::BarrierOp::create(b);
  auto f32x2 = VectorType::get({2}, b.getF32Type());
  for (int64_t r = 0; r < rows; ++r) {
    Value row = kb.add(kb.mul(warp, smem.mergeRows), kb.add(g, r * 8));
    for (int64_t nt = 0; nt < D / 8; ++nt) {
      Value pair = vector::FromElementsOp::create(
          b, f32x2, ValueRange{st.acc[nt][2 * r], st.acc[nt][2 * r + 1]});
      Value col = kb.add(kb.mul(t, 2), kb.idx(nt * 8));
      auto store = vector::StoreOp::create(b, pair, merge, ValueRange{row, col});
      store.setAlignment(8);
    }
  }
  auto leader = scf::IfOp::create(b, kb.eq(t, kb.idx(0)), /*withElse=*/false);
  b.setInsertionPointToStart(&leader.getThenRegion().front());
  for (int64_t r = 0; r < rows; ++r) {
    Value slot = kb.add(kb.mul(warp, 32), kb.add(g, r * 8));
    memref::StoreOp::create(b, st.m[r], stats, ValueRange{slot});
    memref::StoreOp::create(b, st.l[r], stats, ValueRange{kb.add(slot, 16)});
  }
  b.setInsertionPointAfter(leader);
  gpu::BarrierOp::create(b);

  // Thread i merges 8 consecutive output elements of item i (row, chunk).
  const int64_t items = G * (D / 8), threads = W * 32;
  auto f32x8 = VectorType::get({8}, b.getF32Type());
  Value negInf = kb.negInf(), zeroF = kb.f32(0.0f);
  for (int64_t base = 0; base < items; base += threads) {
    Value item = kb.add(tid, kb.idx(base));
    scf::IfOp guard;
    if (base + threads > items) {
      guard = scf::IfOp::create(b, kb.slt(item, kb.idx(items)), false);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
    }
    Value row = kb.divu(item, D / 8);
    Value chunk = kb.remu(item, D / 8);
    SmallVector<Value> mw, lw;
    Value mMax = negInf;
    for (int64_t w = 0; w < W; ++w) {
      Value slot = kb.add(row, kb.idx(w * 32));
      mw.push_back(memref::LoadOp::create(b, stats, ValueRange{slot}));
      lw.push_back(memref::LoadOp::create(b, stats,
                                          ValueRange{kb.add(slot, 16)}));
      mMax = kb.fmax(mMax, mw.back());
    }
    Value mUse = kb.select(kb.foeq(mMax, negInf), zeroF, mMax);
    Value sum = zeroF;
    Value acc = arith::ConstantOp::create(
        b, f32x8, DenseElementsAttr::get(f32x8, b.getF32FloatAttr(0.0f)));
    for (int64_t w = 0; w < W; ++w) {
      Value factor = kb.exp2(kb.fsub(mw[w], mUse));
      sum = kb.fadd(sum, kb.fmul(lw[w], factor));
      Value mrow = kb.add(row, kb.idx(w * smem.mergeRows));
      auto part = vector::LoadOp::create(b, f32x8, merge,
                                         ValueRange{mrow, kb.mul(chunk, 8)});
      part.setAlignment(16);
      Value splat = vector::BroadcastOp::create(b, f32x8, factor);
      acc = arith::AddFOp::create(b, acc,
                                  arith::MulFOp::create(b, part, splat));
    }
    Value nonEmpty = kb.fogt(sum, zeroF);
    Value inv = kb.select(nonEmpty, kb.fdiv(kb.f32(1.0f), sum), zeroF);
    acc = arith::MulFOp::create(b, acc,
                                vector::BroadcastOp::create(b, f32x8, inv));
    Value narrow = arith::TruncFOp::create(
        b, VectorType::get({8}, eltType), acc);
    Value head = kb.add(kb.mul(batch, spec.numQoHeads),
                        kb.add(kb.mul(kvHead, G), row));
    Value outIndex = kb.add(kb.mul(head, D), kb.mul(chunk, 8));
    auto store = vector::StoreOp::create(b, narrow, out, ValueRange{outIndex});
    store.setAlignment(16);

    auto first = scf::IfOp::create(b, kb.eq(chunk, kb.idx(0)), false);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    Value lseValue =
        kb.select(nonEmpty, kb.fadd(mMax, kb.log2(sum)), negInf);
    memref::StoreOp::create(b, lseValue, lse, ValueRange{head});
    b.setInsertionPointAfter(first);
    if (guard)
      b.setInsertionPointAfter(guard);
  }
}

void DecodeKernelEmitter::emit(gpu::GPUFuncOp func) {
  b.setInsertionPointToStart(&func.getBody().front());
  emitSetup(func);
  loadQueryFragments();
  SoftmaxState st = emitMainLoop();
  emitMerge(st);
  gpu::ReturnOp::create(b);
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

LogicalResult attn::buildDecodeKernel(ModuleOp module,
                                      const DecodeKernelSpec &spec,
                                      StringRef gpuModuleName) {
  if (llvm::Error err = spec.validate())
    return module.emitError("invalid decode kernel spec: ")
           << llvm::toString(std::move(err));
  MLIRContext *ctx = module.getContext();
  ctx->loadDialect<arith::ArithDialect, gpu::GPUDialect, LLVM::LLVMDialect,
                   math::MathDialect, memref::MemRefDialect,
                   nvgpu::NVGPUDialect, scf::SCFDialect,
                   vector::VectorDialect>();
  loadNVVMDialect(ctx);
  ImplicitLocOpBuilder b(module.getLoc(), ctx);
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  b.getUnitAttr());

  auto gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(gpuModuleName);
  if (!gpuModule) {
    b.setInsertionPointToEnd(module.getBody());
    gpuModule = gpu::GPUModuleOp::create(b, gpuModuleName);
  }
  std::string name = spec.getKernelName();
  if (gpuModule.lookupSymbol(name))
    return module.emitError("kernel '") << name << "' already exists";

  Type elt = spec.dtype == KernelDType::BF16 ? Type(b.getBF16Type())
                                             : Type(b.getF16Type());
  auto global = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Global);
  auto flat = [&](Type type) {
    return MemRefType::get({kFlatExtent}, type, MemRefLayoutAttrInterface{},
                           global);
  };
  Type i32 = b.getI32Type(), f32 = b.getF32Type();
  SmallVector<Type> argTypes = {flat(elt), flat(elt), flat(elt), flat(i32),
                                flat(i32), flat(i32), flat(elt), flat(f32),
                                f32};
  b.setInsertionPointToEnd(gpuModule.getBody());
  auto func = gpu::GPUFuncOp::create(b, name, b.getFunctionType(argTypes, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr(
      {static_cast<int32_t>(spec.numWarps * 32), 1, 1}));
  setOccupancyHints(func, spec.minCTAsPerSM);
  KernelLaunchInfo info = getDecodeLaunchInfo(spec);
  for (auto [i, arg] : llvm::enumerate(info.args))
    func.setArgAttr(i, "attn.name", b.getStringAttr(arg.name));

  DecodeKernelEmitter(b, spec).emit(func);
  return success();
}

void attn::registerKernelGenDialects(DialectRegistry &registry) {
  registry.insert<arith::ArithDialect, gpu::GPUDialect, LLVM::LLVMDialect,
                  math::MathDialect, memref::MemRefDialect,
                  nvgpu::NVGPUDialect, scf::SCFDialect,
                  vector::VectorDialect>();
  insertNVVMDialect(registry);
}
