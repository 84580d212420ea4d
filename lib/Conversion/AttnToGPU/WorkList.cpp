//===- WorkList.cpp - The persistent loop over the planner's work list ----===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// CTA c runs work items cta_indptr[c] .. cta_indptr[c+1]-1 (Plan.h). An item
// is (request, head_group, row_begin, row_count, kv_begin, kv_end, slot,
// flags): packed rows row_begin .. row_begin+row_count-1 of the request's
// head group, where packed row r is token r / P and query head
// head_group * P + r % P, against keys [kv_begin, kv_end). This file reads an
// item and derives what the rest of the kernel indexes with; nothing here
// depends on the tile's data.
//
//===----------------------------------------------------------------------===//

#include "DecodeEmitter.h"
#include "attn/Runtime/Plan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace ::attn;
using namespace ::attn::detail;

WorkItemValues DecodeKernelEmitter::loadWorkItem(Value itemIndex) {
  WorkItemValues item;
  // The WorkItem struct of the plan ABI, field by field.
  Value base = kb.mul(itemIndex, ::attn::runtime::kWorkItemWords);
  auto field = [&](int64_t i) {
    return memref::LoadOp::create(b, workItems, ValueRange{kb.add(base, i)})
        .getResult();
  };
  item.request = kb.toIndex(field(0));
  item.headGroup = kb.toIndex(field(1));
  item.rowBegin = kb.toIndex(field(2));
  item.rowCount = kb.toIndex(field(3));
  item.kvBegin = kb.toIndex(field(4));
  item.kvEnd = kb.toIndex(field(5));
  item.slot = kb.toIndex(field(6));
  item.flags = field(7);

  auto loadIndex = [&](Value memref, Value i) {
    return kb.toIndex(memref::LoadOp::create(b, memref, ValueRange{i}));
  };
  Value zero = kb.idx(0), next = kb.add(item.request, 1);
  item.qoStart = loadIndex(qoIndptr, item.request);
  item.qoLen = kb.sub(loadIndex(qoIndptr, next), item.qoStart);
  item.pageBegin = loadIndex(kvIndptr, item.request);
  Value indptrEnd = loadIndex(kvIndptr, next);
  if (ragged) {
    item.numPages = kb.sub(indptrEnd, item.pageBegin);
    item.kvLen = item.numPages;
  } else {
    item.numPages = kb.sub(indptrEnd, item.pageBegin);
    Value last = loadIndex(kvLastLen, item.request);
    item.kvLen = kb.select(
        kb.sgt(item.numPages, zero),
        kb.add(kb.mul(kb.sub(item.numPages, kb.idx(1)), PS), last), zero);
  }
  // Query heads g*P .. g*P+P-1 share KV head (g*P) / (Hq / Hkv).
  item.kvHead = kb.divu(kb.mul(item.headGroup, P), G);

  // Tiles aligned to absolute multiples of 16 keys; warp w runs tiles w,
  // w + W, ... of the item's range.
  item.tileBase = kb.divu(item.kvBegin, T);
  Value tileEnd = kb.divu(kb.add(item.kvEnd, T - 1), T);
  Value numTiles = kb.select(kb.sgt(item.kvEnd, item.kvBegin),
                             kb.sub(tileEnd, item.tileBase), zero);
  item.numIters = kb.select(kb.sgt(numTiles, warp),
                            kb.divu(kb.add(kb.sub(numTiles, warp), W - 1), W),
                            zero);

  // This thread's rows g and g + 8 of the tile. Rows past row_count stand in
  // for the item's last row (in bounds) and are zeroed or skipped.
  Value lastRow = kb.sub(item.rowCount, kb.idx(1));
  // A custom mask is bit-packed per request from byte mask_indptr[b]; row
  // `token` of the qo_len x kv_len matrix starts token * kv_len bits further.
  Value maskBase =
      spec.customMask ? kb.mul(loadIndex(maskIndptr, item.request), 8) : Value();
  for (int64_t r = 0; r < 2; ++r) {
    Value row = kb.add(g, r * 8);
    item.rowValid[r] = kb.slt(row, item.rowCount);
    Value packed = kb.add(item.rowBegin, kb.mins(row, lastRow));
    Value token = kb.divu(packed, P);
    item.head[r] = kb.add(kb.mul(item.headGroup, P), kb.remu(packed, P));
    item.qRow[r] = kb.add(item.qoStart, token);
    item.qPos[r] = kb.add(kb.sub(item.kvLen, item.qoLen), token);
    if (spec.customMask)
      item.maskRowBit[r] = kb.add(maskBase, kb.mul(token, item.kvLen));
  }
  return item;
}

void DecodeKernelEmitter::emitWorkLoop() {
  Value cta = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  auto loadIndex = [&](Value i) {
    return kb.toIndex(memref::LoadOp::create(b, ctaIndptr, ValueRange{i}));
  };
  Value first = loadIndex(cta), last = loadIndex(kb.add(cta, 1));
  auto loop = scf::ForOp::create(b, first, last, kb.idx(1));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  WorkItemValues item = loadWorkItem(loop.getInductionVar());
  loadQueryFragments(item);
  SoftmaxState st = emitMainLoop(item);
  emitEpilogue(item, st);
  // The next item's copies overwrite the merge buffers other warps may still
  // be reading.
  gpu::BarrierOp::create(b);
}
