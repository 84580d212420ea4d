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
// captured with a fixed grid serves every plan; each thread merges 8
// consecutive elements of one row. gqa_pack and the query head count come
// from the plan header, so one kernel serves every head configuration of its
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

void ::attn::detail::emitMergeKernelBody(ImplicitLocOpBuilder &b,
                                       gpu::GPUFuncOp func,
                                       const MergeKernelSpec &spec) {
  KernelBuilder kb(b);
  b.setInsertionPointToStart(&func.getBody().front());
  auto args = func.getArguments();
  Value plan = args[0], mergeIndptr = args[1], mergeUnits = args[2];
  Value partialO = args[3], partialLse = args[4], slotRowsArg = args[5];
  Value out = args[6], lse = args[7], qoIndptr = args[8];
  const int64_t D = spec.headDim, chunks = D / 8;
  Type eltType = spec.dtype == KernelDType::BF16 ? Type(b.getBF16Type())
                                                 : Type(b.getF16Type());
  auto loadIndex = [&](Value memref, Value i) {
    return kb.toIndex(memref::LoadOp::create(b, memref, ValueRange{i}));
  };

  Value numUnits = loadIndex(plan, kb.idx(rt::kHdrNumMergeUnits));
  Value pack = loadIndex(plan, kb.idx(rt::kHdrGqaPack));
  Value numQoHeads = loadIndex(plan, kb.idx(rt::kHdrNumQoHeads));
  Value slotRows = kb.toIndex(slotRowsArg);
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value cta = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value grid = gpu::GridDimOp::create(b, gpu::Dimension::x);

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

  auto eltLoop = scf::ForOp::create(b, tid, kb.mul(rowCount, chunks),
                                    kb.idx(spec.numWarps * 32));
  b.setInsertionPointToStart(eltLoop.getBody());
  Value e = eltLoop.getInductionVar();
  Value row = kb.divu(e, chunks);
  Value chunk = kb.remu(e, chunks);
  Value negInf = kb.negInf(), zeroF = kb.f32(0.0f);

  // Pass 1: the largest LSE.
  auto maxLoop = scf::ForOp::create(b, firstSlot, lastSlot, kb.idx(1),
                                    ValueRange{negInf});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(maxLoop.getBody());
    Value s = maxLoop.getInductionVar();
    Value l = memref::LoadOp::create(
        b, partialLse, ValueRange{kb.add(kb.mul(s, slotRows), row)});
    scf::YieldOp::create(b, kb.fmax(maxLoop.getRegionIterArgs()[0], l));
  }
  Value mMax = maxLoop.getResult(0);
  Value mUse = kb.select(kb.foeq(mMax, negInf), zeroF, mMax);

  // Pass 2: weights and the weighted sum of the partial outputs.
  auto f32x8 = VectorType::get({8}, b.getF32Type());
  Value zeroVec = arith::ConstantOp::create(
      b, f32x8, DenseElementsAttr::get(f32x8, b.getF32FloatAttr(0.0f)));
  auto sumLoop = scf::ForOp::create(b, firstSlot, lastSlot, kb.idx(1),
                                    ValueRange{zeroF, zeroVec});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(sumLoop.getBody());
    Value s = sumLoop.getInductionVar();
    Value slotRow = kb.add(kb.mul(s, slotRows), row);
    Value l = memref::LoadOp::create(b, partialLse, ValueRange{slotRow});
    Value w = kb.exp2(kb.fsub(l, mUse));
    auto part = vector::LoadOp::create(
        b, f32x8, partialO,
        ValueRange{kb.add(kb.mul(slotRow, D), kb.mul(chunk, 8))});
    part.setAlignment(16);
    Value acc = arith::AddFOp::create(
        b, sumLoop.getRegionIterArgs()[1],
        arith::MulFOp::create(b, part,
                              vector::BroadcastOp::create(b, f32x8, w)));
    scf::YieldOp::create(
        b, ValueRange{kb.fadd(sumLoop.getRegionIterArgs()[0], w), acc});
  }
  Value sum = sumLoop.getResult(0);
  Value nonEmpty = kb.fogt(sum, zeroF);
  Value inv = kb.select(nonEmpty, kb.fdiv(kb.f32(1.0f), sum), zeroF);
  Value acc = arith::MulFOp::create(
      b, sumLoop.getResult(1), vector::BroadcastOp::create(b, f32x8, inv));

  Value packed = kb.add(rowBegin, row);
  Value token = kb.divu(packed, pack);
  Value head = kb.add(kb.mul(headGroup, pack), kb.remu(packed, pack));
  Value outRow = kb.add(kb.mul(kb.add(qoStart, token), numQoHeads), head);
  Value narrow =
      arith::TruncFOp::create(b, VectorType::get({8}, eltType), acc);
  auto store = vector::StoreOp::create(
      b, narrow, out, ValueRange{kb.add(kb.mul(outRow, D), kb.mul(chunk, 8))});
  store.setAlignment(16);
  auto first = scf::IfOp::create(b, kb.eq(chunk, kb.idx(0)), false);
  b.setInsertionPointToStart(&first.getThenRegion().front());
  memref::StoreOp::create(
      b, kb.select(nonEmpty, kb.fadd(mMax, kb.log2(sum)), negInf), lse,
      ValueRange{outRow});

  b.setInsertionPointAfter(unitLoop);
  gpu::ReturnOp::create(b);
}
