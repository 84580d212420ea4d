//===- WarpSpecialize.cpp - The producer's and consumers' work loops ------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// A warp-specialized kernel (getProducerWarps) runs two copies of its work
// loop, chosen by thread: the tile's warps (threads 0 .. W * 32 - 1) compute,
// the producer warpgroup after them only streams K/V tiles. Both walk the
// same items and tiles, so the tile form needs no new ops: the producer's
// copy is a clone whose ops carry kProducerAttr, and each pattern lowers its
// op for its role (the producer's GEMMs, softmax and store fold away). The
// register budget moves to the computing warps with setmaxnreg, which ptxas
// ignores (warning C7508) unless the kernel also declares its CTAs per SM.
//
//===----------------------------------------------------------------------===//

#include "../MMASync/MMASync.h"
#include "attn/Conversion/AttnToGPU/AttnToGPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::mmasync;

/// Registers per thread of the producer warpgroup. setmaxnreg moves
/// registers within the CTA's allocation at launch (168 per thread for 384
/// threads = 64512): the computing warps get what the producer frees, 232
/// each for two warpgroups. Asking for more than the allocation holds never
/// returns.
static constexpr int64_t kProducerRegisters = 40;

void mlir::attn::specializeWarps(gpu::GPUFuncOp kernel) {
  TileWorkLoopOp loop;
  kernel.walk([&](TileWorkLoopOp op) { loop = op; });
  if (!loop)
    return;
  KernelContext ctx = KernelContext::get(loop);
  if (!ctx.specialized)
    return;
  ImplicitLocOpBuilder b(loop.getLoc(), loop);
  KernelBuilder kb(b);
  {
    // Each thread's count of the ring tiles its items used, from 0, and the
    // item its query rows were prefetched for, none yet.
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&kernel.getBody().front());
    auto privateWord = [&](StringRef attr, int64_t init) {
      auto word = memref::AllocaOp::create(
          b, MemRefType::get({1}, b.getIndexType()));
      word->setAttr(attr, b.getUnitAttr());
      memref::StoreOp::create(b, kb.idx(init), word, ValueRange{kb.idx(0)});
    };
    privateWord(kRingBaseAttr, 0);
    privateWord(kQueryTagAttr, -1);
  }
  // Thread 0 arms the ring's mbarriers (their phases run on across items,
  // KVPipeline.cpp), then the CTA meets once, before the roles part: one
  // barrier instruction for all its threads. (One in each role's copy of the
  // loop would be two sites of barrier 0, which compute-sanitizer's
  // synccheck reports as divergent threads.)
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  {
    OpBuilder::InsertionGuard guard(b);
    auto leader = scf::IfOp::create(b, kb.eq(tid, kb.idx(0)), false);
    b.setInsertionPointToStart(&leader.getThenRegion().front());
    for (int64_t i = 0; i < 2 * ctx.S; ++i)
      mlir::attn::detail::mbarrierInit(
          b, getRingBarrier(kb, ctx, kb.idx(i)),
          i < ctx.S ? KernelContext::kProducerThreads : ctx.threads());
  }
  gpu::BarrierOp::create(b);
  auto role = scf::IfOp::create(b, kb.sgt(kb.add(tid, kb.idx(1)),
                                          kb.idx(ctx.threads())),
                                /*withElseRegion=*/true);
  // Producer: fewer registers, then its clone of the loop.
  b.setInsertionPointToStart(&role.getThenRegion().front());
  mlir::attn::detail::setMaxRegisters(b, kProducerRegisters,
                                      /*increase=*/false);
  Operation *producer = b.clone(*loop);
  producer->walk([&](Operation *op) {
    op->setAttr(kProducerAttr, b.getUnitAttr());
  });
  // Computing warps: what the producer left.
  b.setInsertionPointToStart(&role.getElseRegion().front());
  const int64_t threads = ctx.threads() + KernelContext::kProducerThreads;
  const int64_t perThread = std::min<int64_t>(
      ctx.target->getRegistersPerSM() / threads / 8 * 8,
      ctx.target->getMaxRegistersPerThread() / 8 * 8);
  int64_t consumer = (perThread * threads -
                      KernelContext::kProducerThreads * kProducerRegisters) /
                     ctx.threads() / 8 * 8;
  mlir::attn::detail::setMaxRegisters(
      b, std::min<int64_t>(consumer, ctx.target->getMaxRegistersPerThread() / 8 * 8),
      /*increase=*/true);
  loop->moveBefore(role.getElseRegion().front().getTerminator());
  // ptxas honours setmaxnreg only when it knows the registers at entry:
  // the block size (known_block_size) and the CTAs per SM.
  mlir::attn::detail::setOccupancyHints(kernel, 1);
}
