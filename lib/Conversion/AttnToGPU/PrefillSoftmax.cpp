//===- PrefillSoftmax.cpp - Scores, online softmax, output of prefill -----===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// One KV tile of one warp (16 rows x N keys), then the item's epilogue.
//
//  1. S = Q Kᵀ: per k16 step, one A fragment of Q (registers or ldmatrix)
//     against N/8 n-tiles of K (ldmatrix x4 = two n-tiles), f32 accumulate.
//  2. Logits stay raw unless a logits-transform hook needs them scaled: the
//     exponent is then exp2(fma(s, sm_scale*log2e, -m)), one FMA + ex2 per
//     element (needs sm_scale > 0, as every caller passes).
//  3. The mask (key < kv_end AND the variants' mask hooks AND the custom
//     mask's bit) runs only where it can bite: on the last tile and, with
//     @causal, on tiles crossing the diagonal of the item's first row;
//     elsewhere an scf.if skips it. A custom mask or a non-causal mask hook
//     bites anywhere: every tile runs it.
//  4. Online softmax per row (max over the quad's lanes); the accumulator
//     is rescaled by exp2(m_old - m_new); fully masked rows keep m = -inf.
//  5. P is already the A operand of P·V (C fragments of n-tiles 2k, 2k+1 are
//     the A fragment of k16 step k); V comes in with ldmatrix.trans.
//
//===----------------------------------------------------------------------===//

#include "PrefillEmitter.h"
#include "attn/Conversion/AttnToGPU/VariantHooks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace ::attn;
using namespace ::attn::detail;
using mlir::attn::HookKind;

static constexpr float kLog2e = 1.4426950408889634f;

