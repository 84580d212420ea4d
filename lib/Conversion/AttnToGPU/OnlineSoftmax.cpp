//===- OnlineSoftmax.cpp - Per-tile softmax and the merge of the warps ----===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The arithmetic of the decode kernel, per warp and tile of 16 keys:
//
//  1. S = Q Kᵀ on tensor cores (ldmatrix + mma.sync m16n8k16, f32), two
//     n-tiles of 8 keys; thread (g, t) holds rows g and g + 8, keys 2t, 2t+1.
//  2. Logits: s * sm_scale, the variants' logits transforms (soft-cap,
//     ALiBi, ...), then * log2(e) for base-2 softmax; keys outside the item's
//     range, rejected by any logits mask or by the custom mask (one bit per
//     key, spec.customMask) become -inf.
//  3. Online softmax per row (running max m, running sum l, both base 2);
//     the probabilities are already the A operand of P V (the C fragment of
//     two n-tiles is the A fragment of one k16 step); V through
//     ldmatrix.trans.
//
// After the main loop each warp leaves m, l and its unnormalised output in
// shared memory; after one CTA barrier the threads merge the warps' states
// (plus the sink, on the item's first chunk), normalise, and write o/lse
// (Direct items, after the output transform) or the item's partial slot
// (f32, for the merge kernel).
//
//===----------------------------------------------------------------------===//

#include "DecodeEmitter.h"
#include "attn/Runtime/Plan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace ::attn;
using namespace ::attn::detail;
using mlir::attn::HookKind;

static constexpr float kLog2e = 1.4426950408889634f;

//===----------------------------------------------------------------------===//
// One tile: S = Q Kᵀ, hooks, online softmax, O += P V
//===----------------------------------------------------------------------===//

