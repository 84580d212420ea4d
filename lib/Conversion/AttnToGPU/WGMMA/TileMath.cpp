//===- TileMath.cpp - S = Q Kᵀ and O += P V on wgmma (sm_90a) -------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The sm_90a pattern set: the sm_80+ set with the two GEMMs of a K/V tile on
// warpgroup MMA. Warpgroup wg (warps 4wg .. 4wg + 3) owns rows 64wg .. 64wg +
// 63 of the query tile; wgmma's accumulator layout gives warp w rows 16w ..
// 16w + 15 in mma.sync's C-fragment order, so the online softmax, the store
// and the merge are the sm_80+ patterns unchanged.
//
//  1. qk: head_dim / 16 wgmma m64 n(keys) k16, A = the warpgroup's Q rows
//     and B = the K tile, both K-major from 128-byte-swizzled shared memory
//     (descriptors stepped by 32 bytes per k16 inside a 64-column block, by
//     a block region across blocks); the first step does not accumulate.
//  2. pv: keys / 16 wgmma m64 n(head_dim) k16, A = the probabilities in
//     registers (mma.sync's A fragments, as the softmax leaves them), B = the
//     V tile, N-major (V rows are keys, head dims contiguous): 16 rows of
//     2048 bytes per k16, column blocks a region apart.
//
// The copies into shared memory are published to the async proxy before the
// barrier that precedes these reads (KernelContext::wgmma, the sm_80+
// pipeline and query patterns). Each GEMM waits for its group before its
// results are used (the tile's softmax needs S, the next tile's rescale O),
// unless the tile form leaves it in flight: then the softmax waits, for S
// leaving the P V issued after it running, and for O before the rescale.
//
//===----------------------------------------------------------------------===//

#include "../MMASync/MMASync.h"
#include "attn/Conversion/AttnToGPU/AttnToGPU.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::mmasync;
using mlir::attn::detail::SoftmaxState;
using mlir::attn::detail::WgmmaOperandB;

