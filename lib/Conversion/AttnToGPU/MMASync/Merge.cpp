//===- Merge.cpp - attn.tile.merge: the LSE merge kernel of split KV ------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// When the planner splits a tile's keys into chunks, each chunk writes its
// normalised output and base-2 LSE into a partial slot (f32); merge unit u
// then combines slots merge_indptr[u] .. merge_indptr[u+1]-1 into o/lse:
//
//   m = max_i lse_i,  w_i = 2^(lse_i - m),  o = sum_i w_i o_i / sum_i w_i,
//   lse = m + log2(sum_i w_i)
//
// (all -inf gives output 0 and LSE -inf).
//
// A thread owns 8 consecutive elements of a row; the CTA's threads form
// `parts` groups of head_dim / 8 threads (16 for head_dim 128; threads past
// the last whole part idle). One CTA merges R = merge_rows rows of one unit
// at a time: the kernel is grid-strided over the (row group, unit) pairs
// `v = group * plan[4] + unit`, v < plan[4] * ceil(slot_rows / R), rows past
// the unit's row_count skipping (the manifest's `merge_ctas: "unit_rows"`;
// max_ctas CTAs in graph mode, so a graph captured with a fixed grid serves
// every plan). Row-major order puts the pairs that exist first. Two shapes:
//  - R = 1, for long splits (decode: one request over the whole GPU, 66
//    slots per unit in D4): part p merges slots first + p, first + p +
//    parts, ... of the CTA's row in ONE online pass with 8 slots' loads in
//    flight per step; part 0 then combines the parts' states through shared
//    memory (TileLayout.h, getMergeSharedBytes) and writes o/lse.
//  - R = parts, for short splits of tall units (prefill: 64-128 rows, a few
//    slots each): part p merges row group * R + p alone, no shared memory.
// gqa_pack and the query head count come from the plan header, so one
// kernel serves every head configuration of its head_dim and dtype; so do
// the head-group copies (Plan.h): unit u is stored unit u mod copy_units of
// copy u / copy_units, its head group and slots moved by that copy's.
//
// With griddepcontrol (sm_90+) the kernel reads the plan and its unit's
// fields, then waits (griddepcontrol.wait) before it reads a partial slot:
// launched with programmatic stream serialization (manifest `pdl`), its CTAs
// start while the attention grid drains; launched plainly, the wait returns
// at once.
//
// Output transform: partial slots hold untransformed outputs; the merged row
// is transformed before the narrowing store, at the query's position
// p = kv_len - qo_len + token (kv_len from kv_indptr / kv_last_len) and its
// query head, as the attention kernel transforms a Direct item.
//
//===----------------------------------------------------------------------===//

#include "MMASync.h"
#include "attn/Runtime/Plan.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <optional>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::mmasync;

namespace {

/// Slots each thread loads per step of its pass (all in flight at once).
constexpr int64_t kUnroll = 8;

struct MergeLowering : public OpConversionPattern<TileMergeOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileMergeOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    LaunchAttr launch = op.getLaunch();
    TargetInfo target = *TargetInfo::lookup(launch.getChip().getValue());
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    auto one = [](ValueRange r) { return r.empty() ? Value() : r.front(); };
    Value plan = one(adaptor.getPlan()), mergeIndptr = one(adaptor.getMergeIndptr());
    Value mergeUnits = one(adaptor.getMergeUnits());
    Value partialO = one(adaptor.getPartialOutput());
    Value partialLse = one(adaptor.getPartialLse());
    Value out = one(adaptor.getOutput()), lse = one(adaptor.getLse());
    Value qoIndptr = one(adaptor.getQoIndptr());
    Value kvIndptr = one(adaptor.getKvIndptr());
    Value kvLastLen = one(adaptor.getKvLastLen());
    Region &transform = op.getOutputTransform();

    const int64_t D = launch.getHeadDim(), chunks = D / 8;
    const int64_t NT = launch.getThreads();
    const int64_t parts = NT / chunks, R = launch.getMergeRows();
    const bool rowPerPart = R > 1;
    const int64_t partsPerRow = rowPerPart ? 1 : parts;
    const bool idleThreads = parts * chunks != NT;
    Type f32 = b.getF32Type(), elt = launch.getDtype();
    auto f32x8 = VectorType::get({8}, f32);
    auto loadIndex = [&](Value memref, Value i) {
      return kb.toIndex(memref::LoadOp::create(b, memref, ValueRange{i}));
    };
    auto splat = [&](Value x) { return vector::BroadcastOp::create(b, f32x8, x); };

