//===- TileMath.cpp - S = Q Kᵀ, online softmax, O += P V on sm_80+ --------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// One K/V tile of one warp: 16 rows against the tile's N keys (a decode
// warp's own 16 keys, or the CTA's shared tile).
//
//  1. qk: per k16 step, the A fragment of Q (registers, or ldmatrix from the
//     Q tile) against N/8 n-tiles of K (ldmatrix x4 = two n-tiles), f32.
//  2. online_softmax: logits stay raw unless a logits transform needs them
//     scaled (natural units): the exponent is exp2(fma(s, c, -m)) with c =
//     sm_scale*log2e, or log2e after a transform, one FMA and ex2 per
//     element, and the row max is taken before c (sm_scale >= 0, which the
//     wrappers check; rounding is monotonic, so max(s) * c rounds to the
//     max of the rounded s * c). The
//     mask (keys outside the item's range, the variants' masks, the custom
//     mask's bit) runs where it can bite: decode tiles always, taller tiles
//     on tiles leaving the range's interior unless a mask without a band (or
//     a custom mask) can bite anywhere. Then the running max per row (over
//     the 4 lanes of a quad), the rescale of the sum and accumulator by
//     exp2(m_old - m_new), and the probabilities; a row that saw only masked
//     keys keeps m = -inf.
//  3. pv: the probabilities are already mma's A operand (the C fragments of
//     n-tiles 2k, 2k+1 are the A fragment of k16 step k); V comes in with
//     ldmatrix.trans.
//
//===----------------------------------------------------------------------===//

#include "MMASync.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/ADT/DenseSet.h"

#include <array>
#include <cstdint>
#include <optional>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::mmasync;
using mlir::attn::detail::ldmatrixX4;
using mlir::attn::detail::packPair;
using mlir::attn::detail::SoftmaxState;

static constexpr float kLog2e = 1.4426950408889634f;
/// How far (log2 units) a warp's row max may grow before the warp moves its
/// running max and rescales (where ctx.lazyMax): probabilities stay below
/// 2^8 = 256, which f16 and bf16 hold with their usual relative precision.
static constexpr float kRescaleSlack = 8.0f;

