//===- KernelBuilder.cpp - Terse IR building for generated kernels --------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Arithmetic, comparison and warp-shuffle helpers used by the tile patterns,
// and the softmax state they carry. Only upstream arith, math, memref and gpu
// ops are built here.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <limits>

using namespace mlir;
using namespace mlir::attn::detail;

//===----------------------------------------------------------------------===//
// KernelBuilder
//===----------------------------------------------------------------------===//

Value KernelBuilder::idx(int64_t v) {
  return arith::ConstantIndexOp::create(b, v);
}
Value KernelBuilder::i32(int32_t v) {
  return arith::ConstantIntOp::create(b, v, 32);
}
Value KernelBuilder::f32(float v) {
  return arith::ConstantFloatOp::create(b, b.getF32Type(), APFloat(v));
}
Value KernelBuilder::negInf() {
  return f32(-std::numeric_limits<float>::infinity());
}

Value KernelBuilder::add(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
Value KernelBuilder::sub(Value x, Value y) { return arith::SubIOp::create(b, x, y); }
Value KernelBuilder::mul(Value x, Value y) { return arith::MulIOp::create(b, x, y); }
Value KernelBuilder::divu(Value x, Value y) { return arith::DivUIOp::create(b, x, y); }
Value KernelBuilder::remu(Value x, Value y) { return arith::RemUIOp::create(b, x, y); }
Value KernelBuilder::andi(Value x, Value y) { return arith::AndIOp::create(b, x, y); }
Value KernelBuilder::xori(Value x, Value y) { return arith::XOrIOp::create(b, x, y); }
Value KernelBuilder::ori(Value x, Value y) { return arith::OrIOp::create(b, x, y); }
Value KernelBuilder::mins(Value x, Value y) { return arith::MinSIOp::create(b, x, y); }
Value KernelBuilder::maxs(Value x, Value y) { return arith::MaxSIOp::create(b, x, y); }

Value KernelBuilder::slt(Value x, Value y) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::slt, x, y);
}
Value KernelBuilder::sgt(Value x, Value y) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, x, y);
}
Value KernelBuilder::eq(Value x, Value y) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::eq, x, y);
}
Value KernelBuilder::ne(Value x, Value y) {
  return arith::CmpIOp::create(b, arith::CmpIPredicate::ne, x, y);
}
Value KernelBuilder::select(Value c, Value t, Value f) {
  return arith::SelectOp::create(b, c, t, f);
}
Value KernelBuilder::toIndex(Value v) {
  return arith::IndexCastOp::create(b, b.getIndexType(), v);
}
Value KernelBuilder::toI32(Value v) {
  return arith::IndexCastOp::create(b, b.getI32Type(), v);
}

Value KernelBuilder::fadd(Value x, Value y) { return arith::AddFOp::create(b, x, y); }
Value KernelBuilder::fsub(Value x, Value y) { return arith::SubFOp::create(b, x, y); }
Value KernelBuilder::fmul(Value x, Value y) { return arith::MulFOp::create(b, x, y); }
Value KernelBuilder::fdiv(Value x, Value y) { return arith::DivFOp::create(b, x, y); }
Value KernelBuilder::fmax(Value x, Value y) { return arith::MaximumFOp::create(b, x, y); }
Value KernelBuilder::foeq(Value x, Value y) {
  return arith::CmpFOp::create(b, arith::CmpFPredicate::OEQ, x, y);
}
Value KernelBuilder::fogt(Value x, Value y) {
  return arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, x, y);
}
/// `name(x)` of an NVVM intrinsic of one f32 operand (the hardware's
/// approximations).
static Value callF32Intrinsic(ImplicitLocOpBuilder &b, StringRef name,
                              Value x) {
  return LLVM::CallIntrinsicOp::create(b, x.getType(), b.getStringAttr(name),
                                       ValueRange{x})
      .getResult(0);
}

