//===- WorkLoop.cpp - attn.tile.work_loop on sm_80+ -----------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// CTA c runs work items cta_indptr[c] .. cta_indptr[c+1]-1 (the plan ABI,
// attn/Runtime/Plan.h). An item is (request, head_group, row_begin,
// row_count, kv_begin, kv_end, slot, flags): packed rows row_begin ..
// row_begin+row_count-1 of the request's head group, where packed row r is
// token r / P and query head head_group * P + r % P, against keys
// [kv_begin, kv_end). The loop reads each item and derives what the rest of
// the kernel indexes with; the body runs on those values.
//
// Consecutive items share the CTA's shared memory: a barrier between them
// keeps the next item's copies off what the last one still reads (decode:
// after the item, where its warps read each other's merge buffers; taller
// tiles: before it).
//
//===----------------------------------------------------------------------===//

#include "MMASync.h"
#include "attn/Runtime/Plan.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::mmasync;

/// Field `i` of work item `index` (the WorkItem struct of the plan ABI).
static Value loadItemField(KernelBuilder &kb, Value workItems, Value index,
                           int64_t i) {
  Value at = kb.add(kb.mul(index, attnrt::kWorkItemWords), i);
  return memref::LoadOp::create(kb.builder(), workItems, ValueRange{at})
      .getResult();
}

/// The fields of work item `index` that say which rows it has: request,
/// head group, first packed row, row count (and the index).
static ItemValues loadItemRowFields(KernelBuilder &kb, Value workItems,
                                    Value index) {
  ItemValues item;
  auto field = [&](int64_t i) {
    return kb.toIndex(loadItemField(kb, workItems, index, i));
  };
  item.request = field(0);
  item.headGroup = field(1);
  item.rowBegin = field(2);
  item.rowCount = field(3);
  item.index = index;
  return item;
}

ItemValues mlir::attn::mmasync::loadItemQueryRows(KernelBuilder &kb,
                                                  Value workItems,
                                                  Value qoIndptr, Value index) {
  ItemValues item = loadItemRowFields(kb, workItems, index);
  item.qoStart = kb.toIndex(memref::LoadOp::create(
      kb.builder(), qoIndptr, ValueRange{item.request}));
  return item;
}

namespace {

/// Reads work item `index` and the request it belongs to.
ItemValues loadItem(KernelBuilder &kb, const KernelContext &ctx,
                    Value workItems, Value qoIndptr, Value kvIndptr,
                    Value kvLastLen, Value index, Value end) {
  ImplicitLocOpBuilder &b = kb.builder();
  ItemValues item = loadItemRowFields(kb, workItems, index);
  auto field = [&](int64_t i) {
    return kb.toIndex(loadItemField(kb, workItems, index, i));
  };
  item.kvBegin = field(4);
  item.kvEnd = field(5);
  item.slot = field(6);
  item.flags = loadItemField(kb, workItems, index, 7);
  item.end = end;

  auto load = [&](Value memref, Value i) {
    return kb.toIndex(memref::LoadOp::create(b, memref, ValueRange{i}));
  };
  Value zero = kb.idx(0), next = kb.add(item.request, 1);
  item.qoStart = load(qoIndptr, item.request);
  item.qoLen = kb.sub(load(qoIndptr, next), item.qoStart);
  item.kvBase = load(kvIndptr, item.request);
  item.numBlocks = kb.sub(load(kvIndptr, next), item.kvBase);
  if (ctx.paged) {
    // kv_last_len has an entry per request, empty ones too.
    Value last = load(kvLastLen, item.request);
    item.kvLen = kb.select(
        kb.sgt(item.numBlocks, zero),
        kb.add(kb.mul(kb.sub(item.numBlocks, kb.idx(1)), ctx.PS), last), zero);
  } else {
    item.kvLen = item.numBlocks;
  }
  // Query heads g*P .. g*P+P-1 share KV head (g*P) / (Hq / Hkv).
  item.kvHead = kb.divu(kb.mul(item.headGroup, ctx.P), ctx.G);
  // Causal masks are bottom-right aligned: token i sits at kv_len - qo_len + i.
  item.posOffset = kb.sub(item.kvLen, item.qoLen);
  return item;
}

struct WorkLoopLowering : public OpConversionPattern<TileWorkLoopOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileWorkLoopOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    KernelContext ctx = KernelContext::get(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    auto one = [](ValueRange range) { return range.front(); };
    Value ctaIndptr = one(adaptor.getCtaIndptr());
    Value cta = gpu::BlockIdOp::create(b, gpu::Dimension::x);
    Value first = kb.toIndex(
        memref::LoadOp::create(b, ctaIndptr, ValueRange{cta}).getResult());
    Value last = kb.toIndex(
        memref::LoadOp::create(b, ctaIndptr, ValueRange{kb.add(cta, 1)})
            .getResult());
    // Warp-specialized kernels: thread 0 arms the ring's mbarriers once;
    // their phases run on across items (KVPipeline.cpp).
    if (ctx.specialized) {
      Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
      auto leader = scf::IfOp::create(b, kb.eq(tid, kb.idx(0)), false);
      b.setInsertionPointToStart(&leader.getThenRegion().front());
      for (int64_t i = 0; i < 2 * ctx.S; ++i)
        mlir::attn::detail::mbarrierInit(
            b, getRingBarrier(kb, ctx, kb.idx(i)),
            i < ctx.S ? KernelContext::kProducerThreads : ctx.threads());
      b.setInsertionPointAfter(leader);
      gpu::BarrierOp::create(b);
    }
    const bool consumer = ctx.specialized && !isProducerOp(op);
    if (consumer && takesTurns(ctx))
      startTurns(kb, ctx);
    auto loop = scf::ForOp::create(b, first, last, kb.idx(1));
    b.setInsertionPointToStart(loop.getBody());
    // Consecutive items share the Q tile and the ring: the warps that read
    // them are past the last item. (The computing warpgroups of a
    // warp-specialized kernel each own their rows of the Q tile and meet
    // at load_query; the ring has its mbarriers.)
    if (!ctx.specialized && !ctx.splitKeys)
      gpu::BarrierOp::create(b);
    Value lastLen = adaptor.getKvLastLen().empty()
                        ? Value()
                        : one(adaptor.getKvLastLen());
    ItemValues item = loadItem(kb, ctx, one(adaptor.getWorkItems()),
                               one(adaptor.getQoIndptr()),
                               one(adaptor.getKvIndptr()), lastLen,
                               loop.getInductionVar(), last);

    // The body runs on the item's values.
    TypeConverter::SignatureConversion signature(1);
    signature.remapInput(0, item.flatten());
    Block *body = rewriter.applySignatureConversion(
        &op.getBody().front(), signature, getTypeConverter());
    Operation *yield = loop.getBody()->getTerminator();
    rewriter.inlineBlockBefore(body, yield);
    if (ctx.splitKeys) {
      // The next item's copies overwrite the merge buffers other warps may
      // still be reading.
      b.setInsertionPoint(yield);
      gpu::BarrierOp::create(b);
    }
    if (consumer) {
      // The query rows prefetched for a last item without keys (which never
      // loads them) land before the CTA exits; warpgroup 0 takes back the
      // turn left over.
      b.setInsertionPointAfter(loop);
      mlir::attn::detail::cpAsyncWait(b, 0);
      if (takesTurns(ctx))
        endTurns(kb, ctx);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::attn::mmasync::populateWorkLoopPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<WorkLoopLowering>(converter, patterns.getContext());
}
