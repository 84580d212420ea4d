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

//===----------------------------------------------------------------------===//
// wgmma
//===----------------------------------------------------------------------===//

/// An inline-asm statement with side effects whose results are `results`
/// (written by the asm, or tied to the first `tied` inputs' values when the
/// asm only orders them) and whose other inputs are `inputs`.
static SmallVector<Value> inlinePtx(ImplicitLocOpBuilder &b, StringRef ptx,
                                    TypeRange results, ValueRange tied,
                                    ValueRange inputs) {
  auto constraintOf = [](Type t) -> StringRef {
    if (t.isF32())
      return "f";
    if (t.isInteger(64))
      return "l";
    return "r";
  };
  std::string constraints;
  llvm::raw_string_ostream os(constraints);
  llvm::ListSeparator sep(",");
  for (Type t : results)
    os << sep << "=" << constraintOf(t);
  for (Value v : inputs)
    os << sep << constraintOf(v.getType());
  for (size_t i = 0; i < tied.size(); ++i)
    os << sep << i;
  SmallVector<Value> operands(inputs);
  operands.append(tied.begin(), tied.end());
  Type resultType;
  if (results.size() == 1)
    resultType = results.front();
  else if (!results.empty())
    resultType = LLVM::LLVMStructType::getLiteral(b.getContext(),
                                                  llvm::to_vector(results));
  auto op = LLVM::InlineAsmOp::create(
      b, resultType, operands, b.getStringAttr(ptx),
      b.getStringAttr(constraints), b.getUnitAttr(),
      /*is_align_stack=*/UnitAttr(), LLVM::TailCallKindAttr(),
      /*asm_dialect=*/LLVM::AsmDialectAttr(), /*operand_attrs=*/ArrayAttr());
  SmallVector<Value> values;
  if (results.size() == 1)
    values.push_back(op.getRes());
  else
    for (int64_t i = 0, e = results.size(); i < e; ++i)
      values.push_back(
          LLVM::ExtractValueOp::create(b, op.getRes(), ArrayRef<int64_t>{i}));
  return values;
}

/// `values` through `ptx`, tied: the asm does not change them.
static SmallVector<Value> orderedThrough(ImplicitLocOpBuilder &b,
                                         StringRef ptx, ValueRange values) {
  if (values.empty()) {
    inlinePtx(b, ptx, {}, {}, {});
    return {};
  }
  return inlinePtx(b, ptx, values.getTypes(), values, {});
}

Value mlir::attn::detail::opaqueIndex(ImplicitLocOpBuilder &b, Value index) {
  // No side effects: the mov may move or vanish like any arithmetic, but its
  // result is an unknown to LLVM's analyses; ptxas coalesces it away.
  Value i64 = arith::IndexCastOp::create(b, b.getI64Type(), index);
  auto op = LLVM::InlineAsmOp::create(
      b, b.getI64Type(), ValueRange{i64}, b.getStringAttr("mov.b64 $0, $1;"),
      b.getStringAttr("=l,l"), /*has_side_effects=*/UnitAttr(),
      /*is_align_stack=*/UnitAttr(), LLVM::TailCallKindAttr(),
      /*asm_dialect=*/LLVM::AsmDialectAttr(), /*operand_attrs=*/ArrayAttr());
  return arith::IndexCastOp::create(b, b.getIndexType(), op.getRes());
}

Value mlir::attn::detail::rereadCtaId(ImplicitLocOpBuilder &b) {
  return inlinePtx(b, "mov.u32 $0, %ctaid.x;", {b.getI32Type()}, {}, {})
      .front();
}

Value mlir::attn::detail::warpAny(ImplicitLocOpBuilder &b, Value pred) {
  Value all = arith::ConstantIntOp::create(b, -1, 32);
  return NVVM::VoteSyncOp::create(b, b.getI1Type(), all, pred,
                                  NVVM::VoteSyncKind::any);
}

SmallVector<Value> mlir::attn::detail::wgmmaFence(ImplicitLocOpBuilder &b,
                                                  ValueRange values) {
  return orderedThrough(b, "wgmma.fence.sync.aligned;", values);
}

void mlir::attn::detail::wgmmaCommit(ImplicitLocOpBuilder &b) {
  orderedThrough(b, "wgmma.commit_group.sync.aligned;", {});
}

SmallVector<Value> mlir::attn::detail::wgmmaWait(ImplicitLocOpBuilder &b,
                                                 int32_t pending,
                                                 ValueRange values) {
  return orderedThrough(
      b, ("wgmma.wait_group.sync.aligned " + Twine(pending) + ";").str(),
      values);
}

