//===- WorkLoop.cpp - attn.tile.work_loop on sm_80+ -----------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// CTA c runs work items cta_indptr[c'] .. cta_indptr[c'+1]-1 (the plan ABI,
// attn/Runtime/Plan.h) of head-group copy g = c / copy_ctas, c' = c - g *
// copy_ctas: the stored items with g * copy_groups added to their head group
// and g * copy_slots to their partial slot (a CTA past the copies runs
// nothing). An item is (request, head_group, row_begin,
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

/// The fields of stored work item `index` that say which rows it has:
/// request, head group (moved by its copy's `groupBase`), first packed row,
/// row count (and the index).
static ItemValues loadItemRowFields(KernelBuilder &kb, Value workItems,
                                    Value index, Value groupBase) {
  ItemValues item;
  auto field = [&](int64_t i) {
    return kb.toIndex(loadItemField(kb, workItems, index, i));
  };
  item.request = field(0);
  item.headGroup = kb.add(field(1), groupBase);
  item.rowBegin = field(2);
  item.rowCount = field(3);
  item.index = index;
  return item;
}

ItemValues mlir::attn::mmasync::loadNextItemQueryRows(KernelBuilder &kb,
                                                      Value workItems,
                                                      Value qoIndptr,
                                                      const ItemValues &item,
                                                      Value index) {
  // The copy's head-group offset, from `item`'s stored field (a reload from
  // L1) rather than a value kept live across the item.
  Value groupBase = kb.sub(
      item.headGroup, kb.toIndex(loadItemField(kb, workItems, item.index, 1)));
  ItemValues next = loadItemRowFields(kb, workItems, index, groupBase);
  next.qoStart = kb.toIndex(memref::LoadOp::create(
      kb.builder(), qoIndptr, ValueRange{next.request}));
  return next;
}

namespace {

/// The plan's header word `field` (i32).
static Value loadHeader(KernelBuilder &kb, Value plan, int64_t field) {
  return memref::LoadOp::create(kb.builder(), plan, ValueRange{kb.idx(field)})
      .getResult();
}

/// The head-group copy CTA `cta` runs (i32; Plan.h).
static Value getCopy(KernelBuilder &kb, Value plan, Value cta) {
  return kb.divu(cta, loadHeader(kb, plan, attnrt::kHdrCopyCtas));
}

/// Reads stored work item `index` of the CTA's head-group copy (Plan.h) and
/// the request it belongs to. The copy and its offsets are derived again for
/// each item, from %ctaid and the plan header (L1 hits), rather than kept
/// live across the items: tall tiles have no register to spare.
ItemValues loadItem(KernelBuilder &kb, const KernelContext &ctx, Value plan,
                    Value workItems, Value qoIndptr, Value kvIndptr,
                    Value kvLastLen, Value index, Value end) {
  ImplicitLocOpBuilder &b = kb.builder();
  auto header = [&](int64_t field) { return loadHeader(kb, plan, field); };
  Value copy = getCopy(kb, plan, mlir::attn::detail::rereadCtaId(b));
  ItemValues item = loadItemRowFields(
      kb, workItems, index,
      kb.toIndex(kb.mul(copy, header(attnrt::kHdrCopyGroups))));
  auto field = [&](int64_t i) {
    return kb.toIndex(loadItemField(kb, workItems, index, i));
  };
  item.kvBegin = field(4);
  item.kvEnd = field(5);
  // A direct item's slot (-1) stays: only split chunks have one to move.
  Value slot = loadItemField(kb, workItems, index, 6);
  item.slot = kb.toIndex(kb.select(
      kb.slt(slot, kb.i32(0)), slot,
      kb.add(slot, kb.mul(copy, header(attnrt::kHdrCopySlots)))));
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
    Value plan = one(adaptor.getPlan());
    auto load = [&](Value memref, Value i) {
      return kb.toIndex(
          memref::LoadOp::create(b, memref, ValueRange{i}).getResult());
    };
    // The head-group copy this CTA runs, and its stored CTA.
    Value cta = kb.toI32(gpu::BlockIdOp::create(b, gpu::Dimension::x));
    Value copy = getCopy(kb, plan, cta);
    Value stored = kb.toIndex(
        kb.sub(cta, kb.mul(copy, loadHeader(kb, plan, attnrt::kHdrCopyCtas))));
    Value first = load(ctaIndptr, stored);
    Value last = load(ctaIndptr, kb.add(stored, 1));
    // CTAs past the copies (a fixed grid's spares) run nothing.
    last = kb.select(kb.slt(copy, loadHeader(kb, plan, attnrt::kHdrCopies)),
                     last, first);
    // (Warp-specialized kernels: the ring's mbarriers are armed once, before
    // the roles part, WGMMA/WarpSpecialize.cpp.)
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
    ItemValues item = loadItem(kb, ctx, plan, one(adaptor.getWorkItems()),
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
