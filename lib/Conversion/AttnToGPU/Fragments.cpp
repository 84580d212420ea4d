//===- Fragments.cpp - Tensor-core fragments and NVVM ops -----------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The one file of the generator that builds NVVM-dialect ops: mma.sync on
// i32-packed bf16/f16 operands, ldmatrix (through nvgpu), cp.async group
// bookkeeping, warp sync and occupancy attributes. Keeping them here keeps
// NVVMDialect.h (about 20 s and 1.3 GB to compile) out of the other files.
//
// Fragment layouts of mma.sync.m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16x16, row): a0 = A[g][2t..2t+1],   a1 = A[g+8][2t..2t+1],
//                   a2 = A[g][2t+8..+9],   a3 = A[g+8][2t+8..+9]
//   B (16x8, col):  b0 = B[2t..2t+1][g],   b1 = B[2t+8..+9][g]
//   C/D (16x8):     c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..2t+1]
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::detail;

/// Bitcasts a vector<2xbf16|f16> to an i32.
static Value bitcastPairToI32(ImplicitLocOpBuilder &b, Value pair) {
  auto i32x1 = VectorType::get({1}, b.getI32Type());
  Value packed = vector::BitCastOp::create(b, i32x1, pair);
  return vector::ExtractOp::create(b, packed, ArrayRef<int64_t>{0});
}

Value mlir::attn::detail::loadPackedPair(ImplicitLocOpBuilder &b, Value memref,
                                         Value index, Type eltType) {
  auto pairType = VectorType::get({2}, eltType);
  auto load = vector::LoadOp::create(b, pairType, memref, ValueRange{index});
  load.setAlignment(4);
  return bitcastPairToI32(b, load);
}

Value mlir::attn::detail::packPair(ImplicitLocOpBuilder &b, Value lo, Value hi,
                                   Type eltType) {
  auto f32x2 = VectorType::get({2}, b.getF32Type());
  Value pair = vector::FromElementsOp::create(b, f32x2, ValueRange{lo, hi});
  Value narrow =
      arith::TruncFOp::create(b, VectorType::get({2}, eltType), pair);
  return bitcastPairToI32(b, narrow);
}

SmallVector<Value, 4> mlir::attn::detail::ldmatrixX4(ImplicitLocOpBuilder &b,
                                                     Value smem, Value row,
                                                     Value col,
                                                     bool transpose) {
  Type eltType = cast<MemRefType>(smem.getType()).getElementType();
  auto resultType = VectorType::get({4, 2}, eltType);
  Value frag = nvgpu::LdMatrixOp::create(b, resultType, smem,
                                         ValueRange{row, col},
                                         b.getBoolAttr(transpose),
                                         b.getI32IntegerAttr(4));
  SmallVector<Value, 4> regs;
  for (int64_t i = 0; i < 4; ++i) {
    Value pair = vector::ExtractOp::create(b, frag, ArrayRef<int64_t>{i});
    regs.push_back(bitcastPairToI32(b, pair));
  }
  return regs;
}

SmallVector<Value, 4> mlir::attn::detail::mmaM16N8K16(ImplicitLocOpBuilder &b,
                                                      Type eltType,
                                                      ArrayRef<Value> a,
                                                      ArrayRef<Value> bFrag,
                                                      ArrayRef<Value> c) {
  assert(a.size() == 4 && bFrag.size() == 2 && c.size() == 4);
  Type f32 = b.getF32Type();
  auto resultType = LLVM::LLVMStructType::getLiteral(
      b.getContext(), SmallVector<Type>(4, f32));
  bool f16 = eltType.isF16();
  NVVM::MMATypes ptxType = f16 ? NVVM::MMATypes::f16 : NVVM::MMATypes::bf16;
  // bf16 operands travel as i32; the f16 form of the op wants vector<2xf16>.
  SmallVector<Value, 4> aOps(a.begin(), a.end()), bOps(bFrag.begin(),
                                                       bFrag.end());
  if (f16) {
    auto f16x2 = VectorType::get({2}, b.getF16Type());
    for (Value &v : aOps)
      v = LLVM::BitcastOp::create(b, f16x2, v);
    for (Value &v : bOps)
      v = LLVM::BitcastOp::create(b, f16x2, v);
  }
  auto mma = NVVM::MmaOp::create(
      b, resultType, aOps, bOps, c, ArrayRef<int64_t>{16, 8, 16},
      /*b1Op=*/std::nullopt, /*intOverflow=*/std::nullopt,
      std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value, 4> d;
  for (int64_t i = 0; i < 4; ++i)
    d.push_back(LLVM::ExtractValueOp::create(b, mma, ArrayRef<int64_t>{i}));
  return d;
}

void mlir::attn::detail::cpAsyncCommit(ImplicitLocOpBuilder &b) {
  NVVM::CpAsyncCommitGroupOp::create(b, b.getLoc());
}

void mlir::attn::detail::cpAsyncWait(ImplicitLocOpBuilder &b, int32_t pending) {
  NVVM::CpAsyncWaitGroupOp::create(b, b.getLoc(),
                                   b.getI32IntegerAttr(pending));
}

void mlir::attn::detail::syncWarp(ImplicitLocOpBuilder &b) {
  Value all = arith::ConstantIntOp::create(b, -1, 32);
  NVVM::SyncWarpOp::create(b, b.getLoc(), all);
}

void mlir::attn::detail::gridDepControlWait(ImplicitLocOpBuilder &b) {
  NVVM::GriddepcontrolOp::create(b, b.getLoc(),
                                 NVVM::GridDepActionKind::wait);
}

void mlir::attn::detail::gridDepControlLaunchDependents(
    ImplicitLocOpBuilder &b) {
  NVVM::GriddepcontrolOp::create(b, b.getLoc(),
                                 NVVM::GridDepActionKind::launch_dependents);
}

void mlir::attn::detail::setOccupancyHints(Operation *gpuFunc,
                                           int64_t minCTAsPerSM) {
  if (minCTAsPerSM <= 0)
    return;
  Builder b(gpuFunc->getContext());
  gpuFunc->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                   b.getI32IntegerAttr(minCTAsPerSM));
}

void mlir::attn::detail::insertNVVMDialect(DialectRegistry &registry) {
  registry.insert<NVVM::NVVMDialect>();
}