void PrefillEmitter::computeTile(Value tile, Value stage, SoftmaxState &st) {
  const int64_t NT = N / 8;
  Value kRow0 = kb.add(kb.idx(Q), kb.mul(stage, N));
  Value vRow0 = kb.add(kRow0, kb.idx(S * N));
  Value zeroF = kb.f32(0.0f), negInf = kb.negInf();
  Value tileStart = kb.add(kvBegin, kb.mul(tile, N));

  // 1. S = Q Kᵀ. Lane l addresses row l % 8 of matrix l / 8 = (token half,
  // d half): (0,lo) (0,hi) (1,lo) (1,hi).
  SmallVector<SmallVector<Value, 4>> s(NT, SmallVector<Value, 4>(4, zeroF));
  Value kToken = kb.add(kb.mul(kb.divu(lane, 16), 8), kb.remu(lane, 8));
  Value kHalf = kb.remu(kb.divu(lane, 8), 2);
  for (int64_t ks = 0; ks < D / 16; ++ks) {
    SmallVector<Value, 4> a =
        spec.keepsQueryInRegisters() ? qFrag[ks] : queryFragment(ks);
    Value col = swizzledCol(kToken, kb.add(kHalf, kb.idx(2 * ks)));
    for (int64_t jj = 0; jj < N / 16; ++jj) {
      Value row = kb.add(kRow0, kb.add(kToken, kb.idx(16 * jj)));
      auto regs = ldmatrixX4(b, tiles, row, col, /*transpose=*/false);
      s[2 * jj] = mmaM16N8K16(b, spec.dtype, a, {regs[0], regs[1]}, s[2 * jj]);
      s[2 * jj + 1] =
          mmaM16N8K16(b, spec.dtype, a, {regs[2], regs[3]}, s[2 * jj + 1]);
    }
  }

  // Element coordinates: row g + 8r, key tileStart + 8nt + 2t + (i & 1).
  Value qPos[2], head[2];
  for (int64_t r = 0; r < 2; ++r) {
    qPos[r] = rowPos(localRow(r));
    head[r] = rowHead(localRow(r));
  }
  auto keyPos = [&](int64_t nt, int64_t i) {
    return kb.add(tileStart,
                  kb.add(kb.mul(t, 2), kb.idx(nt * 8 + (i & 1))));
  };

  // 2. Logits transform (on scaled logits, in natural units).
  const bool transformed = hooks && hooks->has(HookKind::logits_transform);
  if (transformed)
    for (int64_t nt = 0; nt < NT; ++nt)
      for (int64_t i = 0; i < 4; ++i) {
        Value x = kb.fmul(s[nt][i], smScale);
        x = hooks->emitLogitsTransform(b, b.getLoc(), x, qPos[i / 2],
                                       keyPos(nt, i), head[i / 2]);
        s[nt][i] = kb.fmul(x, kb.f32(kLog2e));
      }

  // 3. Mask where it can bite.
  const bool maskHooks = hooks && hooks->has(HookKind::logits_mask);
  const bool diagonalOnly = maskHooks && hooks->uses("causal") &&
                            spec.causalBlockSkip && !spec.maskEveryTile &&
                            !spec.customMask;
  // The custom mask's bit of row r's first key: rows past row_count and
  // keys past kv_len are clamped into the request's matrix, so no load
  // leaves it (those elements are discarded or masked anyway).
  Value maskRowBit[2];
  if (spec.customMask) {
    Value lastRow = kb.sub(rowCount, kb.idx(1));
    for (int64_t r = 0; r < 2; ++r) {
      Value token = rowToken(kb.mins(localRow(r), lastRow));
      maskRowBit[r] = kb.add(maskBase, kb.mul(token, kvLen));
    }
  }
  Value lastKey = spec.customMask ? kb.sub(kvLen, kb.idx(1)) : Value();
  auto applyMask = [&](SmallVector<SmallVector<Value, 4>> &v) {
    for (int64_t nt = 0; nt < NT; ++nt)
      for (int64_t i = 0; i < 4; ++i) {
        Value k = keyPos(nt, i);
        Value keep = kb.slt(k, kvEnd);
        if (maskHooks)
          keep = kb.andi(keep, hooks->emitLogitsMask(b, b.getLoc(), qPos[i / 2],
                                                     k, head[i / 2]));
        if (spec.customMask)
          keep = kb.andi(keep, kb.loadMaskBit(customMask,
                                              kb.add(maskRowBit[i / 2],
                                                     kb.mins(k, lastKey))));
        v[nt][i] = kb.select(keep, v[nt][i], negInf);
      }
  };
  if ((maskHooks && !diagonalOnly) || spec.customMask) {
    applyMask(s);
  } else {
    Value tileEnd = kb.add(tileStart, kb.idx(N));
    Value needMask = kb.sgt(tileEnd, kvEnd);
    if (diagonalOnly)
      needMask = arith::OrIOp::create(b, needMask, kb.sgt(tileEnd, kb.add(firstPos, kb.idx(1))));
    SmallVector<Value> flat;
    for (auto &frag : s)
      flat.append(frag.begin(), frag.end());
    SmallVector<Type> types(flat.size(), b.getF32Type());
    auto ifOp = scf::IfOp::create(b, types, needMask, /*withElseRegion=*/true);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    SmallVector<SmallVector<Value, 4>> masked = s;
    applyMask(masked);
    SmallVector<Value> maskedFlat;
    for (auto &frag : masked)
      maskedFlat.append(frag.begin(), frag.end());
    scf::YieldOp::create(b, maskedFlat);
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(b, flat);
    b.setInsertionPointAfter(ifOp);
    for (int64_t nt = 0; nt < NT; ++nt)
      for (int64_t i = 0; i < 4; ++i)
        s[nt][i] = ifOp.getResult(nt * 4 + i);
  }

  // 4. Online softmax, rows g (elements 0, 1) and g + 8 (elements 2, 3).
  for (int64_t r = 0; r < 2; ++r) {
    Value rowMax = negInf;
    for (int64_t nt = 0; nt < NT; ++nt)
      rowMax = kb.fmax(rowMax, kb.fmax(s[nt][2 * r], s[nt][2 * r + 1]));
    rowMax = kb.quadMax(rowMax);
    if (!transformed)
      rowMax = kb.fmul(rowMax, scaleLog2);
    Value mNew = kb.fmax(st.m[r], rowMax);
    // A row that has seen only masked keys keeps m = -inf; subtract 0 then.
    Value mUse = kb.select(kb.foeq(mNew, negInf), zeroF, mNew);
    Value alpha = kb.exp2(kb.fsub(st.m[r], mUse));
    Value negM = arith::NegFOp::create(b, mUse);
    Value sum = zeroF;
    for (int64_t nt = 0; nt < NT; ++nt)
      for (int64_t j = 0; j < 2; ++j) {
        Value &x = s[nt][2 * r + j];
        Value arg = transformed
                        ? kb.fadd(x, negM)
                        : math::FmaOp::create(b, x, scaleLog2, negM).getResult();
        x = kb.exp2(arg);
        sum = kb.fadd(sum, x);
      }
    st.l[r] = kb.fadd(kb.fmul(st.l[r], alpha), sum);
    st.m[r] = mNew;
    for (auto &frag : st.acc) {
      frag[2 * r] = kb.fmul(frag[2 * r], alpha);
      frag[2 * r + 1] = kb.fmul(frag[2 * r + 1], alpha);
    }
  }

  // 5. O += P V. Lane l addresses row l % 8 of matrix l / 8 = (token half,
  // d n-tile): (0,2j) (1,2j) (0,2j+1) (1,2j+1).
  Value vToken = kb.add(kb.mul(kb.remu(kb.divu(lane, 8), 2), 8),
                        kb.remu(lane, 8));
  Value vTile = kb.divu(lane, 16);
  for (int64_t kk = 0; kk < N / 16; ++kk) {
    SmallVector<Value, 4> p = {
        packPair(b, s[2 * kk][0], s[2 * kk][1], eltType),
        packPair(b, s[2 * kk][2], s[2 * kk][3], eltType),
        packPair(b, s[2 * kk + 1][0], s[2 * kk + 1][1], eltType),
        packPair(b, s[2 * kk + 1][2], s[2 * kk + 1][3], eltType)};
    Value row = kb.add(vRow0, kb.add(vToken, kb.idx(16 * kk)));
    for (int64_t dp = 0; dp < D / 16; ++dp) {
      Value col = swizzledCol(vToken, kb.add(vTile, kb.idx(2 * dp)));
      auto regs = ldmatrixX4(b, tiles, row, col, /*transpose=*/true);
      st.acc[2 * dp] =
          mmaM16N8K16(b, spec.dtype, p, {regs[0], regs[1]}, st.acc[2 * dp]);
      st.acc[2 * dp + 1] = mmaM16N8K16(b, spec.dtype, p, {regs[2], regs[3]},
                                       st.acc[2 * dp + 1]);
    }
  }
}

