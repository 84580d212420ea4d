//===- MMASync.cpp - What the sm_80+ patterns share -----------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The kernel context, thread coordinates, the packing of tile values, and
// the row, shared-memory and hook helpers of the sm_80+ pattern set.
//
//===----------------------------------------------------------------------===//

#include "MMASync.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::mmasync;

KernelContext KernelContext::get(Operation *op) {
  KernelContext ctx{};
  ctx.launch = getEnclosingLaunch(op);
  assert(ctx.launch && ctx.launch.isAttention() &&
         "tile ops live in attention kernels");
  ctx.tile = ctx.launch.getTile();
  ctx.target = TargetInfo::lookup(ctx.launch.getChip().getValue());
  ctx.elt = ctx.launch.getDtype();
  ctx.D = ctx.launch.getHeadDim();
  ctx.Hq = ctx.launch.getNumQoHeads();
  ctx.Hkv = ctx.launch.getNumKvHeads();
  ctx.G = ctx.Hq / ctx.Hkv;
  ctx.P = ctx.tile.getGqaPack();
  BsrAttr format = ctx.launch.getFormat();
  ctx.paged = format.isPaged();
  ctx.PS = ctx.paged ? format.getBlockCols() : 1;
  ctx.nhd = format.getLayout() == KVLayout::NHD;
  ctx.W = ctx.tile.getWarps();
  ctx.S = ctx.tile.getStages();
  ctx.Q = ctx.tile.getQ();
  ctx.N = ctx.tile.getKeysPerStep();
  ctx.splitKeys = ctx.tile.warpsSplitKeys();
  ctx.wgmma = ctx.target &&
              getTileMMA(ctx.tile, ctx.D, *ctx.target) == TileMMA::Wgmma;
  TileMMA mma = ctx.wgmma ? TileMMA::Wgmma : TileMMA::MmaSync;
  ctx.specialized = getProducerWarps(ctx.tile, mma) > 0;
  ctx.pipelined = isKVLoopPipelined(ctx.tile, mma);
  ctx.lazyMax = movesRowMaxLazily(ctx.tile, mma);
  ctx.smem = getTileSharedMemory(ctx.tile, ctx.D, mma);
  return ctx;
}

