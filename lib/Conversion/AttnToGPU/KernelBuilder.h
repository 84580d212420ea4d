//===- KernelBuilder.h - Terse IR building for generated kernels -*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Private to the AttnToGPU library. The tile patterns (MMASync/) build a lot
// of index and float arithmetic; KernelBuilder wraps an ImplicitLocOpBuilder
// with short, typed helpers for it (constants, integer/index math, selects,
// warp shuffles, exp2), and the fragment helpers (Fragments.cpp) own every op
// of the NVVM dialect so that only that file pays for NVVMDialect.h.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_CONVERSION_ATTNTOGPU_KERNELBUILDER_H
#define ATTN_LIB_CONVERSION_ATTNTOGPU_KERNELBUILDER_H

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::attn::detail {

/// Helpers over an ImplicitLocOpBuilder; every value is `index`, `i32` or
/// `f32` as the name says.
class KernelBuilder {
public:
  explicit KernelBuilder(mlir::ImplicitLocOpBuilder &b) : b(b) {}

  mlir::ImplicitLocOpBuilder &builder() { return b; }

  // Constants.
  mlir::Value idx(int64_t v);
  mlir::Value i32(int32_t v);
  mlir::Value f32(float v);
  mlir::Value negInf();

  // Index / integer arithmetic (operands of one type).
  mlir::Value add(mlir::Value x, mlir::Value y);
  mlir::Value sub(mlir::Value x, mlir::Value y);
  mlir::Value mul(mlir::Value x, mlir::Value y);
  mlir::Value divu(mlir::Value x, mlir::Value y);
  mlir::Value remu(mlir::Value x, mlir::Value y);
  mlir::Value andi(mlir::Value x, mlir::Value y);
  mlir::Value xori(mlir::Value x, mlir::Value y);
  mlir::Value ori(mlir::Value x, mlir::Value y);
  mlir::Value mins(mlir::Value x, mlir::Value y);
  mlir::Value maxs(mlir::Value x, mlir::Value y);
  mlir::Value add(mlir::Value x, int64_t y) { return add(x, idx(y)); }
  mlir::Value mul(mlir::Value x, int64_t y) { return mul(x, idx(y)); }
  mlir::Value divu(mlir::Value x, int64_t y) { return divu(x, idx(y)); }
  mlir::Value remu(mlir::Value x, int64_t y) { return remu(x, idx(y)); }
  mlir::Value slt(mlir::Value x, mlir::Value y);
  mlir::Value sgt(mlir::Value x, mlir::Value y);
  mlir::Value eq(mlir::Value x, mlir::Value y);
  mlir::Value ne(mlir::Value x, mlir::Value y);
  mlir::Value select(mlir::Value c, mlir::Value t, mlir::Value f);
  /// An integer -> index (sign-extending) and index -> i32.
  mlir::Value toIndex(mlir::Value i32Value);
  mlir::Value toI32(mlir::Value indexValue);

  // f32 arithmetic.
  mlir::Value fadd(mlir::Value x, mlir::Value y);
  mlir::Value fsub(mlir::Value x, mlir::Value y);
  mlir::Value fmul(mlir::Value x, mlir::Value y);
  mlir::Value fdiv(mlir::Value x, mlir::Value y);
  mlir::Value fmax(mlir::Value x, mlir::Value y);
  mlir::Value foeq(mlir::Value x, mlir::Value y);
  mlir::Value fogt(mlir::Value x, mlir::Value y);
  mlir::Value exp2(mlir::Value x);
  mlir::Value log2(mlir::Value x);
  /// The hardware's approximations (rcp.approx.ftz.f32, lg2.approx.ftz.f32;
  /// relative error about 2^-23 and absolute 2^-22): for a softmax row's
  /// normaliser and LSE, where IEEE division and libdevice's log2 cost a
  /// slow-path branch and a 20-instruction polynomial per row.
  mlir::Value rcpApprox(mlir::Value x);
  mlir::Value log2Approx(mlir::Value x);

  /// Max / sum of `xs` (at least one) as a balanced tree: a dependence
  /// depth of log2(n) instead of the n - 1 of a running accumulation, which
  /// ptxas does not reassociate (the softmax's row max and row sum).
  mlir::Value treeMax(llvm::ArrayRef<mlir::Value> xs);
  mlir::Value treeSum(llvm::ArrayRef<mlir::Value> xs);

  /// Butterfly shuffle of a 32-bit value across the warp (`gpu.shuffle xor`).
  mlir::Value shuffleXor(mlir::Value x, int32_t mask);
  /// Lane `lane`'s value of a 32-bit `x` (`gpu.shuffle idx`).
  mlir::Value shuffleIdx(mlir::Value x, mlir::Value lane);
  /// Max / sum of an f32 over the 4 lanes of a quad (lanes 4g .. 4g+3), the
  /// lanes that share a row of an mma accumulator fragment.
  mlir::Value quadMax(mlir::Value x);
  mlir::Value quadSum(mlir::Value x);

private:
  mlir::ImplicitLocOpBuilder &b;
};

//===----------------------------------------------------------------------===//
// Fragment helpers (Fragments.cpp): the NVVM-dialect seam.
//===----------------------------------------------------------------------===//

/// Loads two consecutive 16-bit elements `memref[index], memref[index + 1]`
/// and returns them packed in an i32 (low half = first element), the register
/// form mma.sync takes for bf16/f16 operands.
mlir::Value loadPackedPair(mlir::ImplicitLocOpBuilder &b, mlir::Value memref,
                           mlir::Value index, mlir::Type eltType);

/// Converts two f32 values to `eltType` (bf16/f16) and packs them in an i32.
mlir::Value packPair(mlir::ImplicitLocOpBuilder &b, mlir::Value lo,
                     mlir::Value hi, mlir::Type eltType);

/// `ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16` through nvgpu.ldmatrix:
/// lane l supplies the address of row l % 8 of matrix l / 8 as
/// `smem[row, col]`; returns the four received registers as i32.
llvm::SmallVector<mlir::Value, 4>
ldmatrixX4(mlir::ImplicitLocOpBuilder &b, mlir::Value smem, mlir::Value row,
           mlir::Value col, bool transpose);

/// `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.f32` on operands of
/// `eltType` (bf16 or f16): a = 4 packed i32, bFrag = 2 packed i32, c = 4
/// f32; returns the 4 f32 of D.
llvm::SmallVector<mlir::Value, 4>
mmaM16N8K16(mlir::ImplicitLocOpBuilder &b, mlir::Type eltType,
            llvm::ArrayRef<mlir::Value> a, llvm::ArrayRef<mlir::Value> bFrag,
            llvm::ArrayRef<mlir::Value> c);

/// cp.async bookkeeping: commit the issued copies as a group; wait until at
/// most `pending` groups are in flight.
void cpAsyncCommit(mlir::ImplicitLocOpBuilder &b);
void cpAsyncWait(mlir::ImplicitLocOpBuilder &b, int32_t pending);
/// `bar.warp.sync 0xffffffff`.
void syncWarp(mlir::ImplicitLocOpBuilder &b);

/// Online-softmax state of one warp's 16-row mma.sync tile: the running max
/// and per-thread partial sum of rows g and g + 8 (g = lane / 4), and the
/// output accumulator, headDim / 8 n-tiles of 4 f32 C-fragment values.
struct SoftmaxState {
  mlir::Value m[2], l[2];
  llvm::SmallVector<llvm::SmallVector<mlir::Value, 4>> acc;

  /// m = -inf, l = 0, acc = 0 for `nTiles` n-tiles.
  static SoftmaxState initial(KernelBuilder &kb, int64_t nTiles);
  /// m, l, then the accumulator, as scf.for iter_args / scf.if results.
  llvm::SmallVector<mlir::Value> flatten() const;
  /// The inverse of flatten() for `nTiles` n-tiles.
  static SoftmaxState unflatten(mlir::ValueRange values, int64_t nTiles);
};

/// Warpgroup MMA (sm_90a), issued by all 128 threads of a warpgroup. D is
/// m64 x n f32, n / 2 values per thread, in the order of n / 8 mma.sync C
/// fragments (row g: d[4j], d[4j+1] at columns 8j + 2t, +1; row g + 8:
/// d[4j+2], d[4j+3]); warp w of the warpgroup holds rows 16w .. 16w + 15.
/// A in registers (4 i32 per thread) has mma.sync's A-fragment layout.
///
/// The values a wgmma reads or writes travel through the fence and the wait
/// as tied inline-asm operands, so no instruction that touches them can move
/// across either.
struct WgmmaOperandB {
  /// Shared-memory descriptor of B and whether B is N-major (transposed).
  mlir::Value descriptor;
  bool nMajor;
};
/// `index` unchanged, through a PTX `mov` that LLVM cannot see into: a
/// chain of runtime-strided addresses stays a chain (one add each) instead
/// of becoming loop-strength-reduced induction variables, one live register
/// pair per address.
mlir::Value opaqueIndex(mlir::ImplicitLocOpBuilder &b, mlir::Value index);
/// The CTA's index (i32), read from %ctaid.x where it is used: LLVM neither
/// hoists nor merges the read, so a loop that needs it keeps no register
/// live for it.
mlir::Value rereadCtaId(mlir::ImplicitLocOpBuilder &b);
/// Whether `pred` (i1) holds in any lane of the warp (`vote.sync.any`, all
/// lanes active): a warp-uniform i1, for branches every lane takes alike.
mlir::Value warpAny(mlir::ImplicitLocOpBuilder &b, mlir::Value pred);
/// `wgmma.fence.sync.aligned`; returns `values` (accumulators and A
/// registers written since the last wgmma), ordered after it.
llvm::SmallVector<mlir::Value> wgmmaFence(mlir::ImplicitLocOpBuilder &b,
                                          mlir::ValueRange values);
/// One `wgmma.mma_async` m64 n k16 on bf16/f16 `eltType`: D = A B + acc, or
/// D = A B when `acc` is empty. A is a descriptor (`aDescriptor`, K-major)
/// or 4 registers (`aRegisters`).
llvm::SmallVector<mlir::Value>
wgmmaMMA(mlir::ImplicitLocOpBuilder &b, mlir::Type eltType, int64_t n,
         mlir::ValueRange acc, mlir::Value aDescriptor,
         mlir::ValueRange aRegisters, WgmmaOperandB operandB);
/// `wgmma.commit_group.sync.aligned`.
void wgmmaCommit(mlir::ImplicitLocOpBuilder &b);
/// `wgmma.wait_group.sync.aligned pending`; returns `values`, ordered after
/// it.
llvm::SmallVector<mlir::Value> wgmmaWait(mlir::ImplicitLocOpBuilder &b,
                                         int32_t pending,
                                         mlir::ValueRange values);
/// The descriptor of a 128-byte-swizzled operand at shared-memory byte
/// address `address` (index), with leading and stride byte offsets.
mlir::Value wgmmaDescriptor(mlir::ImplicitLocOpBuilder &b, mlir::Value address,
                            int64_t leadingBytes, int64_t strideBytes);
/// The low word (i32) of wgmmaDescriptor(`address`, `leadingBytes`, ...):
/// the address field and the leading byte offset.
mlir::Value wgmmaDescriptorLow(mlir::ImplicitLocOpBuilder &b,
                               mlir::Value address, int64_t leadingBytes);
/// The descriptor of the operand `offsetBytes` (a multiple of 16) past the
/// one whose low word is `low`, with stride byte offset `strideBytes`. Shared
/// memory ends below 2^18 bytes, so the address field (address >> 4, 14 bits)
/// of every operand fits and the offset is one 32-bit add that never carries
/// into the leading byte offset; the high word is a constant.
mlir::Value wgmmaDescriptorAfter(mlir::ImplicitLocOpBuilder &b, mlir::Value low,
                                 int64_t offsetBytes, int64_t strideBytes);
/// `fence.proxy.async.shared::cta`: this thread's shared-memory writes become
/// visible to the async proxy (wgmma, TMA).
void fenceProxyAsyncShared(mlir::ImplicitLocOpBuilder &b);

/// mbarriers (sm_80+; shared-memory byte address `address`, index): init
/// with an arrival count, invalidate, arrive, and wait until the phase of
/// parity `parity` (i32, 0 or 1) has completed.
void mbarrierInit(mlir::ImplicitLocOpBuilder &b, mlir::Value address,
                  int64_t count);
void mbarrierInval(mlir::ImplicitLocOpBuilder &b, mlir::Value address);
void mbarrierArrive(mlir::ImplicitLocOpBuilder &b, mlir::Value address);
void mbarrierWait(mlir::ImplicitLocOpBuilder &b, mlir::Value address,
                  mlir::Value parity);
/// `mbarrier.expect_tx` (sm_90): the current phase of the mbarrier at
/// `address` also waits for `bytes` more bytes of asynchronous copies.
void mbarrierExpectTx(mlir::ImplicitLocOpBuilder &b, mlir::Value address,
                      int64_t bytes);
/// `cp.async.bulk.tensor` (sm_90, TMA): the box of the tensor map `map` (an
/// `!llvm.ptr` to a CUtensorMap) at `coords` (i32, innermost first) into
/// shared memory at byte address `dst` (index); its bytes complete the
/// transaction count of the mbarrier at `barrier` (index).
void tmaLoad(mlir::ImplicitLocOpBuilder &b, mlir::Value dst, mlir::Value map,
             mlir::ValueRange coords, mlir::Value barrier);
/// `bar.sync id, threads`: a barrier of `threads` threads (whole warps).
void namedBarrier(mlir::ImplicitLocOpBuilder &b, int64_t id, int64_t threads);
/// `bar.sync id, threads` with the barrier's id a run-time value (i32).
void namedBarrier(mlir::ImplicitLocOpBuilder &b, mlir::Value id,
                  int64_t threads);
/// `bar.arrive id, threads`: counts this warp in, without waiting.
void namedBarrierArrive(mlir::ImplicitLocOpBuilder &b, int64_t id,
                        int64_t threads);
/// `bar.arrive id, threads` with the barrier's id a run-time value (i32).
void namedBarrierArrive(mlir::ImplicitLocOpBuilder &b, mlir::Value id,
                        int64_t threads);
/// `setmaxnreg.{inc,dec}.sync.aligned.u32 count` (sm_90a): the warpgroup's
/// register budget, moved between warpgroups of one CTA.
void setMaxRegisters(mlir::ImplicitLocOpBuilder &b, int64_t count,
                     bool increase);

/// Programmatic dependent launch (sm_90+): `griddepcontrol.wait` blocks
/// until the grids this one depends on have completed and their writes are
/// visible; `griddepcontrol.launch_dependents` lets a dependent grid launched
/// with programmatic stream serialization start before this one ends. Both
/// are no-ops without such a launch.
void gridDepControlWait(mlir::ImplicitLocOpBuilder &b);
void gridDepControlLaunchDependents(mlir::ImplicitLocOpBuilder &b);

/// Registers the NVVM dialect (kept here with the other NVVM uses).
void insertNVVMDialect(mlir::DialectRegistry &registry);

/// Occupancy hints on a gpu.func: `nvvm.minctasm` (0 = none).
void setOccupancyHints(mlir::Operation *gpuFunc, int64_t minCTAsPerSM);

} // namespace mlir::attn::detail

#endif // ATTN_LIB_CONVERSION_ATTNTOGPU_KERNELBUILDER_H