    // Per-thread merge state for the cross-part combine (R = 1).
    Value smem;
    if (!rowPerPart) {
      auto type = MemRefType::get({NT * 10}, f32, MemRefLayoutAttrInterface{},
                                  getWorkgroupSpace(b.getContext()));
      smem = memref::ViewOp::create(b, type, getDynamicSharedMemory(kb),
                                    kb.idx(0), ValueRange{});
    }

    Value numUnits = loadIndex(plan, kb.idx(attnrt::kHdrNumMergeUnits));
    // Unit u is stored unit u mod copy_units of head-group copy u /
    // copy_units, its head group and slots moved by the copy's (Plan.h).
    Value copyUnits = loadIndex(plan, kb.idx(attnrt::kHdrCopyUnits));
    Value copyGroups = loadIndex(plan, kb.idx(attnrt::kHdrCopyGroups));
    Value copySlots = loadIndex(plan, kb.idx(attnrt::kHdrCopySlots));
    Value pack = loadIndex(plan, kb.idx(attnrt::kHdrGqaPack));
    Value numQoHeads = loadIndex(plan, kb.idx(attnrt::kHdrNumQoHeads));
    Value slotRows = kb.toIndex(one(adaptor.getSlotRows()));
    Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    Value cta = gpu::BlockIdOp::create(b, gpu::Dimension::x);
    Value grid = gpu::GridDimOp::create(b, gpu::Dimension::x);
    Value negInf = kb.negInf(), zeroF = kb.f32(0.0f);
    Value zeroVec = arith::ConstantOp::create(
        b, f32x8, DenseElementsAttr::get(f32x8, b.getF32FloatAttr(0.0f)));

    // The row's 8-element chunks are spread over `chunks` threads; the CTA's
    // threads form `parts` such groups.
    Value part = kb.divu(tid, chunks);
    Value chunk = kb.remu(tid, chunks);
    Value activePart = idleThreads ? kb.slt(part, kb.idx(parts)) : Value();

    Value groups = rowPerPart
                       ? kb.divu(kb.add(slotRows, kb.idx(R - 1)), kb.idx(R))
                       : slotRows;
    auto pairLoop = scf::ForOp::create(b, cta, kb.mul(numUnits, groups), grid);
    b.setInsertionPointToStart(pairLoop.getBody());
    Value v = pairLoop.getInductionVar();
    Value row = kb.divu(v, numUnits);
    Value u = kb.remu(v, numUnits);
    if (rowPerPart)
      row = kb.add(kb.mul(row, kb.idx(R)), part);
    Value copy = kb.divu(u, copyUnits);
    u = kb.sub(u, kb.mul(copy, copyUnits));
    Value slotBase = kb.mul(copy, copySlots);
    Value unitBase = kb.mul(u, attnrt::kMergeUnitWords);
    Value rowCount = loadIndex(mergeUnits, kb.add(unitBase, 3));
    // Everything that depends on the unit alone is loaded here, before the
    // row test, so these loads overlap each other and the slot loads instead
    // of forming a chain of round trips (u < copy_units: all in bounds).
    Value firstSlot = kb.add(loadIndex(mergeIndptr, u), slotBase);
    Value lastSlot = kb.add(loadIndex(mergeIndptr, kb.add(u, 1)), slotBase);
    Value request = loadIndex(mergeUnits, unitBase);
    Value headGroup = kb.add(loadIndex(mergeUnits, kb.add(unitBase, 1)),
                             kb.mul(copy, copyGroups));
    Value rowBegin = loadIndex(mergeUnits, kb.add(unitBase, 2));
    Value qoStart = loadIndex(qoIndptr, request);
    // The plan, the merge map and the indptr arrays were uploaded before the
    // attention grid started; only the partial slots are that grid's writes.
    // Waiting here rather than on entry lets the loads above overlap the
    // grid's tail (a no-op after the first pair, or without a programmatic
    // launch).
    if (launch.getPdl() && target.hasPDL())
      mlir::attn::detail::gridDepControlWait(b);
    // With one row per CTA the test is CTA-uniform: the barriers inside are
    // reached by every thread or none. With a row per part there are none.
    Value rowExists = kb.slt(row, rowCount);
    if (rowPerPart && idleThreads)
      rowExists = kb.andi(rowExists, activePart);
    auto ifRow = scf::IfOp::create(b, rowExists, false);
    b.setInsertionPointToStart(&ifRow.getThenRegion().front());