ThreadCoords::ThreadCoords(KernelBuilder &kb) {
  ImplicitLocOpBuilder &b = kb.builder();
  tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  lane = kb.remu(tid, 32);
  warp = kb.divu(tid, 32);
  g = kb.divu(lane, 4);
  t = kb.remu(lane, 4);
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

SmallVector<Type> ItemValues::getTypes(MLIRContext *ctx) {
  SmallVector<Type> types(kSize, IndexType::get(ctx));
  types[7] = IntegerType::get(ctx, 32); // flags
  return types;
}

SmallVector<Value> ItemValues::flatten() const {
  return {request, headGroup, rowBegin, rowCount, kvBegin,
          kvEnd,   slot,      flags,    qoStart,  qoLen,
          kvBase,  numBlocks, kvLen,    kvHead,   posOffset,
          index,   end};
}

ItemValues ItemValues::unflatten(ValueRange v) {
  assert(v.size() == kSize && "an item is 17 values");
  ItemValues i;
  i.request = v[0], i.headGroup = v[1], i.rowBegin = v[2], i.rowCount = v[3];
  i.kvBegin = v[4], i.kvEnd = v[5], i.slot = v[6], i.flags = v[7];
  i.qoStart = v[8], i.qoLen = v[9], i.kvBase = v[10], i.numBlocks = v[11];
  i.kvLen = v[12], i.kvHead = v[13], i.posOffset = v[14];
  i.index = v[15], i.end = v[16];
  return i;
}

int64_t mlir::attn::mmasync::getCopiesPerThread(const KernelContext &ctx) {
  // A decode warp copies its 16-key tile with its 32 lanes; taller tiles
  // copy the shared tile with every thread, or the producer's.
  int64_t threads = ctx.copyThreads();
  int64_t chunks = ctx.N * ctx.chunks();
  return (chunks + threads - 1) / threads;
}

bool mlir::attn::mmasync::keepsQueryInRegisters(const KernelContext &ctx) {
  // A decode warp holds its A fragments for the whole item; a taller tile
  // keeps them up to head dim 128 and re-reads larger ones from shared
  // memory at every k-step (256 would spill); wgmma reads Q from shared
  // memory.
  if (ctx.wgmma)
    return false;
  return ctx.splitKeys || ctx.D <= 128;
}

int64_t mlir::attn::mmasync::getNumPageIds(const KernelContext &ctx) {
  if (!ctx.paged)
    return 0;
  // Tiles start at multiples of the tile's keys (decode: of 16 keys from
  // position 0; taller tiles: chunk starts the planner aligns to whole
  // pages), so a page size that is a multiple of the tile holds each tile.
  if (ctx.PS % ctx.N == 0)
    return 1;
  if (getPagesPerTile(ctx))
    return getPagesPerTile(ctx);
  if (int64_t perLane = getLanePageIds(ctx))
    return perLane;
  // One page per copy: a producer warpgroup looks each up as it issues the
  // copy (its 40 registers cannot carry a tile's worth one tile ahead).
  return ctx.specialized ? 0 : getCopiesPerThread(ctx);
}

int64_t mlir::attn::mmasync::getLanePageIds(const KernelContext &ctx) {
  // A producer warp's lanes copy whole rows (32 / chunks each round, the
  // same rows below every rowStep): the tile's rows it reads, one page index
  // each, spread over its 32 lanes.
  const int64_t chunks = ctx.chunks();
  if (!ctx.specialized || !ctx.paged || ctx.PS % ctx.N == 0 ||
      getPagesPerTile(ctx) || ctx.copyThreads() % chunks || 32 % chunks)
    return 0;
  const int64_t rows = 32 / chunks * getCopiesPerThread(ctx);
  return (rows + 31) / 32;
}

int64_t mlir::attn::mmasync::getPagesPerTile(const KernelContext &ctx) {
  // The producer's copy i is i x rowStep rows below its first, which lies in
  // the tile's first rowStep rows: with whole pages of a multiple of rowStep
  // rows, copy i reads the tile's page (i x rowStep) / page_size, the same
  // for every producer thread.
  const int64_t rowStep = ctx.copyThreads() / ctx.chunks();
  if (!ctx.specialized || !ctx.paged || ctx.copyThreads() % ctx.chunks() ||
      ctx.PS >= ctx.N || ctx.N % ctx.PS || ctx.PS % rowStep)
    return 0;
  return ctx.N / ctx.PS;
}

void mlir::attn::mmasync::addTypeConversions(TypeConverter &converter,
                                             const KernelContext &kctx) {
  converter.addConversion([](Type t) { return t; });
  converter.addConversion(
      [](ItemType t, SmallVectorImpl<Type> &out) -> LogicalResult {
        llvm::append_range(out, ItemValues::getTypes(t.getContext()));
        return success();
      });
  converter.addConversion(
      [](KVRangeType t, SmallVectorImpl<Type> &out) -> LogicalResult {
        out.append(RangeValues::kSize, IndexType::get(t.getContext()));
        return success();
      });
  int64_t ids = getNumPageIds(kctx);
  converter.addConversion(
      [ids](KVPipeType t, SmallVectorImpl<Type> &out) -> LogicalResult {
        out.append(RangeValues::kSize, IndexType::get(t.getContext()));
        out.append(ids, IntegerType::get(t.getContext(), 32));
        return success();
      });
  converter.addConversion(
      [](KVTileType t, SmallVectorImpl<Type> &out) -> LogicalResult {
        Type index = IndexType::get(t.getContext());
        out.append({index, index, IntegerType::get(t.getContext(), 1)});
        return success();
      });
  // Register fragments of the warp's 16-row slice.
  bool queryInRegisters = keepsQueryInRegisters(kctx);
  converter.addConversion(
      [queryInRegisters](QueryType t,
                         SmallVectorImpl<Type> &out) -> LogicalResult {
        if (queryInRegisters)
          out.append(t.getDim() / 16 * 4, IntegerType::get(t.getContext(), 32));
        else
          out.push_back(IndexType::get(t.getContext()));
        return success();
      });
  converter.addConversion(
      [](ScoresType t, SmallVectorImpl<Type> &out) -> LogicalResult {
        out.append(t.getKeys() / 8 * 4, Float32Type::get(t.getContext()));
        return success();
      });
  converter.addConversion(
      [](ProbsType t, SmallVectorImpl<Type> &out) -> LogicalResult {
        out.append(t.getKeys() / 16 * 4, IntegerType::get(t.getContext(), 32));
        return success();
      });
  converter.addConversion(
      [](SoftmaxType t, SmallVectorImpl<Type> &out) -> LogicalResult {
        out.append(4 + t.getDim() / 2, Float32Type::get(t.getContext()));
        return success();
      });
}

//===----------------------------------------------------------------------===//
// Shared memory and rows
//===----------------------------------------------------------------------===//

Value mlir::attn::mmasync::getDynamicSharedMemory(KernelBuilder &kb) {
  ImplicitLocOpBuilder &b = kb.builder();
  auto bytes = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                               MemRefLayoutAttrInterface{},
                               getWorkgroupSpace(b.getContext()));
  return gpu::DynamicSharedMemoryOp::create(b, bytes);
}