namespace {

/// Scores as n-tiles of 4 C values.
using Fragments = SmallVector<SmallVector<Value, 4>>;

Fragments unflattenFragments(ValueRange values) {
  Fragments frags;
  for (size_t i = 0; i < values.size(); i += 4)
    frags.push_back(SmallVector<Value, 4>(values.slice(i, 4)));
  return frags;
}

SmallVector<Value> flattenFragments(const Fragments &frags) {
  SmallVector<Value> values;
  for (const auto &f : frags)
    values.append(f.begin(), f.end());
  return values;
}

/// A logits hook's conversion of a key position to float: `arith.sitofp` of
/// k_pos, of k_pos - q_pos or of q_pos - k_pos (ALiBi's distance).
struct KeyDistance {
  arith::SIToFPOp conversion;
  int64_t keySign; // +1: k_pos enters with +, -1: with -
  bool query;      // q_pos enters too, with the other sign
};

/// The hook's key distances (hook arguments: s, q_pos, k_pos, head).
SmallVector<KeyDistance> findKeyDistances(Region &hook) {
  Block &block = hook.front();
  Value qPos = block.getArgument(1), kPos = block.getArgument(2);
  SmallVector<KeyDistance> found;
  for (auto conversion : block.getOps<arith::SIToFPOp>()) {
    if (!conversion.getType().isF32())
      continue;
    Value x = conversion.getIn();
    if (x == kPos) {
      found.push_back({conversion, 1, false});
      continue;
    }
    auto sub = x.getDefiningOp<arith::SubIOp>();
    if (sub && sub.getLhs() == kPos && sub.getRhs() == qPos)
      found.push_back({conversion, 1, true});
    else if (sub && sub.getLhs() == qPos && sub.getRhs() == kPos)
      found.push_back({conversion, -1, true});
  }
  return found;
}

/// A logits mask's comparison of the key position with a value that does
/// not depend on it: `arith.cmpi <signed or eq/ne> k_pos, x` or `x, k_pos`.
/// For key firstKey + c (c = 8 nt + e, a constant), `k_pos < x` is
/// `c < x - firstKey`: the difference is taken once per row and tile, and
/// each score's test is one comparison with an immediate, where it took the
/// key's add, its conversion and a 64-bit compare.
struct KeyComparison {
  arith::CmpIOp cmp;
  bool keyOnLeft;
};

/// The hook's key comparisons (hook arguments: q_pos, k_pos, head), and in
/// `keyFree` whether each op of the hook's block does not depend on k_pos.
SmallVector<KeyComparison> findKeyComparisons(Region &hook,
                                              DenseSet<Operation *> &keyFree) {
  Block &block = hook.front();
  Value kPos = block.getArgument(1);
  auto free = [&](Value v) {
    if (v == kPos)
      return false;
    Operation *def = v.getDefiningOp();
    return !def || def->getBlock() != &block || keyFree.contains(def);
  };
  SmallVector<KeyComparison> found;
  for (Operation &op : block.without_terminator()) {
    if (op.getNumRegions() == 0 && llvm::all_of(op.getOperands(), free))
      keyFree.insert(&op);
    auto cmp = dyn_cast<arith::CmpIOp>(op);
    if (!cmp || !cmp.getLhs().getType().isInteger(32))
      continue;
    switch (cmp.getPredicate()) {
    case arith::CmpIPredicate::ult:
    case arith::CmpIPredicate::ule:
    case arith::CmpIPredicate::ugt:
    case arith::CmpIPredicate::uge:
      continue; // wraps: not a difference test
    default:
      break;
    }
    if (cmp.getLhs() == kPos && free(cmp.getRhs()))
      found.push_back({cmp, true});
    else if (cmp.getRhs() == kPos && free(cmp.getLhs()))
      found.push_back({cmp, false});
  }
  return found;
}

/// The custom mask's bits of one row for a thread's keys of a tile. Key
/// firstKey + 8 nt + e (e = 0, 1) is bit P + 8 nt + e of the packed mask, P
/// the row's bit of firstKey, so it lies in byte P / 8 + nt or the next one:
/// the NT + 1 bytes from P / 8 are loaded once a row and tile, and each score
/// tests its bit in the 16 bits of bytes nt and nt + 1, where a bit per score
/// took a load, its address and its shift.
struct MaskRow {
  SmallVector<Value> pairs; // i32 per n-tile: byte nt | byte nt + 1 << 8
  Value bit[2];             // i32: 1 << (P % 8 + e)

  /// `rowBit`: the row's first bit; `lastByte`: the row's last byte, where
  /// the loads stop (a byte past it holds only keys at or past kv_len, which
  /// the range test masks; keys start at 0, so none lies before the row).
  static MaskRow load(KernelBuilder &kb, Value mask, Value rowBit,
                      Value lastByte, Value firstKey, int64_t NT) {
    ImplicitLocOpBuilder &b = kb.builder();
    Value first = kb.add(rowBit, firstKey);
    Value byte0 = kb.divu(first, 8);
    SmallVector<Value> bytes;
    for (int64_t j = 0; j <= NT; ++j) {
      Value at = kb.mins(kb.add(byte0, kb.idx(j)), lastByte);
      bytes.push_back(arith::ExtUIOp::create(
          b, b.getI32Type(), memref::LoadOp::create(b, mask, ValueRange{at})));
    }
    MaskRow row;
    for (int64_t nt = 0; nt < NT; ++nt)
      row.pairs.push_back(kb.ori(
          bytes[nt], arith::ShLIOp::create(b, bytes[nt + 1], kb.i32(8))));
    Value shift = kb.toI32(kb.remu(first, 8));
    for (int64_t e = 0; e < 2; ++e)
      row.bit[e] = arith::ShLIOp::create(
          b, kb.i32(1), e ? arith::AddIOp::create(b, shift, kb.i32(1)).getResult()
                          : shift);
    return row;
  }