SmallVector<Value> mlir::attn::detail::wgmmaMMA(
    ImplicitLocOpBuilder &b, Type eltType, int64_t n, ValueRange acc,
    Value aDescriptor, ValueRange aRegisters, WgmmaOperandB operandB) {
  const int64_t numD = n / 2;
  assert(acc.empty() || int64_t(acc.size()) == numD);
  assert(bool(aDescriptor) != (aRegisters.size() == 4));
  StringRef type = eltType.isF16() ? "f16" : "bf16";
  // Operands: $0 .. $(numD - 1) D; then A (descriptor or 4 registers), the
  // B descriptor, the scale-d flag; then the accumulators tied to D.
  SmallVector<Value> inputs;
  if (aDescriptor)
    inputs.push_back(aDescriptor);
  else
    inputs.append(aRegisters.begin(), aRegisters.end());
  inputs.push_back(operandB.descriptor);
  inputs.push_back(arith::ConstantIntOp::create(b, acc.empty() ? 0 : 1, 32));
  std::string ptx;
  llvm::raw_string_ostream os(ptx);
  os << "{\n.reg .pred p;\nsetp.ne.b32 p, $" << numD + inputs.size() - 1
     << ", 0;\nwgmma.mma_async.sync.aligned.m64n" << n << "k16.f32." << type
     << "." << type << " {";
  for (int64_t i = 0; i < numD; ++i)
    os << (i ? ", $" : "$") << i;
  os << "}, ";
  int64_t next = numD;
  if (aDescriptor) {
    os << "$" << next++;
  } else {
    os << "{$" << next << ", $" << next + 1 << ", $" << next + 2 << ", $"
       << next + 3 << "}";
    next += 4;
  }
  os << ", $" << next << ", p, 1, 1, ";
  // imm-trans-a exists only with A in shared memory (K-major here).
  if (aDescriptor)
    os << "0, ";
  os << (operandB.nMajor ? 1 : 0) << ";\n}";
  SmallVector<Type> results(numD, b.getF32Type());
  return inlinePtx(b, ptx, results, acc, inputs);
}

/// A descriptor's address field, (address >> 4) & 0x3FFF, as an integer of
/// type `type` (i64: the whole descriptor, i32: its low word).
static Value getDescriptorAddressField(ImplicitLocOpBuilder &b, Value address,
                                       Type type) {
  Value addr = arith::IndexCastUIOp::create(b, type, address);
  return arith::AndIOp::create(
      b, arith::ShRUIOp::create(b, addr, arith::ConstantIntOp::create(b, type, 4)),
      arith::ConstantIntOp::create(b, type, 0x3FFF));
}

Value mlir::attn::detail::wgmmaDescriptor(ImplicitLocOpBuilder &b,
                                          Value address, int64_t leadingBytes,
                                          int64_t strideBytes) {
  // Bits 0-13: address >> 4; 16-29: leading byte offset >> 4; 32-45: stride
  // byte offset >> 4; 62-63: swizzle mode (1 = 128 bytes).
  Type i64 = b.getI64Type();
  Value field = getDescriptorAddressField(b, address, i64);
  uint64_t constant = (uint64_t(leadingBytes >> 4) & 0x3FFF) << 16 |
                      (uint64_t(strideBytes >> 4) & 0x3FFF) << 32 |
                      uint64_t(1) << 62;
  return arith::OrIOp::create(
      b, field, arith::ConstantIntOp::create(b, i64, int64_t(constant)));
}

Value mlir::attn::detail::wgmmaDescriptorLow(ImplicitLocOpBuilder &b,
                                             Value address,
                                             int64_t leadingBytes) {
  Type i32 = b.getI32Type();
  Value field = getDescriptorAddressField(b, address, i32);
  return arith::OrIOp::create(
      b, field,
      arith::ConstantIntOp::create(
          b, i32, int64_t((uint32_t(leadingBytes >> 4) & 0x3FFF) << 16)));
}

Value mlir::attn::detail::wgmmaDescriptorAfter(ImplicitLocOpBuilder &b,
                                               Value low, int64_t offsetBytes,
                                               int64_t strideBytes) {
  assert(offsetBytes % 16 == 0 && offsetBytes < (int64_t(1) << 18));
  Type i32 = b.getI32Type();
  Type i64 = b.getI64Type();
  if (offsetBytes)
    low = arith::AddIOp::create(
        b, low, arith::ConstantIntOp::create(b, i32, offsetBytes >> 4));
  uint64_t high = (uint64_t(strideBytes >> 4) & 0x3FFF) << 32 | uint64_t(1) << 62;
  return arith::OrIOp::create(b, arith::ExtUIOp::create(b, i64, low),
                              arith::ConstantIntOp::create(b, i64, int64_t(high)));
}