    // One online pass over this part's slots, kUnroll slots per step so that
    // their loads are in flight together (idle threads have none).
    Value partInRow = rowPerPart ? kb.idx(0) : part;
    Value slotBegin = kb.add(firstSlot, partInRow);
    if (!rowPerPart && idleThreads)
      slotBegin = kb.select(activePart, slotBegin, lastSlot);
    auto slotLoop = scf::ForOp::create(b, slotBegin, lastSlot,
                                       kb.idx(partsPerRow * kUnroll),
                                       ValueRange{negInf, zeroF, zeroVec});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(slotLoop.getBody());
      Value s = slotLoop.getInductionVar();
      Value m = slotLoop.getRegionIterArgs()[0];
      Value sum = slotLoop.getRegionIterArgs()[1];
      Value acc = slotLoop.getRegionIterArgs()[2];
      SmallVector<Value> ls, os;
      for (int64_t k = 0; k < kUnroll; ++k) {
        Value sk = k == 0 ? s : kb.add(s, kb.idx(partsPerRow * k));
        Value ok = k == 0 ? Value() : kb.slt(sk, lastSlot);
        // Slots past the end reload slot s (in bounds) with weight 0.
        Value slot = k == 0 ? s : kb.select(ok, sk, s);
        Value slotRow = kb.add(kb.mul(slot, slotRows), row);
        Value l = memref::LoadOp::create(b, partialLse, ValueRange{slotRow});
        ls.push_back(k == 0 ? l : kb.select(ok, l, negInf));
        auto part8 = vector::LoadOp::create(
            b, f32x8, partialO,
            ValueRange{kb.add(kb.mul(slotRow, D), kb.mul(chunk, 8))});
        part8.setAlignment(16);
        os.push_back(part8);
      }
      Value mNew = m;
      for (Value l : ls)
        mNew = kb.fmax(mNew, l);
      Value mUse = kb.select(kb.foeq(mNew, negInf), zeroF, mNew);
      Value scale = kb.exp2(kb.fsub(m, mUse));
      Value newSum = kb.fmul(sum, scale);
      Value newAcc = arith::MulFOp::create(b, acc, splat(scale));
      for (auto [l, o] : llvm::zip(ls, os)) {
        Value w = kb.exp2(kb.fsub(l, mUse));
        newSum = kb.fadd(newSum, w);
        newAcc = arith::AddFOp::create(b, newAcc,
                                       arith::MulFOp::create(b, o, splat(w)));
      }
      scf::YieldOp::create(b, ValueRange{mNew, newSum, newAcc});
    }
    Value mOwn = slotLoop.getResult(0), sumOwn = slotLoop.getResult(1);
    Value accOwn = slotLoop.getResult(2);

    // With parts sharing the row: publish every thread's state, then part 0
    // combines the parts. With a row per part, its own state is the row's.
    Value mMax = mOwn, sum = sumOwn, accRow = accOwn;
    std::optional<OpBuilder::InsertionGuard> writerGuard;
    if (!rowPerPart) {
      auto accStore = vector::StoreOp::create(b, accOwn, smem,
                                              ValueRange{kb.mul(tid, 8)});
      accStore.setAlignment(32);
      memref::StoreOp::create(b, mOwn, smem, ValueRange{kb.add(tid, NT * 8)});
      memref::StoreOp::create(b, sumOwn, smem, ValueRange{kb.add(tid, NT * 9)});
      gpu::BarrierOp::create(b);

      auto ifWriter = scf::IfOp::create(b, kb.eq(part, kb.idx(0)), false);
      writerGuard.emplace(b);
      b.setInsertionPointToStart(&ifWriter.getThenRegion().front());
      auto combine = scf::ForOp::create(b, kb.idx(1), kb.idx(parts), kb.idx(1),
                                        ValueRange{mOwn, sumOwn, accOwn});
      {
        OpBuilder::InsertionGuard guard2(b);
        b.setInsertionPointToStart(combine.getBody());
        Value q = kb.add(kb.mul(combine.getInductionVar(), chunks), chunk);
        Value m = combine.getRegionIterArgs()[0];
        Value sum = combine.getRegionIterArgs()[1];
        Value acc = combine.getRegionIterArgs()[2];
        Value mq = memref::LoadOp::create(b, smem, ValueRange{kb.add(q, NT * 8)});
        Value sq = memref::LoadOp::create(b, smem, ValueRange{kb.add(q, NT * 9)});
        auto aq = vector::LoadOp::create(b, f32x8, smem,
                                         ValueRange{kb.mul(q, 8)});
        aq.setAlignment(32);
        Value mNew = kb.fmax(m, mq);
        Value mUse = kb.select(kb.foeq(mNew, negInf), zeroF, mNew);
        Value a = kb.exp2(kb.fsub(m, mUse));
        Value c = kb.exp2(kb.fsub(mq, mUse));
        Value newAcc = arith::AddFOp::create(
            b, arith::MulFOp::create(b, acc, splat(a)),
            arith::MulFOp::create(b, aq, splat(c)));
        scf::YieldOp::create(
            b, ValueRange{mNew, kb.fadd(kb.fmul(sum, a), kb.fmul(sq, c)),
                          newAcc});
      }
      mMax = combine.getResult(0);
      sum = combine.getResult(1);
      accRow = combine.getResult(2);
    }
    {
      Value nonEmpty = kb.fogt(sum, zeroF);
      Value inv = kb.select(nonEmpty, kb.fdiv(kb.f32(1.0f), sum), zeroF);
      Value acc = arith::MulFOp::create(b, accRow, splat(inv));

      Value packed = kb.add(rowBegin, row);
      Value token = kb.divu(packed, pack);
      Value head = kb.add(kb.mul(headGroup, pack), kb.remu(packed, pack));
      Value outRow = kb.add(kb.mul(kb.add(qoStart, token), numQoHeads), head);
      if (!transform.empty()) {
        // The query's position, as the attention kernel computes it.
        Value next = kb.add(request, 1);
        Value qoLen = kb.sub(loadIndex(qoIndptr, next), qoStart);
        Value kvBegin = loadIndex(kvIndptr, request);
        Value kvCount = kb.sub(loadIndex(kvIndptr, next), kvBegin);
        Value kvLen = kvCount;
        if (kvLastLen) {
          int64_t pageSize = launch.getFormat().getBlockCols();
          Value last = loadIndex(kvLastLen, request);
          kvLen = kb.select(
              kb.sgt(kvCount, kb.idx(0)),
              kb.add(kb.mul(kb.sub(kvCount, kb.idx(1)), pageSize), last),
              kb.idx(0));
        }
        Value qPos = kb.add(kb.sub(kvLen, qoLen), token);
        for (int64_t j = 0; j < 8; ++j) {
          Value x = vector::ExtractOp::create(b, acc, ArrayRef<int64_t>{j});
          Value dim = kb.add(kb.mul(chunk, 8), kb.idx(j));
          Value y = inlineHook(b, transform, {x, dim, qPos, head});
          acc = vector::InsertOp::create(b, y, acc, ArrayRef<int64_t>{j});
        }
      }
      Value narrow =
          arith::TruncFOp::create(b, VectorType::get({8}, elt), acc);
      auto store = vector::StoreOp::create(
          b, narrow, out,
          ValueRange{kb.add(kb.mul(outRow, D), kb.mul(chunk, 8))});
      store.setAlignment(16);
      auto first = scf::IfOp::create(b, kb.eq(chunk, kb.idx(0)), false);
      b.setInsertionPointToStart(&first.getThenRegion().front());
      memref::StoreOp::create(
          b, kb.select(nonEmpty, kb.fadd(mMax, kb.log2(sum)), negInf), lse,
          ValueRange{outRow});
    }
    writerGuard.reset();
    // Shared memory is reused by the CTA's next (row, unit).
    if (!rowPerPart)
      gpu::BarrierOp::create(b);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::attn::mmasync::populateMergePatterns(const TypeConverter &converter,
                                                RewritePatternSet &patterns) {
  patterns.add<MergeLowering>(converter, patterns.getContext());
}