Attribute mlir::attn::mmasync::getWorkgroupSpace(MLIRContext *ctx) {
  return gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
}

Value mlir::attn::mmasync::getSharedTiles(KernelBuilder &kb,
                                          const KernelContext &ctx) {
  ImplicitLocOpBuilder &b = kb.builder();
  auto type = MemRefType::get(
      {ctx.smem.columnBlocks * ctx.smem.totalRows, ctx.smem.blockElements},
      ctx.elt, MemRefLayoutAttrInterface{}, getWorkgroupSpace(b.getContext()));
  return memref::ViewOp::create(b, type, getDynamicSharedMemory(kb),
                                kb.idx(0), ValueRange{});
}

Value mlir::attn::mmasync::getKRow(KernelBuilder &kb, const KernelContext &ctx,
                                   const ThreadCoords &tc, Value stage) {
  if (ctx.splitKeys)
    return kb.add(kb.mul(tc.warp, ctx.smem.ringRows),
                  kb.mul(stage, 2 * ctx.N));
  return kb.add(kb.idx(ctx.smem.kRow), kb.mul(stage, ctx.N));
}

Value mlir::attn::mmasync::getVRow(KernelBuilder &kb, const KernelContext &ctx,
                                   Value kRow) {
  // Decode slots hold K then V; taller tiles keep two rings.
  int64_t offset = ctx.splitKeys ? ctx.N : ctx.smem.vRow - ctx.smem.kRow;
  return kb.add(kRow, kb.idx(offset));
}

SharedElement mlir::attn::mmasync::getSharedElement(KernelBuilder &kb,
                                                   const KernelContext &ctx,
                                                   Value row, Value chunk) {
  if (!ctx.smem.swizzled)
    return {row, kb.mul(chunk, 8)};
  if (ctx.smem.columnBlocks == 1)
    return {row, kb.mul(kb.xori(chunk, kb.andi(row, kb.idx(7))), 8)};
  Value block = kb.divu(chunk, 8), inner = kb.remu(chunk, 8);
  return {kb.add(kb.mul(block, ctx.smem.totalRows), row),
          kb.mul(kb.xori(inner, kb.andi(row, kb.idx(7))), 8)};
}

SharedElement mlir::attn::mmasync::getSharedElement(KernelBuilder &kb,
                                                   const KernelContext &ctx,
                                                   Value row, int64_t block,
                                                   Value inner) {
  if (ctx.smem.columnBlocks == 1)
    return getSharedElement(kb, ctx, row, kb.add(inner, kb.idx(8 * block)));
  return {kb.add(row, kb.idx(block * ctx.smem.totalRows)),
          kb.mul(kb.xori(inner, kb.andi(row, kb.idx(7))), 8)};
}

Value mlir::attn::mmasync::getSharedBase(KernelBuilder &kb) {
  return memref::ExtractAlignedPointerAsIndexOp::create(
      kb.builder(), getDynamicSharedMemory(kb));
}