//===----------------------------------------------------------------------===//
// Epilogue
//===----------------------------------------------------------------------===//

void PrefillEmitter::emitEpilogue(SoftmaxState &st) {
  Value zeroF = kb.f32(0.0f), oneF = kb.f32(1.0f), negInf = kb.negInf();
  Value i32Zero = kb.i32(0);
  auto flagSet = [&](int32_t bit) {
    return arith::CmpIOp::create(b, arith::CmpIPredicate::ne,
                                 kb.andi(flags, kb.i32(bit)), i32Zero)
        .getResult();
  };
  Value isDirect = flagSet(4);
  Value isFirst = flagSet(1);
  const bool hasSink = hooks && hooks->has(HookKind::sink);
  auto f32x2 = VectorType::get({2}, b.getF32Type());
  auto eltx2 = VectorType::get({2}, eltType);
  const bool outTransform = hooks && hooks->has(HookKind::output_transform);

  for (int64_t r = 0; r < 2; ++r) {
    Value rl = localRow(r);
    Value m = st.m[r];
    Value l = kb.quadSum(st.l[r]);
    Value factor = oneF;
    if (hasSink) {
      // The first chunk of a tile counts the sink once: it joins the
      // denominator (and the LSE) but carries no value.
      Value sink = kb.fmul(hooks->emitSink(b, b.getLoc(), rowHead(rl)),
                           kb.f32(kLog2e));
      Value mF = kb.fmax(m, sink);
      Value fac = kb.exp2(kb.fsub(m, mF));
      Value lF = kb.fadd(kb.fmul(l, fac), kb.exp2(kb.fsub(sink, mF)));
      m = kb.select(isFirst, mF, m);
      l = kb.select(isFirst, lF, l);
      factor = kb.select(isFirst, fac, oneF);
    }
    Value nonEmpty = kb.fogt(l, zeroF);
    Value inv = kb.select(nonEmpty, kb.fdiv(factor, l), zeroF);
    Value lseValue = kb.select(nonEmpty, kb.fadd(m, kb.log2(l)), negInf);

    auto rowIf = scf::IfOp::create(b, kb.slt(rl, rowCount), false);
    b.setInsertionPointToStart(&rowIf.getThenRegion().front());
    Value token = rowToken(rl), head = rowHead(rl);
    Value isLeader = kb.eq(t, kb.idx(0));
    auto direct = scf::IfOp::create(b, isDirect, /*withElseRegion=*/true);
    {
      b.setInsertionPointToStart(&direct.getThenRegion().front());
      Value outRow =
          kb.add(kb.mul(kb.add(qoStart, token), spec.numQoHeads), head);
      Value qp = rowPos(rl);
      for (int64_t nt = 0; nt < D / 8; ++nt) {
        Value dim = kb.add(kb.mul(t, 2), kb.idx(nt * 8));
        Value v[2];
        for (int64_t j = 0; j < 2; ++j) {
          v[j] = kb.fmul(st.acc[nt][2 * r + j], inv);
          if (outTransform)
            v[j] = hooks->emitOutputTransform(b, b.getLoc(), v[j],
                                              kb.add(dim, kb.idx(j)), qp, head);
        }
        Value pair = vector::FromElementsOp::create(b, f32x2, ValueRange{v[0], v[1]});
        Value narrow = arith::TruncFOp::create(b, eltx2, pair);
        auto store = vector::StoreOp::create(
            b, narrow, out, ValueRange{kb.add(kb.mul(outRow, D), dim)});
        store.setAlignment(4);
      }
      auto lead = scf::IfOp::create(b, isLeader, false);
      b.setInsertionPointToStart(&lead.getThenRegion().front());
      memref::StoreOp::create(b, lseValue, lse, ValueRange{outRow});
    }
    {
      // Partial slot: normalised f32 rows and their LSE; the merge applies
      // any output transform after combining.
      b.setInsertionPointToStart(&direct.getElseRegion().front());
      Value slotRow = kb.add(kb.mul(slot, slotRows), rl);
      for (int64_t nt = 0; nt < D / 8; ++nt) {
        Value dim = kb.add(kb.mul(t, 2), kb.idx(nt * 8));
        Value pair = vector::FromElementsOp::create(
            b, f32x2,
            ValueRange{kb.fmul(st.acc[nt][2 * r], inv),
                       kb.fmul(st.acc[nt][2 * r + 1], inv)});
        auto store = vector::StoreOp::create(
            b, pair, partialO, ValueRange{kb.add(kb.mul(slotRow, D), dim)});
        store.setAlignment(8);
      }
      auto lead = scf::IfOp::create(b, isLeader, false);
      b.setInsertionPointToStart(&lead.getThenRegion().front());
      memref::StoreOp::create(b, lseValue, partialLse, ValueRange{slotRow});
    }
    b.setInsertionPointAfter(rowIf);
  }
}
