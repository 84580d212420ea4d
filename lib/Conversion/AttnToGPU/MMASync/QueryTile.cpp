//===- QueryTile.cpp - attn.tile.load_query on sm_80+ ---------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The query tile as the A operand of mma.sync.
//
// Decode tiles (one warp's 16 rows, every warp the same rows): each thread
// loads its four A-fragment registers per k-step straight from global
// memory, as pairs of elements; with a query transform (RoPE), the element a
// half head away is loaded too and the hook maps each element at its row's
// position. Rows past row_count read the item's last row (in bounds) and are
// zeroed.
//
// Taller tiles: the CTA copies the Q tile into shared memory with 16-byte
// cp.async (rows past row_count zero-filled), waits for it (and for the K/V
// copies the pipeline issued before it), applies the transform in place, and
// each warp loads its 16 rows' fragments with ldmatrix, or leaves them there
// for the k-loop when they would not fit its registers (head dim 256).
//
// Warp-specialized (wgmma) kernels: each computing warpgroup copies and
// waits for its own 64 rows, the ones its GEMMs read, and copies the next
// item's already at prefetch_query, after the item's last S; load_query
// then only waits (a private tag says which item the copies were for).
//
//===----------------------------------------------------------------------===//

#include "MMASync.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::mmasync;
using mlir::attn::detail::loadPackedPair;
using mlir::attn::detail::packPair;

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

/// Decode: the A fragments of every k-step, from global memory.
static SmallVector<Value> loadDecodeFragments(KernelBuilder &kb,
                                              const KernelContext &ctx,
                                              const ItemValues &item,
                                              Value query, Region &transform) {
  ImplicitLocOpBuilder &b = kb.builder();
  ThreadCoords tc(kb);
  const int64_t D = ctx.D;
  // This thread's rows g and g + 8 of the tile. Rows past row_count stand in
  // for the item's last row (in bounds) and are zeroed.
  Value lastRow = kb.sub(item.rowCount, kb.idx(1));
  Value rowValid[2], base[2], head[2], pos[2];
  for (int64_t r = 0; r < 2; ++r) {
    Value row = kb.add(tc.g, kb.idx(r * 8));
    rowValid[r] = kb.slt(row, item.rowCount);
    Value local = kb.mins(row, lastRow);
    Value token = getRowToken(kb, ctx, item, local);
    head[r] = getRowHead(kb, ctx, item, local);
    pos[r] = kb.add(item.posOffset, token);
    Value qRow = kb.add(item.qoStart, token);
    base[r] = kb.mul(kb.add(kb.mul(qRow, ctx.Hq), head[r]), D);
  }
  Value zero = kb.i32(0);
  auto fragment = [&](int64_t r, int64_t kStep, int64_t half) {
    int64_t col = kStep * 16 + half * 8;
    Value colValue = kb.add(kb.mul(tc.t, 2), kb.idx(col));
    Value pair;
    if (transform.empty()) {
      pair = loadPackedPair(b, query, kb.add(base[r], colValue), ctx.elt);
    } else {
      // Rotate-half transforms pair element d with d +- D/2.
      Value pairCol = kb.add(kb.mul(tc.t, 2), kb.idx((col + D / 2) % D));
      auto [x0, x1] = loadPairF32(b, query, kb.add(base[r], colValue), ctx.elt);
      auto [p0, p1] = loadPairF32(b, query, kb.add(base[r], pairCol), ctx.elt);
      Value y0 = inlineHook(b, transform, {x0, p0, colValue, pos[r], head[r]});
      Value y1 = inlineHook(b, transform,
                            {x1, p1, kb.add(colValue, kb.idx(1)), pos[r],
                             head[r]});
      pair = packPair(b, y0, y1, ctx.elt);
    }
    return kb.select(rowValid[r], pair, zero);
  };
  SmallVector<Value> frags;
  for (int64_t ks = 0; ks < D / 16; ++ks)
    frags.append({fragment(0, ks, 0), fragment(1, ks, 0), fragment(0, ks, 1),
                  fragment(1, ks, 1)});
  return frags;
}