Value mlir::attn::mmasync::getRingBarrier(KernelBuilder &kb,
                                          const KernelContext &ctx, Value i) {
  return kb.add(getSharedBase(kb),
                kb.add(kb.idx(ctx.smem.barrierOffset), kb.mul(i, 8)));
}

void mlir::attn::mmasync::emitIf(ImplicitLocOpBuilder &b, Value cond,
                                 llvm::function_ref<void()> body) {
  auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  body();
}

/// The thread-private word of `op`'s kernel marked `attr`.
static Value getPrivateWord(Operation *op, StringRef attr) {
  auto func = op->getParentOfType<gpu::GPUFuncOp>();
  for (Operation &candidate : func.getBody().front())
    if (candidate.hasAttr(attr))
      return candidate.getResult(0);
  llvm_unreachable("warp-specialized kernels declare their private words");
}

static Value loadPrivateWord(KernelBuilder &kb, Operation *op,
                             StringRef attr) {
  return memref::LoadOp::create(kb.builder(), getPrivateWord(op, attr),
                                ValueRange{kb.idx(0)});
}

static void storePrivateWord(KernelBuilder &kb, Operation *op, StringRef attr,
                             Value value) {
  memref::StoreOp::create(kb.builder(), value, getPrivateWord(op, attr),
                          ValueRange{kb.idx(0)});
}

Value mlir::attn::mmasync::loadRingBase(KernelBuilder &kb, Operation *op) {
  return loadPrivateWord(kb, op, kRingBaseAttr);
}

void mlir::attn::mmasync::storeRingBase(KernelBuilder &kb, Operation *op,
                                        Value tiles) {
  storePrivateWord(kb, op, kRingBaseAttr, tiles);
}

Value mlir::attn::mmasync::loadQueryTag(KernelBuilder &kb, Operation *op) {
  return loadPrivateWord(kb, op, kQueryTagAttr);
}

void mlir::attn::mmasync::storeQueryTag(KernelBuilder &kb, Operation *op,
                                        Value item) {
  storePrivateWord(kb, op, kQueryTagAttr, item);
}

void mlir::attn::mmasync::publishSharedWrites(KernelBuilder &kb,
                                              const KernelContext &ctx) {
  if (ctx.wgmma)
    mlir::attn::detail::fenceProxyAsyncShared(kb.builder());
}

Value mlir::attn::mmasync::getLocalRow(KernelBuilder &kb,
                                       const KernelContext &ctx,
                                       const ThreadCoords &tc, int64_t r) {
  Value row = kb.add(tc.g, kb.idx(r * 8));
  return ctx.splitKeys ? row : kb.add(kb.mul(tc.warp, 16), row);
}

Value mlir::attn::mmasync::getRowToken(KernelBuilder &kb,
                                       const KernelContext &ctx,
                                       const ItemValues &item, Value local) {
  Value packed = kb.add(item.rowBegin, local);
  return ctx.P == 1 ? packed : kb.divu(packed, ctx.P);
}

Value mlir::attn::mmasync::getRowHead(KernelBuilder &kb,
                                      const KernelContext &ctx,
                                      const ItemValues &item, Value local) {
  Value base = kb.mul(item.headGroup, ctx.P);
  if (ctx.P == 1)
    return base;
  return kb.add(base, kb.remu(kb.add(item.rowBegin, local), ctx.P));
}

Value mlir::attn::mmasync::getRowPos(KernelBuilder &kb,
                                     const KernelContext &ctx,
                                     const ItemValues &item, Value local) {
  return kb.add(item.posOffset, getRowToken(kb, ctx, item, local));
}

SmallVector<Value, 4> mlir::attn::mmasync::loadQueryFragment(
    KernelBuilder &kb, const KernelContext &ctx, const ThreadCoords &tc,
    Value tiles, int64_t kStep) {
  // Matrices (rows 0-7, k 0-7) (rows 8-15, k 0-7) (rows 0-7, k 8-15)
  // (rows 8-15, k 8-15) are a0..a3 of mma's A operand.
  Value row = kb.add(
      kb.add(kb.idx(ctx.smem.qRow), kb.mul(tc.warp, 16)),
      kb.add(kb.remu(tc.lane, 8), kb.mul(kb.remu(kb.divu(tc.lane, 8), 2), 8)));
  SharedElement e = getSharedElement(
      kb, ctx, row, kStep / 4,
      kb.add(kb.divu(tc.lane, 16), kb.idx(2 * (kStep % 4))));
  return mlir::attn::detail::ldmatrixX4(kb.builder(), tiles, e.row, e.col,
                                        /*transpose=*/false);
}