void mlir::attn::detail::fenceProxyAsyncShared(ImplicitLocOpBuilder &b) {
  orderedThrough(b, "fence.proxy.async.shared::cta;", {});
}

//===----------------------------------------------------------------------===//
// mbarriers, named barriers, register budgets
//===----------------------------------------------------------------------===//

static Value toI64(ImplicitLocOpBuilder &b, Value index) {
  return arith::IndexCastUIOp::create(b, b.getI64Type(), index);
}

void mlir::attn::detail::mbarrierInit(ImplicitLocOpBuilder &b, Value address,
                                      int64_t count) {
  inlinePtx(b,
            ("mbarrier.init.shared::cta.b64 [$0], " + Twine(count) + ";").str(),
            {}, {}, {toI64(b, address)});
}

void mlir::attn::detail::mbarrierInval(ImplicitLocOpBuilder &b,
                                       Value address) {
  inlinePtx(b, "mbarrier.inval.shared::cta.b64 [$0];", {}, {},
            {toI64(b, address)});
}

void mlir::attn::detail::mbarrierArrive(ImplicitLocOpBuilder &b,
                                        Value address) {
  inlinePtx(b, "mbarrier.arrive.shared::cta.b64 _, [$0];", {}, {},
            {toI64(b, address)});
}

void mlir::attn::detail::mbarrierWait(ImplicitLocOpBuilder &b, Value address,
                                      Value parity) {
  inlinePtx(b,
            "{\n.reg .pred done;\nwait_${:uid}:\n"
            "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
            "@!done bra wait_${:uid};\n}",
            {}, {}, {toI64(b, address), parity});
}

void mlir::attn::detail::mbarrierExpectTx(ImplicitLocOpBuilder &b,
                                          Value address, int64_t bytes) {
  inlinePtx(b,
            ("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], " +
             Twine(bytes) + ";")
                .str(),
            {}, {}, {toI64(b, address)});
}

void mlir::attn::detail::tmaLoad(ImplicitLocOpBuilder &b, Value dst,
                                 Value map, ValueRange coords, Value barrier) {
  // A shared::cta address is a shared::cluster address of this CTA. The map
  // is a kernel parameter read in place (grid constant): its generic
  // address, which the back end takes with cvta.param.
  std::string ptx;
  llvm::raw_string_ostream os(ptx);
  os << "cp.async.bulk.tensor." << coords.size()
     << "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], "
        "[$1, {";
  llvm::ListSeparator sep(", ");
  for (size_t i = 0; i < coords.size(); ++i)
    os << sep << "$" << i + 3;
  os << "}], [$2];";
  SmallVector<Value> inputs = {
      toI64(b, dst), LLVM::PtrToIntOp::create(b, b.getI64Type(), map),
      toI64(b, barrier)};
  llvm::append_range(inputs, coords);
  inlinePtx(b, ptx, {}, {}, inputs);
}

void mlir::attn::detail::namedBarrier(ImplicitLocOpBuilder &b, int64_t id,
                                      int64_t threads) {
  inlinePtx(b, ("bar.sync " + Twine(id) + ", " + Twine(threads) + ";").str(),
            {}, {}, {});
}

void mlir::attn::detail::namedBarrier(ImplicitLocOpBuilder &b, Value id,
                                      int64_t threads) {
  inlinePtx(b, ("bar.sync $0, " + Twine(threads) + ";").str(), {}, {}, {id});
}

void mlir::attn::detail::namedBarrierArrive(ImplicitLocOpBuilder &b,
                                            int64_t id, int64_t threads) {
  inlinePtx(b, ("bar.arrive " + Twine(id) + ", " + Twine(threads) + ";").str(),
            {}, {}, {});
}

void mlir::attn::detail::namedBarrierArrive(ImplicitLocOpBuilder &b,
                                            Value id, int64_t threads) {
  inlinePtx(b, ("bar.arrive $0, " + Twine(threads) + ";").str(), {}, {},
            {id});
}

void mlir::attn::detail::setMaxRegisters(ImplicitLocOpBuilder &b,
                                         int64_t count, bool increase) {
  inlinePtx(b,
            ("setmaxnreg." + Twine(increase ? "inc" : "dec") +
             ".sync.aligned.u32 " + Twine(count) + ";")
                .str(),
            {}, {}, {});
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