/// Taller tiles: the 16-byte copies of tile rows [rowBase, rowBase + rows)
/// into shared memory by `numThreads` threads (`thread` is this one's index
/// among them). A thread copies the same chunks whatever the item.
static void issueQueryRows(KernelBuilder &kb, const KernelContext &ctx,
                           const ItemValues &item, Value query, Value tiles,
                           Value thread, int64_t numThreads, Value rowBase,
                           int64_t rows) {
  ImplicitLocOpBuilder &b = kb.builder();
  const int64_t C = ctx.chunks(), T = numThreads;
  Value lastRow = kb.sub(item.rowCount, kb.idx(1));
  Value eight = kb.idx(8), zero = kb.idx(0);
  const int64_t total = rows * C;
  for (int64_t i = 0; i * T < total; ++i) {
    Value linear = kb.add(thread, kb.idx(i * T));
    Value row = kb.add(rowBase, kb.divu(linear, C)), ch = kb.remu(linear, C);
    // Rows past row_count read the item's last row and are zero-filled.
    Value src = kb.mins(row, lastRow);
    Value token = kb.add(item.qoStart, getRowToken(kb, ctx, item, src));
    Value qRow =
        kb.add(kb.mul(token, ctx.Hq), getRowHead(kb, ctx, item, src));
    Value count = kb.select(kb.slt(row, item.rowCount), eight, zero);
    auto copy = [&] {
      SharedElement dst =
          getSharedElement(kb, ctx, kb.add(kb.idx(ctx.smem.qRow), row), ch);
      nvgpu::DeviceAsyncCopyOp::create(
          b, tiles, ValueRange{dst.row, dst.col}, query, ValueRange{kb.add(kb.mul(qRow, ctx.D), kb.mul(ch, 8))},
          b.getIndexAttr(8), count, b.getUnitAttr());
    };
    if ((i + 1) * T <= total) {
      copy();
      continue;
    }
    // The last round of copies covers part of the threads.
    auto inTile = scf::IfOp::create(b, kb.slt(linear, kb.idx(total)), false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&inTile.getThenRegion().front());
    copy();
  }
}

/// Warp-specialized kernels: each computing warpgroup copies its own 64 rows
/// of the tile (the rows its GEMMs read), so that it can copy the next
/// item's while the other warpgroups still read theirs.
static void issueWarpgroupQueryRows(KernelBuilder &kb, const KernelContext &ctx,
                                    const ItemValues &item, Value query,
                                    Value tiles) {
  ThreadCoords tc(kb);
  Value warpgroup = kb.divu(tc.tid, 128);
  issueQueryRows(kb, ctx, item, query, tiles, kb.remu(tc.tid, 128), 128,
                 kb.mul(warpgroup, 64), 64);
}

/// Applies `fn(x, xPair, dim, row)` to every element of smem rows
/// [rowBase, rowBase + rows), pairing dim d with d + D/2 (rotate-half), with
/// `numThreads` threads (`thread` is this one's index among them). A unit of
/// work is one 16-byte chunk of a row and its partner chunk D/2 further:
/// eight pairs, read and written as two vectors (the elements one by one
/// took ~37 instructions a pair, two 2-byte loads and stores among them).
/// Each thread owns both chunks of its units, so no barrier is needed
/// between the reads and the writes. A loop over the units, not unrolled: a
/// hook such as RoPE is tens of ops with sin/cos, and unrolled copies per
/// tile cost seconds of LLVM and ptxas time for no speed.
void mlir::attn::mmasync::transformRows(
    KernelBuilder &kb, const KernelContext &ctx, Value tiles, Value thread,
    int64_t numThreads, Value rowBase, int64_t rows,
    llvm::function_ref<Value(Value x, Value pair, Value dim, Value row)> fn) {
  ImplicitLocOpBuilder &b = kb.builder();
  constexpr int64_t kChunk = 8; // elements of a 16-byte chunk
  const int64_t half = ctx.D / 2, chunksPerHalf = half / kChunk;
  assert(half % kChunk == 0 && "head dims are multiples of 16");
  const int64_t units = rows * chunksPerHalf;
  Type f32 = b.getF32Type();
  auto vecType = VectorType::get({kChunk}, ctx.elt);
  auto loop = scf::ForOp::create(b, kb.idx(0), kb.idx(units),
                                 kb.idx(numThreads));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value linear = kb.add(thread, loop.getInductionVar());
  if (units % numThreads) {
    // The last round covers part of the threads.
    auto inRange = scf::IfOp::create(b, kb.slt(linear, kb.idx(units)), false);
    b.setInsertionPointToStart(&inRange.getThenRegion().front());
  }
  Value row = kb.divu(linear, chunksPerHalf);
  Value chunk = kb.remu(linear, chunksPerHalf);
  Value smemRow = kb.add(rowBase, row);
  SharedElement e1 = getSharedElement(kb, ctx, smemRow, chunk);
  SharedElement e2 = getSharedElement(kb, ctx, smemRow,
                                      kb.add(chunk, kb.idx(chunksPerHalf)));
  auto load = [&](SharedElement e) {
    auto op =
        vector::LoadOp::create(b, vecType, tiles, ValueRange{e.row, e.col});
    op.setAlignment(16); // chunks start at 16-byte boundaries
    return op.getResult();
  };
  auto store = [&](Value v, SharedElement e) {
    vector::StoreOp::create(b, v, tiles, ValueRange{e.row, e.col})
        .setAlignment(16);
  };
  Value v1 = load(e1), v2 = load(e2);
  Value d0 = kb.mul(chunk, kb.idx(kChunk));
  Value out1 = v1, out2 = v2;
  for (int64_t i = 0; i < kChunk; ++i) {
    auto element = [&](Value v) -> Value {
      Value e = vector::ExtractOp::create(b, v, i);
      return arith::ExtFOp::create(b, f32, e);
    };
    Value x = element(v1), y = element(v2);
    Value d = kb.add(d0, kb.idx(i));
    Value nx = fn(x, y, d, row);
    Value ny = fn(y, x, kb.add(d, kb.idx(half)), row);
    out1 = vector::InsertOp::create(b, arith::TruncFOp::create(b, ctx.elt, nx),
                                    out1, i);
    out2 = vector::InsertOp::create(b, arith::TruncFOp::create(b, ctx.elt, ny),
                                    out2, i);
  }
  store(out1, e1);
  store(out2, e2);
}