  /// Whether the mask keeps key firstKey + 8 nt + e.
  Value keeps(KernelBuilder &kb, int64_t nt, int64_t e) const {
    return kb.ne(kb.andi(pairs[nt], bit[e]), kb.i32(0));
  }
};

struct QKLowering : public OpConversionPattern<TileQKOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileQKOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    KernelContext ctx = KernelContext::get(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    ThreadCoords tc(kb);
    ValueRange kv = adaptor.getTile();
    Value tiles = getSharedTiles(kb, ctx);
    Value kRow0 = getKRow(kb, ctx, tc, kv[0]);
    const int64_t NT = ctx.N / 8;
    Value zeroF = kb.f32(0.0f);
    Fragments s(NT, SmallVector<Value, 4>(4, zeroF));
    // Lane l addresses row l % 8 of matrix l / 8 = (key half, d half):
    // (0,lo) (0,hi) (1,lo) (1,hi).
    Value kToken = kb.add(kb.mul(kb.divu(tc.lane, 16), 8), kb.remu(tc.lane, 8));
    Value kHalf = kb.remu(kb.divu(tc.lane, 8), 2);
    ValueRange query = adaptor.getQuery();
    bool inRegisters = keepsQueryInRegisters(ctx);
    for (int64_t ks = 0; ks < ctx.D / 16; ++ks) {
      SmallVector<Value, 4> a =
          inRegisters ? SmallVector<Value, 4>(query.slice(4 * ks, 4))
                      : loadQueryFragment(kb, ctx, tc, tiles, ks);
      for (int64_t jj = 0; jj < ctx.N / 16; ++jj) {
        Value row = kb.add(kRow0, kb.add(kToken, kb.idx(16 * jj)));
        SharedElement e = getSharedElement(
            kb, ctx, row, ks / 4, kb.add(kHalf, kb.idx(2 * (ks % 4))));
        auto regs = ldmatrixX4(b, tiles, e.row, e.col, /*transpose=*/false);
        s[2 * jj] = mma(kb, ctx, a, {regs[0], regs[1]}, s[2 * jj]);
        s[2 * jj + 1] = mma(kb, ctx, a, {regs[2], regs[3]}, s[2 * jj + 1]);
      }
    }
    rewriter.replaceOpWithMultiple(op, {flattenFragments(s)});
    return success();
  }
};

struct SoftmaxInitLowering : public OpConversionPattern<TileSoftmaxInitOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileSoftmaxInitOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    int64_t D = op.getState().getType().getDim();
    rewriter.replaceOpWithMultiple(
        op, {SoftmaxState::initial(kb, D / 8).flatten()});
    return success();
  }
};

