//===- MergeKernel.cpp - The LSE merge kernel of split KV -----------------===//
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
// (all -inf gives output 0 and LSE -inf). The kernel is grid-strided over
// the units (`for u = blockIdx.x; u < plan[4]; u += gridDim.x`), so a graph
// captured with a fixed grid serves every plan. Inside a unit, a thread owns 8
// consecutive elements of one row; when the unit's rows x head_dim / 8
// elements need fewer threads than the CTA has, the CTA's threads form
// several "parts" and part p merges slots first + p, first + p + parts, ...
// in ONE online pass (running max, rescaled sum and accumulator, 4 slots'
// loads in flight per step); part 0 then combines the parts' states through
// shared memory and writes o/lse. A long split (one request over the whole
// GPU: ~66 slots per unit) thus costs a few load latencies instead of two
// serial walks over every slot. gqa_pack and the query head count come from
// the plan header, so one kernel serves every head configuration of its
// head_dim and dtype.
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

namespace rt = ::attn::runtime;

/// Slots each thread loads per step of its online pass.
static constexpr int64_t kMergeUnroll = 4;

void ::attn::detail::emitMergeKernelBody(ImplicitLocOpBuilder &b,
                                       gpu::GPUFuncOp func,
                                       const MergeKernelSpec &spec) {
  KernelBuilder kb(b);
  MLIRContext *ctx = b.getContext();
  // Copy the arguments out before the workgroup attribution adds a block
  // argument (the argument list may move).
  SmallVector<Value> args(func.getArguments().begin(),
                          func.getArguments().end());
  Value plan = args[0], mergeIndptr = args[1], mergeUnits = args[2];
  Value partialO = args[3], partialLse = args[4], slotRowsArg = args[5];
  Value out = args[6], lse = args[7], qoIndptr = args[8];
  const int64_t D = spec.headDim, chunks = D / 8, NT = spec.numWarps * 32;
  Type f32 = b.getF32Type();
  // Per-thread merge state for the cross-part combine: acc[8] at tid*8, the
  // running max at NT*8 + tid and the running sum at NT*9 + tid.
  auto smemType = MemRefType::get(
      {NT * 10}, f32, MemRefLayoutAttrInterface{},
      gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup));
  Value smem = func.addWorkgroupAttribution(smemType, b.getLoc());
  b.setInsertionPointToStart(&func.getBody().front());

  Type eltType = spec.dtype == KernelDType::BF16 ? Type(b.getBF16Type())
                                                 : Type(b.getF16Type());
  auto f32x8 = VectorType::get({8}, f32);
  auto loadIndex = [&](Value memref, Value i) {
    return kb.toIndex(memref::LoadOp::create(b, memref, ValueRange{i}));
  };
  auto splat = [&](Value x) { return vector::BroadcastOp::create(b, f32x8, x); };
  auto vfma = [&](Value acc, Value scale, Value v, Value w) {
    // acc * scale + v * w (vectors; scale and w scalars)
    return arith::AddFOp::create(
        b, arith::MulFOp::create(b, acc, splat(scale)),
        arith::MulFOp::create(b, v, splat(w)));
  };

  Value numUnits = loadIndex(plan, kb.idx(rt::kHdrNumMergeUnits));
  Value pack = loadIndex(plan, kb.idx(rt::kHdrGqaPack));
  Value numQoHeads = loadIndex(plan, kb.idx(rt::kHdrNumQoHeads));
  Value slotRows = kb.toIndex(slotRowsArg);
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value cta = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value grid = gpu::GridDimOp::create(b, gpu::Dimension::x);
  Value negInf = kb.negInf(), zeroF = kb.f32(0.0f);
  Value zeroVec = arith::ConstantOp::create(
      b, f32x8, DenseElementsAttr::get(f32x8, b.getF32FloatAttr(0.0f)));

  auto unitLoop = scf::ForOp::create(b, cta, numUnits, grid);
  b.setInsertionPointToStart(unitLoop.getBody());
  Value u = unitLoop.getInductionVar();
  Value firstSlot = loadIndex(mergeIndptr, u);
  Value lastSlot = loadIndex(mergeIndptr, kb.add(u, 1));
  Value unitBase = kb.mul(u, rt::kMergeUnitWords);
  Value request = loadIndex(mergeUnits, unitBase);
  Value headGroup = loadIndex(mergeUnits, kb.add(unitBase, 1));
  Value rowBegin = loadIndex(mergeUnits, kb.add(unitBase, 2));
  Value rowCount = loadIndex(mergeUnits, kb.add(unitBase, 3));
  Value qoStart = loadIndex(qoIndptr, request);

  // The unit's elements (row, 8-wide chunk) are spread over `span` threads;
  // the CTA's threads form `parts` such groups, part p walking slots
  // first + p, first + p + parts, ... (one online pass), then part 0
  // combines the parts through shared memory.
  Value numElts = kb.mul(rowCount, chunks);
  Value span = kb.mins(numElts, kb.idx(NT));
  Value parts = kb.divu(kb.idx(NT), span);
  Value part = kb.divu(tid, span);
  Value lane = kb.remu(tid, span);
  Value active = kb.slt(part, parts);
  Value step = kb.mul(parts, kMergeUnroll);

  auto baseLoop = scf::ForOp::create(b, kb.idx(0), numElts, span);
  b.setInsertionPointToStart(baseLoop.getBody());
  Value e = kb.add(baseLoop.getInductionVar(), lane);
  Value valid = arith::AndIOp::create(b, active, kb.slt(e, numElts));
  Value eSafe = kb.select(valid, e, kb.idx(0));
  Value row = kb.divu(eSafe, chunks);
  Value chunk = kb.remu(eSafe, chunks);
  Value start = kb.select(valid, kb.add(firstSlot, part), lastSlot);

  // One online pass over this part's slots, kMergeUnroll slots per step so
  // that their loads are in flight together.
  auto slotLoop = scf::ForOp::create(b, start, lastSlot, step,
                                     ValueRange{negInf, zeroF, zeroVec});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(slotLoop.getBody());
    Value s = slotLoop.getInductionVar();
    Value m = slotLoop.getRegionIterArgs()[0];
    Value sum = slotLoop.getRegionIterArgs()[1];
    Value acc = slotLoop.getRegionIterArgs()[2];
    SmallVector<Value> ls, os;
    for (int64_t k = 0; k < kMergeUnroll; ++k) {
      Value sk = k == 0 ? s : kb.add(s, kb.mul(parts, k));
      Value ok = k == 0 ? Value() : kb.slt(sk, lastSlot);
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

  // Publish every thread's state, then part 0 combines the parts.
  auto accStore = vector::StoreOp::create(b, accOwn, smem,
                                          ValueRange{kb.mul(tid, 8)});
  accStore.setAlignment(32);
  memref::StoreOp::create(b, mOwn, smem, ValueRange{kb.add(tid, NT * 8)});
  memref::StoreOp::create(b, sumOwn, smem, ValueRange{kb.add(tid, NT * 9)});
  gpu::BarrierOp::create(b);

  Value writer = arith::AndIOp::create(b, valid, kb.eq(part, kb.idx(0)));
  auto ifWriter = scf::IfOp::create(b, writer, false);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifWriter.getThenRegion().front());
    auto combine = scf::ForOp::create(b, kb.idx(1), parts, kb.idx(1),
                                      ValueRange{mOwn, sumOwn, accOwn});
    {
      OpBuilder::InsertionGuard guard2(b);
      b.setInsertionPointToStart(combine.getBody());
      Value q = kb.add(kb.mul(combine.getInductionVar(), span), lane);
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
      scf::YieldOp::create(
          b, ValueRange{mNew, kb.fadd(kb.fmul(sum, a), kb.fmul(sq, c)),
                        vfma(acc, a, aq, c)});
    }
    Value mMax = combine.getResult(0), sum = combine.getResult(1);
    Value nonEmpty = kb.fogt(sum, zeroF);
    Value inv = kb.select(nonEmpty, kb.fdiv(kb.f32(1.0f), sum), zeroF);
    Value acc = arith::MulFOp::create(b, combine.getResult(2), splat(inv));

    Value packed = kb.add(rowBegin, row);
    Value token = kb.divu(packed, pack);
    Value head = kb.add(kb.mul(headGroup, pack), kb.remu(packed, pack));
    Value outRow = kb.add(kb.mul(kb.add(qoStart, token), numQoHeads), head);
    Value narrow =
        arith::TruncFOp::create(b, VectorType::get({8}, eltType), acc);
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
  // Shared memory is reused by the next element block or unit.
  gpu::BarrierOp::create(b);

  b.setInsertionPointAfter(unitLoop);
  gpu::ReturnOp::create(b);
}