namespace {

struct LoadQueryLowering : public OpConversionPattern<TileLoadQueryOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileLoadQueryOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    KernelContext ctx = KernelContext::get(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    ItemValues item = ItemValues::unflatten(adaptor.getItem());
    Value query = adaptor.getQuery().front();
    Region &transform = op.getTransform();
    if (ctx.splitKeys) {
      rewriter.replaceOpWithMultiple(
          op, {loadDecodeFragments(kb, ctx, item, query, transform)});
      return success();
    }
    if (ctx.specialized && isProducerOp(op)) {
      // The producer never reads Q.
      rewriter.replaceOpWithMultiple(op, {{kb.idx(ctx.smem.qRow)}});
      return success();
    }
    // The computing warps meet here: all of them (wgmma kernels), or the
    // CTA. Without a query transform, which runs over the whole tile, each
    // warpgroup of a wgmma kernel waits only for its own rows.
    auto barrier = [&] {
      if (ctx.specialized && transform.empty()) {
        ThreadCoords tc(kb);
        Value id = kb.add(kb.divu(tc.tid, 128), kb.idx(kWarpgroupBarrier));
        mlir::attn::detail::namedBarrier(
            b, arith::IndexCastOp::create(b, b.getI32Type(), id), 128);
      } else if (ctx.specialized) {
        mlir::attn::detail::namedBarrier(b, kConsumerBarrier, ctx.threads());
      } else {
        gpu::BarrierOp::create(b);
      }
    };
    Value tiles = getSharedTiles(kb, ctx);
    if (ctx.specialized) {
      // The rows are this warpgroup's to copy, unless the last item's
      // prefetch_query copied them already. Copies of a prefetch whose item
      // did not load them (it had no keys) land first: they write the same
      // chunks.
      emitIf(b, kb.ne(loadQueryTag(kb, op), item.index), [&] {
        mlir::attn::detail::cpAsyncWait(b, 0);
        issueWarpgroupQueryRows(kb, ctx, item, query, tiles);
        mlir::attn::detail::cpAsyncCommit(b);
      });
    } else {
      ThreadCoords tc(kb);
      issueQueryRows(kb, ctx, item, query, tiles, tc.tid, ctx.threads(),
                     kb.idx(0), ctx.Q);
      mlir::attn::detail::cpAsyncCommit(b);
    }
    // Q is the newest copy group: once it lands, so have the K/V tiles the
    // pipeline issued before it.
    mlir::attn::detail::cpAsyncWait(b, 0);
    publishSharedWrites(kb, ctx);
    barrier();
    if (!transform.empty()) {
      ThreadCoords tc(kb);
      transformRows(kb, ctx, tiles, tc.tid, ctx.threads(),
                    kb.idx(ctx.smem.qRow), ctx.Q,
                    [&](Value x, Value pair, Value dim, Value row) {
                      return inlineHook(b, transform,
                                        {x, pair, dim,
                                         getRowPos(kb, ctx, item, row),
                                         getRowHead(kb, ctx, item, row)});
                    });
      publishSharedWrites(kb, ctx);
      barrier();
    }
    SmallVector<Value> values;
    if (keepsQueryInRegisters(ctx)) {
      ThreadCoords tc(kb);
      for (int64_t ks = 0; ks < ctx.D / 16; ++ks)
        llvm::append_range(values, loadQueryFragment(kb, ctx, tc, tiles, ks));
    } else {
      values.push_back(kb.idx(ctx.smem.qRow));
    }
    rewriter.replaceOpWithMultiple(op, {values});
    return success();
  }
};

struct PrefetchQueryLowering : public OpConversionPattern<TilePrefetchQueryOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TilePrefetchQueryOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    KernelContext ctx = KernelContext::get(op);
    // Only the computing warpgroups of a warp-specialized kernel own their
    // query rows; elsewhere the CTA's barrier before the next item's copies
    // is what keeps them off rows still read.
    if (!ctx.specialized || isProducerOp(op)) {
      rewriter.eraseOp(op);
      return success();
    }
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    ItemValues item = ItemValues::unflatten(adaptor.getItem());
    Value next = kb.add(item.index, kb.idx(1));
    emitIf(b, kb.slt(next, item.end), [&] {
      ItemValues nextItem =
          loadNextItemQueryRows(kb, adaptor.getWorkItems().front(),
                                adaptor.getQoIndptr().front(), item, next);
      issueWarpgroupQueryRows(kb, ctx, nextItem, adaptor.getQuery().front(),
                              getSharedTiles(kb, ctx));
      mlir::attn::detail::cpAsyncCommit(b);
      storeQueryTag(kb, op, next);
    });
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::attn::mmasync::populateQueryTilePatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<LoadQueryLowering, PrefetchQueryLowering>(converter,
                                                       patterns.getContext());
}