namespace {

/// Bytes of one row of a 64-element column block (the swizzle span).
constexpr int64_t kBlockRowBytes = 128;

/// The byte address of row `row` (of the row space) in column block `block`.
Value getRowAddress(KernelBuilder &kb, const KernelContext &ctx, Value base,
                    Value row, int64_t block) {
  Value viewRow = kb.add(row, kb.idx(block * ctx.smem.totalRows));
  return kb.add(base, kb.mul(viewRow, kBlockRowBytes));
}

/// Rows of 1024-byte atoms: 8 rows of 128 bytes.
constexpr int64_t kAtomBytes = 8 * kBlockRowBytes;

/// The byte offset of k-step `ks` of a K-major operand from its first (as
/// getKMajorDescriptor's addresses): 32 bytes a k16 inside a 64-column
/// block, a block region across blocks. getKMajorDescriptor keeps its own
/// form of the same address: built from this offset, the plain loop's
/// kernels (head dim 256) compile to other code, not measured.
int64_t getKStepOffset(const KernelContext &ctx, int64_t ks) {
  return (ks / 4) * ctx.smem.totalRows * kBlockRowBytes + (ks % 4) * 32;
}

/// K-major operand descriptor: k-step `ks` of the rows starting at `row`.
/// The leading byte offset is unused for swizzled K-major operands.
Value getKMajorDescriptor(KernelBuilder &kb, const KernelContext &ctx,
                          Value base, Value row, int64_t ks) {
  Value address = kb.add(getRowAddress(kb, ctx, base, row, ks / 4),
                         kb.idx((ks % 4) * 32));
  return mlir::attn::detail::wgmmaDescriptor(kb.builder(), address, 16,
                                             kAtomBytes);
}

/// Whether K's and V's descriptors step from one 32-bit low word (one add a
/// k-step, where each took a 64-bit add, shift, and, or). Only the pipelined
/// loop: in the plain loop (head dim 256's, head dim 64's 192-row tile) the
/// low words kept across the GEMMs made ptxas spill. Q's descriptors stay
/// whole everywhere: LLVM keeps them across the loop.
bool stepsDescriptors(const KernelContext &ctx) { return ctx.pipelined; }

struct QKLowering : public OpConversionPattern<TileQKOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileQKOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    KernelContext ctx = KernelContext::get(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    if (isProducerOp(op)) {
      rewriter.replaceOpWithMultiple(
          op, {SmallVector<Value>(ctx.N / 2, kb.f32(0.0f))});
      return success();
    }
    ThreadCoords tc(kb);
    ValueRange kv = adaptor.getTile();
    Value base = getSharedBase(kb);
    Value qRow = kb.add(kb.idx(ctx.smem.qRow), kb.mul(kb.divu(tc.warp, 4), 64));
    Value kRow = getKRow(kb, ctx, tc, kv[0]);
    // Pipelined, a step's two GEMMs (this S, then the last tile's P V) are
    // issued in the warpgroup's turn; unpipelined, every S alone, so that
    // one warpgroup's softmax runs while the other's S does.
    const bool inTurn =
        takesTurns(ctx) && (op.getInFlight() || !ctx.pipelined);
    if (inTurn)
      takeTurn(kb, ctx);
    mlir::attn::detail::wgmmaFence(b, {});
    Value kLow;
    if (stepsDescriptors(ctx))
      kLow = mlir::attn::detail::wgmmaDescriptorLow(
          b, getRowAddress(kb, ctx, base, kRow, 0), 16);
    SmallVector<Value> s;
    for (int64_t ks = 0; ks < ctx.D / 16; ++ks) {
      Value kDesc = kLow ? mlir::attn::detail::wgmmaDescriptorAfter(
                               b, kLow, getKStepOffset(ctx, ks), kAtomBytes)
                         : getKMajorDescriptor(kb, ctx, base, kRow, ks);
      s = mlir::attn::detail::wgmmaMMA(
          b, ctx.elt, ctx.N, s, getKMajorDescriptor(kb, ctx, base, qRow, ks),
          {}, WgmmaOperandB{kDesc, /*nMajor=*/false});
    }
    mlir::attn::detail::wgmmaCommit(b);
    if (inTurn && !ctx.pipelined)
      giveTurn(kb, ctx);
    if (!op.getInFlight())
      s = mlir::attn::detail::wgmmaWait(b, 0, s);
    rewriter.replaceOpWithMultiple(op, {s});
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
    if (isProducerOp(op)) {
      rewriter.replaceOpWithMultiple(
          op, {SmallVector<Value>(adaptor.getState())});
      return success();
    }
    ThreadCoords tc(kb);
    const int64_t NT = ctx.D / 8;
    SoftmaxState st = SoftmaxState::unflatten(adaptor.getState(), NT);
    ValueRange kv = adaptor.getTile();
    Value base = getSharedBase(kb);
    Value vRow = getVRow(kb, ctx, getKRow(kb, ctx, tc, kv[0]));
    // The accumulator and the probabilities were written by the softmax.
    SmallVector<Value> fenced(adaptor.getState().drop_front(4));
    const int64_t numAcc = fenced.size();
    llvm::append_range(fenced, adaptor.getProbs());
    fenced = mlir::attn::detail::wgmmaFence(b, fenced);
    SmallVector<Value> acc(fenced.begin(), fenced.begin() + numAcc);
    ArrayRef<Value> probs = ArrayRef<Value>(fenced).drop_front(numAcc);
    // 16 key rows from row 16kk; the column blocks of V are whole regions of
    // the row space apart (the leading byte offset).
    const int64_t leadingBytes = ctx.smem.totalRows * kBlockRowBytes;
    Value vLow;
    if (stepsDescriptors(ctx))
      vLow = mlir::attn::detail::wgmmaDescriptorLow(
          b, getRowAddress(kb, ctx, base, vRow, /*block=*/0), leadingBytes);
    for (int64_t kk = 0; kk < ctx.N / 16; ++kk) {
      const int64_t offset = 16 * kk * kBlockRowBytes;
      Value desc =
          vLow ? mlir::attn::detail::wgmmaDescriptorAfter(b, vLow, offset,
                                                          kAtomBytes)
               : mlir::attn::detail::wgmmaDescriptor(
                     b,
                     getRowAddress(kb, ctx, base, kb.add(vRow, kb.idx(16 * kk)),
                                   /*block=*/0),
                     leadingBytes, kAtomBytes);
      acc = mlir::attn::detail::wgmmaMMA(b, ctx.elt, ctx.D, acc, Value(),
                                         probs.slice(4 * kk, 4),
                                         WgmmaOperandB{desc, /*nMajor=*/true});
    }
    mlir::attn::detail::wgmmaCommit(b);
    if (!op.getInFlight())
      acc = mlir::attn::detail::wgmmaWait(b, 0, acc);
    else if (takesTurns(ctx))
      giveTurn(kb, ctx);
    for (int64_t nt = 0; nt < NT; ++nt)
      for (int64_t i = 0; i < 4; ++i)
        st.acc[nt][i] = acc[4 * nt + i];
    rewriter.replaceOpWithMultiple(op, {st.flatten()});
    return success();
  }
};

} // namespace

void mlir::attn::populateTileToWgmmaConversionPatterns(
    gpu::GPUFuncOp kernel, TypeConverter &converter,
    RewritePatternSet &patterns) {
  addTypeConversions(converter, KernelContext::get(kernel));
  populateWorkLoopPatterns(converter, patterns);
  populateQueryTilePatterns(converter, patterns);
  populateKVPipelinePatterns(converter, patterns);
  populateOnlineSoftmaxPatterns(converter, patterns);
  populateStorePatterns(converter, patterns);
  populateMergePatterns(converter, patterns);
  patterns.add<QKLowering, PVLowering>(converter, patterns.getContext());
}