SmallVector<Value, 4> mlir::attn::mmasync::mma(KernelBuilder &kb,
                                               const KernelContext &ctx,
                                               ArrayRef<Value> a,
                                               ArrayRef<Value> b,
                                               ArrayRef<Value> c) {
  return mlir::attn::detail::mmaM16N8K16(kb.builder(), ctx.elt, a, b, c);
}

Value mlir::attn::mmasync::inlineHook(OpBuilder &b, Region &region,
                                      ValueRange args, IRMapping mapping) {
  Block &block = region.front();
  // Hooks take i32 positions and heads; callers pass index values too.
  for (auto [arg, value] : llvm::zip(block.getArguments(), args)) {
    if (value.getType().isIndex() && arg.getType().isInteger(32))
      value = arith::IndexCastOp::create(b, value.getLoc(), b.getI32Type(),
                                         value);
    mapping.map(arg, value);
  }
  for (Operation &op : block.without_terminator())
    if (op.getNumResults() == 0 ||
        !llvm::all_of(op.getResults(),
                      [&](Value r) { return mapping.contains(r); }))
      b.clone(op, mapping);
  return mapping.lookup(cast<YieldOp>(block.getTerminator()).getValue());
}

//===----------------------------------------------------------------------===//
// Warpgroup turns
//===----------------------------------------------------------------------===//

bool mlir::attn::mmasync::takesTurns(const KernelContext &ctx) {
  return ctx.specialized && ctx.W == 8;
}

/// Runs `ifFirst` on warpgroup 0 and `ifSecond` on warpgroup 1 (either may
/// be empty); the branch is uniform per warp.
static void byWarpgroup(KernelBuilder &kb, llvm::function_ref<void()> ifFirst,
                        llvm::function_ref<void()> ifSecond) {
  ImplicitLocOpBuilder &b = kb.builder();
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value first = kb.slt(tid, kb.idx(128));
  auto ifOp = scf::IfOp::create(b, first, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  if (ifFirst)
    ifFirst();
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  if (ifSecond)
    ifSecond();
}

/// The id of this computing warpgroup's turn barrier (kTurnBarrier + its
/// index), or with `other` of the other warpgroup's: arithmetic, not a
/// branch per warpgroup.
static Value getTurnBarrier(KernelBuilder &kb, bool other) {
  Value tid = gpu::ThreadIdOp::create(kb.builder(), gpu::Dimension::x);
  Value wg = kb.divu(tid, kb.idx(128));
  if (other)
    wg = kb.sub(kb.idx(1), wg);
  return kb.toI32(kb.add(wg, kb.idx(kTurnBarrier)));
}

void mlir::attn::mmasync::takeTurn(KernelBuilder &kb, const KernelContext &ctx) {
  mlir::attn::detail::namedBarrier(kb.builder(), getTurnBarrier(kb, false),
                                   ctx.threads());
}

void mlir::attn::mmasync::giveTurn(KernelBuilder &kb, const KernelContext &ctx) {
  mlir::attn::detail::namedBarrierArrive(
      kb.builder(), getTurnBarrier(kb, true), ctx.threads());
}

void mlir::attn::mmasync::startTurns(KernelBuilder &kb,
                                     const KernelContext &ctx) {
  ImplicitLocOpBuilder &b = kb.builder();
  byWarpgroup(kb, {}, [&] {
    mlir::attn::detail::namedBarrierArrive(b, kTurnBarrier, ctx.threads());
  });
}

void mlir::attn::mmasync::endTurns(KernelBuilder &kb,
                                   const KernelContext &ctx) {
  ImplicitLocOpBuilder &b = kb.builder();
  byWarpgroup(
      kb,
      [&] { mlir::attn::detail::namedBarrier(b, kTurnBarrier, ctx.threads()); },
      {});
}