struct OnlineSoftmaxLowering : public OpConversionPattern<TileOnlineSoftmaxOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileOnlineSoftmaxOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    KernelContext ctx = KernelContext::get(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    if (isProducerOp(op)) {
      // The producer's copy of the loop computes nothing: its state stays
      // the initial one and folds away.
      SmallVector<Value> probs(ctx.N / 16 * 4, kb.i32(0));
      rewriter.replaceOpWithMultiple(
          op, {SmallVector<Value>(adaptor.getState()), probs});
      return success();
    }
    ThreadCoords tc(kb);
    ItemValues item = ItemValues::unflatten(adaptor.getItem());
    ValueRange kv = adaptor.getTile();
    Value tileStart = kv[1], needsMask = kv[2];
    SoftmaxState st = SoftmaxState::unflatten(adaptor.getState(), ctx.D / 8);
    Fragments s = unflattenFragments(adaptor.getScores());
    // Scores left in flight (wgmma): wait for them, leaving the GEMMs issued
    // after them running. mma.sync's are never in flight.
    if (std::optional<uint64_t> pending = op.getAwaitScores(); pending && ctx.wgmma)
      s = unflattenFragments(mlir::attn::detail::wgmmaWait(
          b, int32_t(*pending), flattenFragments(s)));
    Value smScale = adaptor.getSmScale().front();
    const int64_t NT = ctx.N / 8;
    Value zeroF = kb.f32(0.0f), negInf = kb.negInf();
    Value scaleLog2 = kb.fmul(smScale, kb.f32(kLog2e));

    // Element coordinates: row g + 8r (rows past row_count stand in for the
    // item's last row, in bounds), key tileStart + 8nt + 2t + (i & 1).
    Value lastRow = kb.sub(item.rowCount, kb.idx(1));
    Value qPos[2], head[2], token[2];
    for (int64_t r = 0; r < 2; ++r) {
      Value local = kb.mins(getLocalRow(kb, ctx, tc, r), lastRow);
      token[r] = getRowToken(kb, ctx, item, local);
      qPos[r] = kb.add(item.posOffset, token[r]);
      head[r] = getRowHead(kb, ctx, item, local);
    }
    // Element (nt, i)'s key is the thread's first key plus this constant.
    auto keyOffset = [](int64_t nt, int64_t i) { return nt * 8 + (i & 1); };
    auto keyPos = [&](int64_t nt, int64_t i) {
      return kb.add(tileStart,
                    kb.add(kb.mul(tc.t, 2), kb.idx(keyOffset(nt, i))));
    };

    // Logits transform, on scaled logits in natural units.
    Region &transform = op.getLogitsTransform();
    const bool transformed = !transform.empty();
    // A key distance the hook converts to float (ALiBi's k_pos - q_pos) is
    // the row's distance to the thread's first key, converted once a tile,
    // plus the key's constant offset 8 nt + (i & 1): an add where each
    // element took an integer subtract and a conversion (a quarter-rate
    // instruction, beside the exponentials). float(B) + C is float(B + C)
    // exactly while |B| < 2^24 (distances within 16M tokens); beyond, the
    // two differ by one rounding.
    SmallVector<KeyDistance> distances;
    SmallVector<std::array<Value, 2>> distanceBase;
    // The thread's first key of the tile (its keys: firstKey + 8 nt + 0, 1).
    Value firstKey = kb.add(tileStart, kb.mul(tc.t, 2));
    if (transformed) {
      distances = findKeyDistances(transform);
      for (const KeyDistance &d : distances) {
        std::array<Value, 2> base;
        for (int64_t r = 0; r < 2; ++r) {
          Value x = d.keySign > 0
                        ? (d.query ? kb.sub(firstKey, qPos[r]) : firstKey)
                        : kb.sub(qPos[r], firstKey);
          base[r] = arith::SIToFPOp::create(b, b.getF32Type(), kb.toI32(x));
        }
        distanceBase.push_back(base);
      }
      for (int64_t nt = 0; nt < NT; ++nt)
        for (int64_t i = 0; i < 4; ++i) {
          IRMapping preset;
          const int64_t offset = keyOffset(nt, i);
          for (auto [d, base] : llvm::zip(distances, distanceBase))
            preset.map(d.conversion.getResult(),
                       offset == 0 ? base[i / 2]
                                   : kb.fadd(base[i / 2],
                                             kb.f32(float(d.keySign * offset))));
          s[nt][i] = inlineHook(b, transform,
                                {kb.fmul(s[nt][i], smScale), qPos[i / 2],
                                 keyPos(nt, i), head[i / 2]},
                                preset);
        }
    }
    // Scores as they stand to log2 units.
    Value toLog2 = transformed ? kb.f32(kLog2e) : scaleLog2;

    // The mask, where it can bite.
    Region &maskHooks = op.getLogitsMask();
    Value customMask = adaptor.getCustomMask().empty()
                           ? Value()
                           : adaptor.getCustomMask().front();
    // The custom mask's first bit of row r (rows past row_count are clamped
    // to the item's last, in the request's matrix) and its last byte.
    Value maskRowBit[2], maskLastByte[2];
    if (customMask) {
      Value maskBase = kb.mul(
          kb.toIndex(memref::LoadOp::create(
              b, adaptor.getMaskIndptr().front(), ValueRange{item.request})),
          8);
      for (int64_t r = 0; r < 2; ++r) {
        maskRowBit[r] = kb.add(maskBase, kb.mul(token[r], item.kvLen));
        maskLastByte[r] = kb.divu(
            kb.sub(kb.add(maskRowBit[r], item.kvLen), kb.idx(1)), 8);
      }
    }
    // On the pipelined wgmma loop the range's end and the hooks' key
    // comparisons are offsets from firstKey, taken once a row and tile
    // (KeyComparison). The other tiles keep a key per element, as measured
    // (bench/NOTES.md v59): at the mma.sync tiles' register caps the per-row
    // offsets made 10 kernels spill 4-28 bytes more and none less, and the
    // plain wgmma loop (head dim 256) ran 1.7% slower with them.
    const bool byOffset = ctx.wgmma && ctx.pipelined && !ctx.splitKeys;
    auto applyMask = [&](Fragments &v) {
      std::optional<MaskRow> maskRows[2];
      if (customMask)
        for (int64_t r = 0; r < 2; ++r)
          maskRows[r] = MaskRow::load(kb, customMask, maskRowBit[r],
                                      maskLastByte[r], firstKey, NT);
      // Positions: |kv_end - firstKey| < 2^31.
      Value endOffset =
          byOffset ? kb.toI32(kb.sub(item.kvEnd, firstKey)) : Value();
      SmallVector<KeyComparison> comparisons;
      IRMapping rowValues[2];
      SmallVector<std::array<Value, 2>> comparisonOffsets;
      if (byOffset && !maskHooks.empty()) {
        DenseSet<Operation *> keyFree;
        comparisons = findKeyComparisons(maskHooks, keyFree);
        Block &hook = maskHooks.front();
        // The row's arguments as inlineHook passes them (i32).
        auto asI32 = [&](Value v) {
          return v.getType().isIndex() ? kb.toI32(v) : v;
        };
        for (int64_t r = 0; r < 2; ++r) {
          rowValues[r].map(hook.getArgument(0), asI32(qPos[r]));
          rowValues[r].map(hook.getArgument(2), asI32(head[r]));
          for (Operation &op : hook.without_terminator())
            if (keyFree.contains(&op))
              b.clone(op, rowValues[r]);
        }
        // x - firstKey in i32, INT32_MIN where it would wrap (firstKey >= 0,
        // so only downwards): the tests compare it with offsets in [0, N),
        // on whose side INT32_MIN stays.
        Value first32 = kb.toI32(firstKey);
        Value lowest = kb.add(kb.i32(INT32_MIN), first32);
        for (KeyComparison &c : comparisons) {
          std::array<Value, 2> offsets;
          Value x = c.keyOnLeft ? c.cmp.getRhs() : c.cmp.getLhs();
          for (int64_t r = 0; r < 2; ++r) {
            Value xr = rowValues[r].lookupOrDefault(x);
            Value wraps = kb.slt(xr, lowest);
            offsets[r] =
                kb.select(wraps, kb.i32(INT32_MIN), kb.sub(xr, first32));
          }
          comparisonOffsets.push_back(offsets);
        }
      }
      for (int64_t nt = 0; nt < NT; ++nt)
        for (int64_t i = 0; i < 4; ++i) {
          Value k = keyPos(nt, i);
          Value offset =
              byOffset ? kb.i32(int32_t(keyOffset(nt, i))) : Value();
          Value keep = byOffset ? kb.slt(offset, endOffset)
                                : kb.slt(k, item.kvEnd);
          if (ctx.splitKeys)
            // Decode tiles start at multiples of 16, before the item's keys.
            keep = kb.andi(keep, arith::CmpIOp::create(
                                     b, arith::CmpIPredicate::sge, k,
                                     item.kvBegin));
          if (!maskHooks.empty()) {
            IRMapping preset = rowValues[i / 2];
            for (auto [c, offsets] : llvm::zip(comparisons, comparisonOffsets))
              preset.map(c.cmp.getResult(),
                         c.keyOnLeft
                             ? arith::CmpIOp::create(b, c.cmp.getPredicate(),
                                                     offset, offsets[i / 2])
                             : arith::CmpIOp::create(b, c.cmp.getPredicate(),
                                                     offsets[i / 2], offset));
            keep = kb.andi(keep, inlineHook(b, maskHooks,
                                            {qPos[i / 2], k, head[i / 2]},
                                            preset));
          }
          if (customMask)
            keep = kb.andi(keep, maskRows[i / 2]->keeps(kb, nt, i & 1));
          v[nt][i] = kb.select(keep, v[nt][i], negInf);
        }
    };
    if (ctx.splitKeys || !op.getBandCoversMask() || customMask) {
      applyMask(s);
    } else {
      SmallVector<Value> flat = flattenFragments(s);
      SmallVector<Type> types(flat.size(), b.getF32Type());
      auto ifOp = scf::IfOp::create(b, types, needsMask, /*withElseRegion=*/true);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      Fragments masked = s;
      applyMask(masked);
      scf::YieldOp::create(b, flattenFragments(masked));
      b.setInsertionPointToStart(&ifOp.getElseRegion().front());
      scf::YieldOp::create(b, flat);
      b.setInsertionPointAfter(ifOp);
      s = unflattenFragments(ifOp.getResults());
    }

    // Online softmax, rows g (elements 0, 1) and g + 8 (elements 2, 3).
    // Row max and row sum as trees: a running accumulation is a chain of
    // 2 * NT dependent adds that ptxas keeps (fp math is not reassociated).
    // With ctx.lazyMax a warp keeps its rows' maxima while no row's grew by
    // more than kRescaleSlack (log2 units), so that its probabilities stay
    // below 2^kRescaleSlack, and skips the accumulator's rescale; the sum
    // and the accumulator stay in the same units, so the normalised output
    // and the LSE are those of the true max. A row that has seen only
    // masked keys keeps m = -inf; subtract 0 then.
    auto newMax = [&](int64_t r) {
      SmallVector<Value> row;
      for (int64_t nt = 0; nt < NT; ++nt)
        row.append({s[nt][2 * r], s[nt][2 * r + 1]});
      Value rowMax = kb.fmul(kb.quadMax(kb.treeMax(row)), toLog2);
      return kb.fmax(st.m[r], rowMax);
    };
    Value mNew[2], rescale;
    if (ctx.lazyMax) {
      Value grew;
      for (int64_t r = 0; r < 2; ++r) {
        mNew[r] = newMax(r);
        // -inf - -inf is NaN, which compares false: such a row never grew.
        Value rowGrew =
            kb.fogt(kb.fsub(mNew[r], st.m[r]), kb.f32(kRescaleSlack));
        grew = r == 0 ? rowGrew : kb.ori(grew, rowGrew);
      }
      rescale = mlir::attn::detail::warpAny(b, grew);
    }
    Value alpha[2];
    for (int64_t r = 0; r < 2; ++r) {
      mNew[r] = rescale ? kb.select(rescale, mNew[r], st.m[r]) : newMax(r);
      Value mUse = kb.select(kb.foeq(mNew[r], negInf), zeroF, mNew[r]);
      // exp2(m_old - m_new): 1 where the max stays (0 for a row leaving
      // -inf, whose sum and accumulator are 0).
      alpha[r] = kb.exp2(kb.fsub(st.m[r], mUse));
      Value negM = arith::NegFOp::create(b, mUse);
      SmallVector<Value> probs;
      for (int64_t nt = 0; nt < NT; ++nt)
        for (int64_t j = 0; j < 2; ++j) {
          Value &x = s[nt][2 * r + j];
          x = kb.exp2(math::FmaOp::create(b, x, toLog2, negM));
          probs.push_back(x);
        }
      st.l[r] = kb.fadd(kb.fmul(st.l[r], alpha[r]), kb.treeSum(probs));
      st.m[r] = mNew[r];
    }
    // The accumulator is rescaled last, so that a P V still in flight has
    // the rest of the softmax to finish; with ctx.lazyMax only where the
    // warp moved its maxima (a warp-uniform branch).
    SmallVector<Value> acc;
    for (auto &frag : st.acc)
      acc.append(frag.begin(), frag.end());
    if (std::optional<uint64_t> pending = op.getAwaitAcc(); pending && ctx.wgmma)
      acc = mlir::attn::detail::wgmmaWait(b, int32_t(*pending), acc);
    auto scaled = [&] {
      SmallVector<Value> out;
      for (auto [i, x] : llvm::enumerate(acc))
        out.push_back(kb.fmul(x, alpha[(i % 4) / 2]));
      return out;
    };
    if (rescale) {
      SmallVector<Type> types(acc.size(), b.getF32Type());
      auto ifOp = scf::IfOp::create(b, types, rescale, /*withElseRegion=*/true);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      scf::YieldOp::create(b, scaled());
      b.setInsertionPointToStart(&ifOp.getElseRegion().front());
      scf::YieldOp::create(b, acc);
      b.setInsertionPointAfter(ifOp);
      acc = ifOp.getResults();
    } else {
      acc = scaled();
    }
    for (size_t i = 0; i < st.acc.size(); ++i)
      for (int64_t e = 0; e < 4; ++e)
        st.acc[i][e] = acc[4 * i + e];

    // P as the A operand of P V: k16 step kk is n-tiles 2kk and 2kk + 1.
    SmallVector<Value> probs;
    for (int64_t kk = 0; kk < ctx.N / 16; ++kk)
      probs.append({packPair(b, s[2 * kk][0], s[2 * kk][1], ctx.elt),
                    packPair(b, s[2 * kk][2], s[2 * kk][3], ctx.elt),
                    packPair(b, s[2 * kk + 1][0], s[2 * kk + 1][1], ctx.elt),
                    packPair(b, s[2 * kk + 1][2], s[2 * kk + 1][3], ctx.elt)});
    rewriter.replaceOpWithMultiple(op, {st.flatten(), probs});
    return success();
  }
};