void DecodeKernelEmitter::computeTile(const WorkItemValues &item, Value tile,
                                      Value stage, SoftmaxState &st) {
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

  // Logits: scale, transform, base 2; mask keys outside the item's range and
  // those a variant masks.
  bool transform = hooks.has(HookKind::logits_transform);
  bool masks = hooks.has(HookKind::logits_mask);
  Value start = tileStart(item, tile);
  Value negInf = kb.negInf();
  Value log2e = transform ? kb.f32(kLog2e) : Value();
  for (int64_t nt = 0; nt < 2; ++nt)
    for (int64_t i = 0; i < 4; ++i) {
      int64_t r = i / 2;
      Value kPos = kb.add(start, kb.add(kb.mul(t, 2), nt * 8 + (i & 1)));
      Value valid = arith::AndIOp::create(
          b, kb.slt(kPos, item.kvEnd),
          arith::CmpIOp::create(b, arith::CmpIPredicate::sge, kPos,
                                item.kvBegin));
      if (masks)
        valid = arith::AndIOp::create(
            b, valid,
            hooks.emitLogitsMask(b, b.getLoc(), item.qPos[r], kPos,
                                 item.head[r]));
      if (spec.customMask) {
        // Keys outside [0, kv_len) (the zero-filled tail of a tile) read the
        // row's last bit, so no load leaves the request's mask.
        Value key = kb.maxs(kb.mins(kPos, kb.sub(item.kvLen, kb.idx(1))),
                            kb.idx(0));
        valid = kb.andi(valid,
                        kb.loadMaskBit(customMask, kb.add(item.maskRowBit[r], key)));
      }
      Value logit;
      if (transform) {
        logit = hooks.emitLogitsTransform(b, b.getLoc(),
                                          kb.fmul(s[nt][i], smScale),
                                          item.qPos[r], kPos, item.head[r]);
        logit = kb.fmul(logit, log2e);
      } else {
        logit = kb.fmul(s[nt][i], scaleLog2);
      }
      s[nt][i] = kb.select(valid, logit, negInf);
    }

  // Online softmax per row (row g: elements 0,1; row g + 8: elements 2,3).
  for (int64_t r = 0; r < 2; ++r) {
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
  SmallVector<Value, 4> p = {packPair(b, s[0][0], s[0][1], eltType),
                             packPair(b, s[0][2], s[0][3], eltType),
                             packPair(b, s[1][0], s[1][1], eltType),
                             packPair(b, s[1][2], s[1][3], eltType)};

  // O += P V. V fragments through ldmatrix.trans; lane l addresses row l % 8
  // of matrix l / 8 = (token half, d n-tile): (0,2j) (1,2j) (0,2j+1) (1,2j+1).
  Value vToken =
      kb.add(kb.mul(kb.remu(kb.divu(lane, 8), 2), 8), kb.remu(lane, 8));
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
// Merging the warps and writing the item
//===----------------------------------------------------------------------===//

void DecodeKernelEmitter::emitEpilogue(const WorkItemValues &item,
                                       SoftmaxState &st) {
  // sm_90+: the merge kernel, launched as a programmatic dependent, may be
  // scheduled once every CTA is this far (it waits for this grid's writes
  // with griddepcontrol.wait before reading them); without such a launch
  // this is a no-op.
  if (chipSupportsPDL(spec.chip))
    gridDepControlLaunchDependents(b);
  for (int64_t r = 0; r < 2; ++r)
    st.l[r] = kb.quadSum(st.l[r]);

  // Every warp is past its main loop before the tiles become merge buffers.
  gpu::BarrierOp::create(b);
  auto f32x2 = VectorType::get({2}, b.getF32Type());
  for (int64_t r = 0; r < 2; ++r) {
    Value row = kb.add(kb.mul(warp, smem.mergeRows), kb.add(g, r * 8));
    for (int64_t nt = 0; nt < D / 8; ++nt) {
      Value pair = vector::FromElementsOp::create(
          b, f32x2, ValueRange{st.acc[nt][2 * r], st.acc[nt][2 * r + 1]});
      Value col = kb.add(kb.mul(t, 2), kb.idx(nt * 8));
      auto store =
          vector::StoreOp::create(b, pair, merge, ValueRange{row, col});
      store.setAlignment(8);
    }
  }
  auto leader = scf::IfOp::create(b, kb.eq(t, kb.idx(0)), /*withElse=*/false);
  b.setInsertionPointToStart(&leader.getThenRegion().front());
  for (int64_t r = 0; r < 2; ++r) {
    Value slot = kb.add(kb.mul(warp, 32), kb.add(g, r * 8));
    memref::StoreOp::create(b, st.m[r], stats, ValueRange{slot});
    memref::StoreOp::create(b, st.l[r], stats, ValueRange{kb.add(slot, 16)});
  }
  b.setInsertionPointAfter(leader);
  gpu::BarrierOp::create(b);

  // Thread i merges 8 consecutive output elements of (row, chunk) = item i.
  const int64_t rows = DecodeKernelSpec::kTileRows;
  const int64_t units = rows * (D / 8), threads = W * 32;
  auto f32x8 = VectorType::get({8}, b.getF32Type());
  Value negInf = kb.negInf(), zeroF = kb.f32(0.0f);
  Value flags = item.flags;
  auto hasFlag = [&](int32_t bit) {
    return arith::CmpIOp::create(
        b, arith::CmpIPredicate::ne,
        arith::AndIOp::create(b, flags, kb.i32(bit)), kb.i32(0));
  };
  Value direct = hasFlag(::attn::runtime::kItemDirect);
  Value firstChunk = hasFlag(::attn::runtime::kItemFirstChunk);
  for (int64_t base = 0; base < units; base += threads) {
    Value unit = kb.add(tid, kb.idx(base));
    Value row = kb.divu(unit, D / 8);
    Value chunk = kb.remu(unit, D / 8);
    Value inRange = kb.slt(row, item.rowCount);
    if (base + threads > units)
      inRange = arith::AndIOp::create(b, inRange, kb.slt(unit, kb.idx(units)));
    auto guard = scf::IfOp::create(b, inRange, /*withElse=*/false);
    b.setInsertionPointToStart(&guard.getThenRegion().front());

    Value packed = kb.add(item.rowBegin, row);
    Value token = kb.divu(packed, P);
    Value head = kb.add(kb.mul(item.headGroup, P), kb.remu(packed, P));

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
    if (Value sink = hooks.emitSink(b, b.getLoc(), head)) {
      sinkLog2 =
          kb.select(firstChunk, kb.fmul(sink, kb.f32(kLog2e)), negInf);
      mMax = kb.fmax(mMax, sinkLog2);
    }
    Value mUse = kb.select(kb.foeq(mMax, negInf), zeroF, mMax);
    Value sum = sinkLog2 ? kb.exp2(kb.fsub(sinkLog2, mUse)) : zeroF;
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
    Value lseValue = kb.select(nonEmpty, kb.fadd(mMax, kb.log2(sum)), negInf);
    Value isFirstChunkElt = kb.eq(chunk, kb.idx(0));

    auto write = scf::IfOp::create(b, direct, /*withElse=*/true);
    // Direct: the final output, after the output transform.
    b.setInsertionPointToStart(&write.getThenRegion().front());
    {
      Value qRow = kb.add(item.qoStart, token);
      Value outRow = kb.add(kb.mul(qRow, spec.numQoHeads), head);
      Value finalAcc = acc;
      if (hooks.has(HookKind::output_transform)) {
        Value qPos = kb.add(kb.sub(item.kvLen, item.qoLen), token);
        for (int64_t j = 0; j < 8; ++j) {
          Value x = vector::ExtractOp::create(b, finalAcc, ArrayRef<int64_t>{j});
          Value dim = kb.add(kb.mul(chunk, 8), j);
          Value y = hooks.emitOutputTransform(b, b.getLoc(), x, dim, qPos, head);
          finalAcc = vector::InsertOp::create(b, y, finalAcc,
                                              ArrayRef<int64_t>{j});
        }
      }
      Value narrow =
          arith::TruncFOp::create(b, VectorType::get({8}, eltType), finalAcc);
      Value index = kb.add(kb.mul(outRow, D), kb.mul(chunk, 8));
      auto store = vector::StoreOp::create(b, narrow, out, ValueRange{index});
      store.setAlignment(16);
      auto first = scf::IfOp::create(b, isFirstChunkElt, false);
      b.setInsertionPointToStart(&first.getThenRegion().front());
      memref::StoreOp::create(b, lseValue, lse, ValueRange{outRow});
    }
    // Split: rows 0.. of the item's partial slot, in f32, untransformed:
    // the merge kernel applies any output transform to the merged row.
    b.setInsertionPointToStart(&write.getElseRegion().front());
    {
      Value slotRow =
          kb.add(kb.mul(item.slot, kb.toIndex(slotRows)), row);
      Value index = kb.add(kb.mul(slotRow, D), kb.mul(chunk, 8));
      auto store = vector::StoreOp::create(b, acc, partialO, ValueRange{index});
      store.setAlignment(16);
      auto first = scf::IfOp::create(b, isFirstChunkElt, false);
      b.setInsertionPointToStart(&first.getThenRegion().front());
      memref::StoreOp::create(b, lseValue, partialLse, ValueRange{slotRow});
    }
    b.setInsertionPointAfter(guard);
  }
}