Value KernelBuilder::exp2(Value x) {
  if (!x.getType().isF32())
    return math::Exp2Op::create(b, x);
  // The hardware's ex2 with subnormal results flushed to zero: math.exp2
  // becomes ex2.approx.f32, which ptxas wraps in a range test and two
  // multiplies to keep results below 2^-126, three instructions per score
  // of the softmax that no probability or merge weight needs (P = 2^(s - m)
  // <= 1 is summed with at least one 1).
  return callF32Intrinsic(b, "llvm.nvvm.ex2.approx.ftz.f32", x);
}
Value KernelBuilder::log2(Value x) { return math::Log2Op::create(b, x); }
Value KernelBuilder::rcpApprox(Value x) {
  return callF32Intrinsic(b, "llvm.nvvm.rcp.approx.ftz.f", x);
}
Value KernelBuilder::log2Approx(Value x) {
  return callF32Intrinsic(b, "llvm.nvvm.lg2.approx.ftz.f", x);
}

Value KernelBuilder::shuffleXor(Value x, int32_t mask) {
  auto shuffle = gpu::ShuffleOp::create(b, x, mask, /*width=*/32,
                                        gpu::ShuffleMode::XOR);
  return shuffle.getShuffleResult();
}

Value KernelBuilder::shuffleIdx(Value x, Value lane) {
  auto shuffle = gpu::ShuffleOp::create(
      b, x, toI32(lane), i32(32),
      gpu::ShuffleModeAttr::get(b.getContext(), gpu::ShuffleMode::IDX));
  return shuffle.getShuffleResult();
}

/// Combines neighbours level by level: ((x0 x1) (x2 x3)) ((x4 x5) ...).
static Value reduceTree(ArrayRef<Value> xs,
                        llvm::function_ref<Value(Value, Value)> combine) {
  assert(!xs.empty() && "a tree reduction of nothing");
  SmallVector<Value> level(xs);
  while (level.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2)
      next.push_back(combine(level[i], level[i + 1]));
    if (level.size() % 2)
      next.push_back(level.back());
    level = std::move(next);
  }
  return level.front();
}

Value KernelBuilder::treeMax(ArrayRef<Value> xs) {
  return reduceTree(xs, [&](Value x, Value y) { return fmax(x, y); });
}

Value KernelBuilder::treeSum(ArrayRef<Value> xs) {
  return reduceTree(xs, [&](Value x, Value y) { return fadd(x, y); });
}

Value KernelBuilder::quadMax(Value x) {
  x = fmax(x, shuffleXor(x, 1));
  return fmax(x, shuffleXor(x, 2));
}

Value KernelBuilder::quadSum(Value x) {
  x = fadd(x, shuffleXor(x, 1));
  return fadd(x, shuffleXor(x, 2));
}

SoftmaxState mlir::attn::detail::SoftmaxState::initial(KernelBuilder &kb,
                                                       int64_t nTiles) {
  SoftmaxState init;
  init.m[0] = init.m[1] = kb.negInf();
  init.l[0] = init.l[1] = kb.f32(0.0f);
  for (int64_t nt = 0; nt < nTiles; ++nt)
    init.acc.push_back(SmallVector<Value, 4>(4, init.l[0]));
  return init;
}

SmallVector<Value> mlir::attn::detail::SoftmaxState::flatten() const {
  SmallVector<Value> values = {m[0], m[1], l[0], l[1]};
  for (const auto &frag : acc)
    values.append(frag.begin(), frag.end());
  return values;
}

SoftmaxState mlir::attn::detail::SoftmaxState::unflatten(ValueRange values,
                                                         int64_t nTiles) {
  SoftmaxState st;
  st.m[0] = values[0], st.m[1] = values[1];
  st.l[0] = values[2], st.l[1] = values[3];
  for (int64_t nt = 0; nt < nTiles; ++nt)
    st.acc.push_back(SmallVector<Value, 4>(values.slice(4 + 4 * nt, 4)));
  return st;
}