struct PVLowering : public OpConversionPattern<TilePVOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TilePVOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    KernelContext ctx = KernelContext::get(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    ThreadCoords tc(kb);
    SoftmaxState st = SoftmaxState::unflatten(adaptor.getState(), ctx.D / 8);
    ValueRange probs = adaptor.getProbs();
    ValueRange kv = adaptor.getTile();
    Value tiles = getSharedTiles(kb, ctx);
    Value vRow0 = getVRow(kb, ctx, getKRow(kb, ctx, tc, kv[0]));
    // Lane l addresses row l % 8 of matrix l / 8 = (key half, d n-tile):
    // (0,2j) (1,2j) (0,2j+1) (1,2j+1).
    Value vToken = kb.add(kb.mul(kb.remu(kb.divu(tc.lane, 8), 2), 8),
                          kb.remu(tc.lane, 8));
    Value vTile = kb.divu(tc.lane, 16);
    for (int64_t kk = 0; kk < ctx.N / 16; ++kk) {
      SmallVector<Value, 4> p(probs.slice(4 * kk, 4));
      Value row = kb.add(vRow0, kb.add(vToken, kb.idx(16 * kk)));
      for (int64_t dp = 0; dp < ctx.D / 16; ++dp) {
        SharedElement e = getSharedElement(
            kb, ctx, row, dp / 4, kb.add(vTile, kb.idx(2 * (dp % 4))));
        auto regs = ldmatrixX4(b, tiles, e.row, e.col, /*transpose=*/true);
        st.acc[2 * dp] = mma(kb, ctx, p, {regs[0], regs[1]}, st.acc[2 * dp]);
        st.acc[2 * dp + 1] =
            mma(kb, ctx, p, {regs[2], regs[3]}, st.acc[2 * dp + 1]);
      }
    }
    rewriter.replaceOpWithMultiple(op, {st.flatten()});
    return success();
  }
};

} // namespace

void mlir::attn::mmasync::populateOnlineSoftmaxPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<SoftmaxInitLowering, OnlineSoftmaxLowering>(
      converter, patterns.getContext());
}

void mlir::attn::mmasync::populateTileMathPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  populateOnlineSoftmaxPatterns(converter, patterns);
  patterns.add<QKLowering, PVLowering>(converter, patterns.getContext());
}
