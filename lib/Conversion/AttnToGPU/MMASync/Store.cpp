//===- Store.cpp - attn.tile.store on sm_80+ ------------------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The end of a work item: normalise each row, add the sink once (the item
// flagged FirstChunk), and write either the final output (Direct items:
// after the output transform, narrowed to the element type, with the base-2
// LSE) or the item's partial slot (split items: f32, untransformed, for the
// merge kernel). A row that saw no key writes output 0 and LSE -inf (or the
// sink's LSE).
//
// Decode tiles first combine their warps: each warp leaves its running max,
// sum and unnormalised output rows in shared memory (over its K/V ring),
// and after one barrier every thread merges 8 consecutive elements of one
// (row, 8-element chunk) across the warps and writes them with 16-byte
// stores. Taller tiles write their fragments directly: each warp owns its 16
// rows.
//
// On chips with programmatic dependent launch, a decode item lets the merge
// kernel (launched as a dependent) be scheduled once every CTA is this far;
// the merge waits for this grid's writes before it reads them.
//
//===----------------------------------------------------------------------===//

#include "MMASync.h"
#include "attn/Runtime/Plan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::mmasync;
using mlir::attn::detail::SoftmaxState;

static constexpr float kLog2e = 1.4426950408889634f;

namespace {

/// What both store shapes need.
struct StoreArgs {
  ItemValues item;
  Value out, lse, partialO, partialLse, slotRows;
  Region *sink, *outputTransform;
  Value isDirect, isFirst;
};

Value hasFlag(KernelBuilder &kb, Value flags, int32_t bit) {
  return arith::CmpIOp::create(kb.builder(), arith::CmpIPredicate::ne,
                               kb.andi(flags, kb.i32(bit)), kb.i32(0));
}

/// Decode tiles: combine the warps, then write by (row, chunk).
void storeDecode(KernelBuilder &kb, const KernelContext &ctx,
                 const StoreArgs &a, SoftmaxState &st) {
  ImplicitLocOpBuilder &b = kb.builder();
  ThreadCoords tc(kb);
  const int64_t D = ctx.D, W = ctx.W, rows = 16;
  const TileSharedMemory &smem = ctx.smem;
  if (ctx.target->hasPDL())
    mlir::attn::detail::gridDepControlLaunchDependents(b);
  for (int64_t r = 0; r < 2; ++r)
    st.l[r] = kb.quadSum(st.l[r]);

  // Shared-memory views over the dynamic shared memory: the warps' f32
  // output rows (over their rings) and their statistics.
  Attribute wg = getWorkgroupSpace(b.getContext());
  Value dyn = getDynamicSharedMemory(kb);
  auto mergeType = MemRefType::get({W * rows, smem.mergeRowStride},
                                   b.getF32Type(), MemRefLayoutAttrInterface{},
                                   wg);
  Value merge = memref::ViewOp::create(b, mergeType, dyn, kb.idx(0),
                                       ValueRange{});
  auto statsType = MemRefType::get({W * 2 * rows}, b.getF32Type(),
                                   MemRefLayoutAttrInterface{}, wg);
  Value stats = memref::ViewOp::create(b, statsType, dyn,
                                       kb.idx(smem.statsOffset), ValueRange{});

  // Every warp is past its main loop before the rings become merge rows.
  gpu::BarrierOp::create(b);
  auto f32x2 = VectorType::get({2}, b.getF32Type());
  for (int64_t r = 0; r < 2; ++r) {
    Value row = kb.add(kb.mul(tc.warp, rows), kb.add(tc.g, kb.idx(r * 8)));
    for (int64_t nt = 0; nt < D / 8; ++nt) {
      Value pair = vector::FromElementsOp::create(
          b, f32x2, ValueRange{st.acc[nt][2 * r], st.acc[nt][2 * r + 1]});
      Value col = kb.add(kb.mul(tc.t, 2), kb.idx(nt * 8));
      auto store =
          vector::StoreOp::create(b, pair, merge, ValueRange{row, col});
      store.setAlignment(8);
    }
  }
  auto leader = scf::IfOp::create(b, kb.eq(tc.t, kb.idx(0)), false);
  b.setInsertionPointToStart(&leader.getThenRegion().front());
  for (int64_t r = 0; r < 2; ++r) {
    Value slot = kb.add(kb.mul(tc.warp, 32), kb.add(tc.g, kb.idx(r * 8)));
    memref::StoreOp::create(b, st.m[r], stats, ValueRange{slot});
    memref::StoreOp::create(b, st.l[r], stats, ValueRange{kb.add(slot, 16)});
  }
  b.setInsertionPointAfter(leader);
  gpu::BarrierOp::create(b);

  // Thread i merges 8 consecutive output elements of (row, chunk) = unit i.
  const int64_t units = rows * (D / 8), threads = ctx.threads();
  auto f32x8 = VectorType::get({8}, b.getF32Type());
  Value negInf = kb.negInf(), zeroF = kb.f32(0.0f);
  const ItemValues &item = a.item;
  for (int64_t base = 0; base < units; base += threads) {
    Value unit = kb.add(tc.tid, kb.idx(base));
    Value row = kb.divu(unit, D / 8);
    Value chunk = kb.remu(unit, D / 8);
    Value inRange = kb.slt(row, item.rowCount);
    if (base + threads > units)
      inRange = kb.andi(inRange, kb.slt(unit, kb.idx(units)));
    auto guard = scf::IfOp::create(b, inRange, /*withElse=*/false);
    b.setInsertionPointToStart(&guard.getThenRegion().front());

    Value token = getRowToken(kb, ctx, item, row);
    Value head = getRowHead(kb, ctx, item, row);

    SmallVector<Value> mw, lw;
    Value mMax = negInf;
    for (int64_t w = 0; w < W; ++w) {
      Value slot = kb.add(row, kb.idx(w * 32));
      mw.push_back(memref::LoadOp::create(b, stats, ValueRange{slot}));
      lw.push_back(
          memref::LoadOp::create(b, stats, ValueRange{kb.add(slot, 16)}));
      mMax = kb.fmax(mMax, mw.back());
    }
    // The sink joins the denominator once: on the first chunk of the tile.
    Value sinkLog2;
    if (!a.sink->empty()) {
      Value sink = inlineHook(b, *a.sink, {head});
      sinkLog2 = kb.select(a.isFirst, kb.fmul(sink, kb.f32(kLog2e)), negInf);
      mMax = kb.fmax(mMax, sinkLog2);
    }
    Value mUse = kb.select(kb.foeq(mMax, negInf), zeroF, mMax);
    Value sum = sinkLog2 ? kb.exp2(kb.fsub(sinkLog2, mUse)) : zeroF;
    Value acc = arith::ConstantOp::create(
        b, f32x8, DenseElementsAttr::get(f32x8, b.getF32FloatAttr(0.0f)));
    for (int64_t w = 0; w < W; ++w) {
      Value factor = kb.exp2(kb.fsub(mw[w], mUse));
      sum = kb.fadd(sum, kb.fmul(lw[w], factor));
      Value mrow = kb.add(row, kb.idx(w * rows));
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
    Value lseValue = kb.select(nonEmpty, kb.fadd(mMax, kb.log2(sum)), negInf);
    Value isFirstChunkElt = kb.eq(chunk, kb.idx(0));

    auto write = scf::IfOp::create(b, a.isDirect, /*withElse=*/true);
    // Direct: the final output, after the output transform.
    b.setInsertionPointToStart(&write.getThenRegion().front());
    {
      Value qRow = kb.add(item.qoStart, token);
      Value outRow = kb.add(kb.mul(qRow, ctx.Hq), head);
      Value finalAcc = acc;
      if (!a.outputTransform->empty()) {
        Value qPos = kb.add(item.posOffset, token);
        for (int64_t j = 0; j < 8; ++j) {
          Value x = vector::ExtractOp::create(b, finalAcc, ArrayRef<int64_t>{j});
          Value dim = kb.add(kb.mul(chunk, 8), kb.idx(j));
          Value y = inlineHook(b, *a.outputTransform, {x, dim, qPos, head});
          finalAcc = vector::InsertOp::create(b, y, finalAcc,
                                              ArrayRef<int64_t>{j});
        }
      }
      Value narrow =
          arith::TruncFOp::create(b, VectorType::get({8}, ctx.elt), finalAcc);
      Value index = kb.add(kb.mul(outRow, D), kb.mul(chunk, 8));
      auto store = vector::StoreOp::create(b, narrow, a.out, ValueRange{index});
      store.setAlignment(16);
      auto first = scf::IfOp::create(b, isFirstChunkElt, false);
      b.setInsertionPointToStart(&first.getThenRegion().front());
      memref::StoreOp::create(b, lseValue, a.lse, ValueRange{outRow});
    }
    // Split: rows 0.. of the item's partial slot, in f32, untransformed:
    // the merge kernel applies any output transform to the merged row.
    b.setInsertionPointToStart(&write.getElseRegion().front());
    {
      Value slotRow = kb.add(kb.mul(item.slot, a.slotRows), row);
      Value index = kb.add(kb.mul(slotRow, D), kb.mul(chunk, 8));
      auto store =
          vector::StoreOp::create(b, acc, a.partialO, ValueRange{index});
      store.setAlignment(16);
      auto first = scf::IfOp::create(b, isFirstChunkElt, false);
      b.setInsertionPointToStart(&first.getThenRegion().front());
      memref::StoreOp::create(b, lseValue, a.partialLse, ValueRange{slotRow});
    }
    b.setInsertionPointAfter(guard);
  }
}

/// Lane t of a quad holds word t (elements 2t, 2t + 1) of each of four
/// consecutive 8-element chunks of the quad's row; returns lane t's chunk t
/// whole, its words in column order, so that each lane writes 16 bytes
/// instead of four times 4. Three butterfly shuffles (lane masks 1, 2, 3: no
/// lane registers live across the kernel); permuting the words by t before
/// and after them makes every lane send and keep the same registers.
static Value transposeQuad(KernelBuilder &kb, const ThreadCoords &tc,
                           ArrayRef<Value> words) {
  ImplicitLocOpBuilder &b = kb.builder();
  Value odd = kb.ne(kb.andi(tc.t, kb.idx(1)), kb.idx(0));
  Value high = kb.ne(kb.andi(tc.t, kb.idx(2)), kb.idx(0));
  // y[j] = x[j ^ t].
  auto permute = [&](ArrayRef<Value> x) {
    SmallVector<Value, 4> half(4), y(4);
    for (int64_t j = 0; j < 4; ++j)
      half[j] = kb.select(odd, x[j ^ 1], x[j]);
    for (int64_t j = 0; j < 4; ++j)
      y[j] = kb.select(high, half[j ^ 2], half[j]);
    return y;
  };
  // Lane s sends its word s ^ m to lane s ^ m, which receives there the
  // word numbered by its own t from lane t ^ m.
  SmallVector<Value, 4> send = permute(words), got = {send[0]};
  for (int32_t m = 1; m < 4; ++m)
    got.push_back(kb.shuffleXor(send[m], m));
  // Word s of the chunk came with mask s ^ t.
  SmallVector<Value, 4> chunk = permute(got);
  auto i32x4 = VectorType::get({4}, b.getI32Type());
  return vector::FromElementsOp::create(b, i32x4, chunk);
}

/// Taller tiles: each thread writes the elements of its fragments.
void storeRows(KernelBuilder &kb, const KernelContext &ctx, const StoreArgs &a,
               SoftmaxState &st) {
  ImplicitLocOpBuilder &b = kb.builder();
  ThreadCoords tc(kb);
  const int64_t D = ctx.D;
  Value zeroF = kb.f32(0.0f), oneF = kb.f32(1.0f), negInf = kb.negInf();
  auto f32x2 = VectorType::get({2}, b.getF32Type());
  auto eltx2 = VectorType::get({2}, ctx.elt);
  const ItemValues &item = a.item;

  // Both rows' normalisers and LSEs first: their shuffles do not queue
  // behind the first row's stores.
  Value rowLocal[2], rowValid[2], inv[2], lse[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value rl = rowLocal[r] = getLocalRow(kb, ctx, tc, r);
    rowValid[r] = kb.slt(rl, item.rowCount);
    Value m = st.m[r];
    Value l = kb.quadSum(st.l[r]);
    Value factor = oneF;
    if (!a.sink->empty()) {
      // The first chunk of a tile counts the sink once: it joins the
      // denominator (and the LSE) but carries no value.
      Value sink = kb.fmul(inlineHook(b, *a.sink,
                                      {getRowHead(kb, ctx, item, rl)}),
                           kb.f32(kLog2e));
      Value mF = kb.fmax(m, sink);
      Value fac = kb.exp2(kb.fsub(m, mF));
      Value lF = kb.fadd(kb.fmul(l, fac), kb.exp2(kb.fsub(sink, mF)));
      m = kb.select(a.isFirst, mF, m);
      l = kb.select(a.isFirst, lF, l);
      factor = kb.select(a.isFirst, fac, oneF);
    }
    Value nonEmpty = kb.fogt(l, zeroF);
    inv[r] = kb.select(nonEmpty, kb.fmul(factor, kb.rcpApprox(l)), zeroF);
    lse[r] = kb.select(nonEmpty, kb.fadd(m, kb.log2Approx(l)), negInf);
  }
  auto normalised = [&](int64_t nt, int64_t r, int64_t j) {
    return kb.fmul(st.acc[nt][2 * r + j], inv[r]);
  };
  Value isLeader = kb.eq(tc.t, kb.idx(0));

  auto direct = scf::IfOp::create(b, a.isDirect, /*withElseRegion=*/true);
  b.setInsertionPointToStart(&direct.getThenRegion().front());
  for (int64_t r = 0; r < 2; ++r) {
    Value token = getRowToken(kb, ctx, item, rowLocal[r]);
    Value head = getRowHead(kb, ctx, item, rowLocal[r]);
    Value outRow = kb.add(kb.mul(kb.add(item.qoStart, token), ctx.Hq), head);
    Value rowStart = kb.mul(outRow, D);
    // Without an output transform, whole 16-byte chunks: the quad's words
    // trade places by shuffles, which every lane runs (outside the row
    // test: a row past the item's is computed and not written).
    int64_t quadChunks = a.outputTransform->empty() ? D / 32 : 0;
    SmallVector<Value> chunks;
    for (int64_t c = 0; c < quadChunks; ++c) {
      SmallVector<Value, 4> words;
      for (int64_t j = 0; j < 4; ++j)
        words.push_back(mlir::attn::detail::packPair(
            b, normalised(4 * c + j, r, 0), normalised(4 * c + j, r, 1),
            ctx.elt));
      chunks.push_back(transposeQuad(kb, tc, words));
    }
    auto rowIf = scf::IfOp::create(b, rowValid[r], false);
    b.setInsertionPointToStart(&rowIf.getThenRegion().front());
    for (int64_t c = 0; c < quadChunks; ++c) {
      Value dim = kb.mul(kb.add(tc.t, kb.idx(4 * c)), 8);
      Value chunk = vector::BitCastOp::create(
          b, VectorType::get({8}, ctx.elt), chunks[c]);
      auto store = vector::StoreOp::create(b, chunk, a.out,
                                           ValueRange{kb.add(rowStart, dim)});
      store.setAlignment(16);
    }
    // The rest (head dims that are not a multiple of 32, or an output
    // transform): each lane its own words.
    Value qp = kb.add(item.posOffset, token);
    for (int64_t nt = 4 * quadChunks; nt < D / 8; ++nt) {
      Value dim = kb.add(kb.mul(tc.t, 2), kb.idx(nt * 8));
      Value v[2];
      for (int64_t j = 0; j < 2; ++j) {
        v[j] = normalised(nt, r, j);
        if (!a.outputTransform->empty())
          v[j] = inlineHook(b, *a.outputTransform,
                            {v[j], kb.add(dim, kb.idx(j)), qp, head});
      }
      Value pair =
          vector::FromElementsOp::create(b, f32x2, ValueRange{v[0], v[1]});
      Value narrow = arith::TruncFOp::create(b, eltx2, pair);
      auto store = vector::StoreOp::create(b, narrow, a.out,
                                           ValueRange{kb.add(rowStart, dim)});
      store.setAlignment(4);
    }
    auto lead = scf::IfOp::create(b, isLeader, false);
    b.setInsertionPointToStart(&lead.getThenRegion().front());
    memref::StoreOp::create(b, lse[r], a.lse, ValueRange{outRow});
    b.setInsertionPointAfter(rowIf);
  }

  // Partial slot: normalised f32 rows and their LSE; the merge applies any
  // output transform after combining.
  b.setInsertionPointToStart(&direct.getElseRegion().front());
  for (int64_t r = 0; r < 2; ++r) {
    auto rowIf = scf::IfOp::create(b, rowValid[r], false);
    b.setInsertionPointToStart(&rowIf.getThenRegion().front());
    Value slotRow = kb.add(kb.mul(item.slot, a.slotRows), rowLocal[r]);
    for (int64_t nt = 0; nt < D / 8; ++nt) {
      Value dim = kb.add(kb.mul(tc.t, 2), kb.idx(nt * 8));
      Value pair = vector::FromElementsOp::create(
          b, f32x2, ValueRange{normalised(nt, r, 0), normalised(nt, r, 1)});
      auto store = vector::StoreOp::create(
          b, pair, a.partialO, ValueRange{kb.add(kb.mul(slotRow, D), dim)});
      store.setAlignment(8);
    }
    auto lead = scf::IfOp::create(b, isLeader, false);
    b.setInsertionPointToStart(&lead.getThenRegion().front());
    memref::StoreOp::create(b, lse[r], a.partialLse, ValueRange{slotRow});
    b.setInsertionPointAfter(rowIf);
  }
  b.setInsertionPointAfter(direct);
}

struct StoreLowering : public OpConversionPattern<TileStoreOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileStoreOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (isProducerOp(op)) {
      // The producer holds no output.
      rewriter.eraseOp(op);
      return success();
    }
    KernelContext ctx = KernelContext::get(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    SoftmaxState st = SoftmaxState::unflatten(adaptor.getState(), ctx.D / 8);
    StoreArgs a;
    a.item = ItemValues::unflatten(adaptor.getItem());
    a.out = adaptor.getOutput().front();
    a.lse = adaptor.getLse().front();
    a.partialO = adaptor.getPartialOutput().front();
    a.partialLse = adaptor.getPartialLse().front();
    a.slotRows = kb.toIndex(adaptor.getSlotRows().front());
    a.sink = &op.getSink();
    a.outputTransform = &op.getOutputTransform();
    a.isDirect = hasFlag(kb, a.item.flags, attnrt::kItemDirect);
    a.isFirst = hasFlag(kb, a.item.flags, attnrt::kItemFirstChunk);
    if (ctx.splitKeys)
      storeDecode(kb, ctx, a, st);
    else
      storeRows(kb, ctx, a, st);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::attn::mmasync::populateStorePatterns(const TypeConverter &converter,
                                                RewritePatternSet &patterns) {
  patterns.add<StoreLowering>(converter, patterns.getContext());
}
