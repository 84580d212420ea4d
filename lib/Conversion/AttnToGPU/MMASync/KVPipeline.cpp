//===- KVPipeline.cpp - The K/V pipeline of the tile-level form -----------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// attn.tile.kv_range, kv_tile_count, kv_prologue, kv_next and kv_drain on
// sm_80+: K/V tiles gathered by the BSR indices with 16-byte cp.async into
// a ring of `stages` slots of shared memory.
//
// Range. The item's keys [kv_begin, kv_end) are clipped to the band its
// rows can see (for rows at positions [p_first, p_last]: keys >= p_first -
// lower, <= p_last + upper), the start aligned down to a whole tile so that
// tiles stay inside pages. Decode tiles are 16 keys at absolute multiples of
// 16 and warp w takes tiles w, w + W, ...; taller tiles are `kv` keys from
// the start, shared by all warps.
//
// Copies. A tile of R keys is R x (head_dim / 8) 16-byte chunks; copy i of
// thread t (of the warp's 32 lanes for decode, of the CTA's threads
// otherwise) is chunk (t + i * threads) of it, row-major. Keys outside the
// item's range are zero-filled (a 0-byte source), so stale or NaN cache
// contents never reach the math. Paged keys look their page up in
// kv_indices one tile ahead of the copies that need them.
//
// Order. Decode warps pipeline their own tiles, so they synchronise with
// __syncwarp only; taller tiles are shared by all warps and wait at a CTA
// barrier. Step j waits for tile j and refills the slot tile j-1 used with
// tile j + stages - 1.
//
// Warp-specialized (wgmma) kernels: the producer warpgroup issues every copy,
// and the ring runs on across items: tile j of an item is tile g = base + j
// of the kernel (base: the tiles of the items before, a per-thread counter
// the drain advances), in slot g % stages. Before issuing tile g the
// producer waits on empty[g % stages] for the release of tile g - stages; at
// step j it waits for its copies of tile g, publishes them to the async
// proxy and arrives on full[g % stages], then issues tile g + stages - 1 if
// the item has it (pipelined: g + stages - 2, see below). A consumer releases tile g - 1 (the drain releases the
// item's last) and waits on full[g % stages] (phase parity (g / stages) %
// 2). In a software-pipelined loop (isKVLoopPipelined) step j still reads
// tile j - 1 (its P V), so it releases tile g - 2, the drain the last two,
// and the producer runs one tile less ahead: issuing g + stages - 1 would
// wait for the release of g - 1, one step late, and hold up the arrival on
// full[g + 1] behind it (measured: 524 -> 423 TFLOP/s on P1). The roles never meet at a CTA barrier, so the producer fetches the
// next item's first tiles while the consumers finish the last one.
//
//===----------------------------------------------------------------------===//

#include "MMASync.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <optional>

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::mmasync;
using mlir::attn::detail::cpAsyncCommit;
using mlir::attn::detail::cpAsyncWait;
using mlir::attn::detail::syncWarp;

namespace {

/// The K/V operands of a pipeline op, unpacked: paged formats also carry
/// the elements between pages (index), the cache's page count and the word
/// a bad page index raises; strided ragged ones the elements between two
/// keys' rows and between two heads' (index; null for dense rows).
struct Caches {
  Value k, v, kvIndices, pageStride, numPages, indexError;
  Value tokenStride, headStride;
  /// kv_tma tiles: the tensor maps of k and v (!llvm.ptr).
  Value kMap, vMap;
};

/// Where copy `i` of this thread lands in a tile: its row (key within the
/// tile), its 16-byte chunk, and whether it exists (the last round of copies
/// may cover part of the threads; null when every copy exists).
struct CopySlot {
  Value row, chunk, exists;
};

CopySlot getCopySlot(KernelBuilder &kb, const KernelContext &ctx,
                     const ThreadCoords &tc, int64_t i) {
  const int64_t threads = ctx.copyThreads();
  const int64_t total = ctx.N * ctx.chunks();
  Value thread = ctx.splitKeys ? tc.lane
                 : ctx.specialized ? kb.sub(tc.tid, kb.idx(ctx.threads()))
                               : tc.tid;
  Value linear = kb.add(thread, kb.idx(i * threads));
  CopySlot slot{kb.divu(linear, ctx.chunks()), kb.remu(linear, ctx.chunks()),
                {}};
  if (ctx.specialized && threads % ctx.chunks() == 0) {
    // Copy i of a thread is `threads / chunks` rows below its copy 0, in the
    // same chunk: offsets the back end folds into the addresses, instead of
    // 16 rows and columns the producer's few registers would have to hold.
    slot.row = kb.add(kb.divu(thread, ctx.chunks()),
                      kb.idx(i * (threads / ctx.chunks())));
    slot.chunk = kb.remu(thread, ctx.chunks());
  }
  if ((i + 1) * threads > total)
    slot.exists = kb.slt(linear, kb.idx(total));
  return slot;
}

/// The first key of this thread's tile `j` of the range.
Value getTileStart(KernelBuilder &kb, const RangeValues &range, Value j) {
  return kb.add(range.firstTile, kb.mul(j, range.stride));
}

/// A page index read from kv_indices, checked: `id` (i32) if it names a page
/// of the cache, else page 0, and whether it was bad. A wrong page table
/// costs a wrong result the caller is told of (raiseBadPageIds), never a
/// read outside the cache. One unsigned compare per index (negative ones
/// included) and a select.
struct CheckedPageId {
  Value id, bad;
};

CheckedPageId checkPageId(KernelBuilder &kb, const Caches &caches, Value id) {
  ImplicitLocOpBuilder &b = kb.builder();
  Value ok = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, id,
                                   caches.numPages);
  Value bad = kb.xori(ok, arith::ConstantIntOp::create(b, 1, 1));
  return {kb.select(ok, id, kb.i32(0)), bad};
}

/// Stores a nonzero word to index_error[0] when any of `bad` is set: one
/// branch for all the indices of a tile, taken only on the bad path.
void raiseBadPageIds(KernelBuilder &kb, const Caches &caches,
                     ArrayRef<Value> bad) {
  if (bad.empty())
    return;
  ImplicitLocOpBuilder &b = kb.builder();
  Value any = bad.front();
  for (Value v : bad.drop_front())
    any = kb.ori(any, v);
  auto ifOp = scf::IfOp::create(b, any, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  memref::StoreOp::create(b, kb.i32(1), caches.indexError,
                          ValueRange{kb.idx(0)});
}

/// The checked page index of key `token` of the item where `valid` (page 0
/// and not bad elsewhere: the load is skipped, not just its result).
CheckedPageId loadPageIdIf(KernelBuilder &kb, const KernelContext &ctx,
                           const ItemValues &item, const Caches &caches,
                           Value valid, Value token) {
  ImplicitLocOpBuilder &b = kb.builder();
  auto ifOp = scf::IfOp::create(b, TypeRange{b.getI32Type(), b.getI1Type()},
                                valid, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOp.getThenRegion().front());
  CheckedPageId c = checkPageId(
      kb, caches,
      memref::LoadOp::create(
          b, caches.kvIndices,
          ValueRange{kb.add(item.kvBase, kb.divu(token, ctx.PS))}));
  scf::YieldOp::create(b, ValueRange{c.id, c.bad});
  b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  scf::YieldOp::create(
      b, ValueRange{kb.i32(0), arith::ConstantIntOp::create(b, 0, 1)});
  return {ifOp.getResult(0), ifOp.getResult(1)};
}

/// The page indices the copies of the tile starting at key `start` read
/// (none for ragged KV): one per tile when tiles lie inside pages, else one
/// per copy. `tile` and `count` guard taller tiles' lookups past the range.
SmallVector<Value> loadPageIds(KernelBuilder &kb, const KernelContext &ctx,
                               const ItemValues &item, const Caches &caches,
                               const RangeValues &range, Value tile) {
  ImplicitLocOpBuilder &b = kb.builder();
  SmallVector<Value> ids;
  int64_t count = getNumPageIds(ctx);
  if (!count)
    return ids;
  ThreadCoords tc(kb);
  Value start = getTileStart(kb, range, tile);
  const bool onePage = count == 1;
  SmallVector<Value> bad;
  if (ctx.splitKeys) {
    // Tiles past the end read the last page's index; their copies are
    // zero-filled and their keys masked.
    Value lastPage = kb.sub(item.numBlocks, kb.idx(1));
    for (int64_t i = 0; i < count; ++i) {
      Value token =
          onePage ? start : kb.add(start, getCopySlot(kb, ctx, tc, i).row);
      Value page = kb.mins(kb.divu(token, ctx.PS), lastPage);
      CheckedPageId c = checkPageId(
          kb, caches,
          memref::LoadOp::create(b, caches.kvIndices,
                                 ValueRange{kb.add(item.kvBase, page)}));
      ids.push_back(c.id);
      bad.push_back(c.bad);
    }
    raiseBadPageIds(kb, caches, bad);
    return ids;
  }
  Value inRange = kb.slt(tile, range.count);
  if (getPagesPerTile(ctx)) {
    // Whole pages: the tile's pages start / PS + i, clamped to the
    // request's last (a page past the keys has its copies zero-filled and
    // needs only an index in bounds), looked up under one branch a tile.
    auto ifOp = scf::IfOp::create(
        b, SmallVector<Type>(count + 1, b.getI32Type()), inRange,
        /*withElseRegion=*/true);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    Value firstPage = kb.divu(start, ctx.PS);
    Value lastPage = kb.sub(item.numBlocks, kb.idx(1));
    Value anyBad;
    SmallVector<Value> found;
    for (int64_t i = 0; i < count; ++i) {
      Value page = kb.mins(kb.add(firstPage, kb.idx(i)), lastPage);
      CheckedPageId c = checkPageId(
          kb, caches,
          memref::LoadOp::create(b, caches.kvIndices,
                                 ValueRange{kb.add(item.kvBase, page)}));
      found.push_back(c.id);
      anyBad = anyBad ? kb.ori(anyBad, c.bad) : c.bad;
    }
    found.push_back(arith::ExtUIOp::create(b, b.getI32Type(), anyBad));
    scf::YieldOp::create(b, found);
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(b, SmallVector<Value>(count + 1, kb.i32(0)));
    b.setInsertionPointAfter(ifOp);
    for (Value id : ifOp.getResults().drop_back())
      ids.push_back(id);
    raiseBadPageIds(kb, caches,
                    {arith::TruncIOp::create(b, b.getI1Type(),
                                             ifOp.getResults().back())});
    return ids;
  }
  // Index i's key and whether it reads one. Lane-held indices
  // (getLanePageIds): lane l's entry e = l + 32 x i is copy e / R of its
  // warp's lanes in row e % R of their round (R = 32 / chunks rows a round),
  // the row warp x R + e % R + (e / R) x rowStep of the tile (getCopySlot).
  // Otherwise index i is copy i's (or the tile's, with one page).
  const bool inLanes = getLanePageIds(ctx) > 0;
  const int64_t R = 32 / ctx.chunks();
  Value warp = inLanes ? kb.divu(kb.sub(tc.tid, kb.idx(ctx.threads())), 32)
                       : Value();
  for (int64_t i = 0; i < count; ++i) {
    Value token, valid;
    if (inLanes) {
      const int64_t rowStep = ctx.copyThreads() / ctx.chunks();
      Value e = kb.add(tc.lane, kb.idx(32 * i));
      Value row = kb.add(kb.add(kb.mul(warp, kb.idx(R)), kb.remu(e, R)),
                         kb.mul(kb.divu(e, R), kb.idx(rowStep)));
      token = kb.add(start, row);
      valid = kb.andi(kb.andi(inRange, kb.slt(token, item.kvEnd)),
                      kb.slt(e, kb.idx(R * getCopiesPerThread(ctx))));
    } else {
      token = onePage ? start : kb.add(start, getCopySlot(kb, ctx, tc, i).row);
      valid = kb.andi(inRange, kb.slt(token, item.kvEnd));
    }
    CheckedPageId c = loadPageIdIf(kb, ctx, item, caches, valid, token);
    ids.push_back(c.id);
    bad.push_back(c.bad);
  }
  raiseBadPageIds(kb, caches, bad);
  return ids;
}

/// Bytes of one 64-column panel row (the 128-byte swizzle span).
constexpr int64_t kPanelRowBytes = 128;

/// kv_tma: the whole tile starting at key `start` into ring slot `stage`,
/// by the first producer thread: per 64-column panel of K and of V, one box
/// of the tile's keys of one KV head (ragged K/V; pages holding whole
/// tiles) or one per page of the tile (the pipe's page indices `ids`, in
/// order), all counted into the slot's full barrier before they are issued.
/// The boxes land in the layout the cp.async copies write
/// (getSharedElement): the tensor maps swizzle 128 bytes, the XOR of a row's
/// 16-byte chunks with its row within the 1024-byte atom, and every box's
/// rows start at a multiple of 8 (getKVBoxRows).
void issueTileByTMA(KernelBuilder &kb, const KernelContext &ctx,
                    const ItemValues &item, const Caches &caches, Value start,
                    Value stage, ValueRange ids) {
  ImplicitLocOpBuilder &b = kb.builder();
  ThreadCoords tc(kb);
  const int64_t rows = getKVBoxRows(ctx.tile, ctx.D, ctx.launch.getFormat());
  assert(rows > 0 && ctx.N % rows == 0 && "verified by attn-outline-kernels");
  const int64_t boxes = ctx.N / rows;
  assert((!ctx.paged || boxes == 1 || int64_t(ids.size()) == boxes) &&
         "the pipe carries one page index per page of the tile");
  emitIf(b, kb.eq(tc.tid, kb.idx(ctx.threads())), [&] {
    const int64_t panels = ctx.smem.columnBlocks;
    Value full = getRingBarrier(kb, ctx, stage);
    mlir::attn::detail::mbarrierExpectTx(b, full,
                                         2 * panels * ctx.N * kPanelRowBytes);
    Value base = getSharedBase(kb);
    Value kRow = getKRow(kb, ctx, tc, stage), vRow = getVRow(kb, ctx, kRow);
    Value head = kb.toI32(item.kvHead);
    // The coordinates of box `i` (innermost first) at column `column`:
    // ragged (dim, head, token); paged NHD (dim, head, row, page), HND
    // (dim, row, head, page), the row within the page 0 unless a page
    // holds whole tiles.
    auto coords = [&](int64_t i, Value column) -> SmallVector<Value> {
      if (!ctx.paged)
        return {column, head, kb.toI32(kb.add(item.kvBase, start))};
      Value page = ids[boxes == 1 ? 0 : i];
      Value row = boxes == 1 ? kb.toI32(kb.remu(start, ctx.PS)) : kb.i32(0);
      if (ctx.nhd)
        return {column, head, row, page};
      return {column, row, head, page};
    };
    for (int64_t p = 0; p < panels; ++p) {
      Value column = kb.i32(p * 64);
      for (int64_t i = 0; i < boxes; ++i) {
        SmallVector<Value> at = coords(i, column);
        for (auto [row, map] : {std::pair(kRow, caches.kMap),
                                std::pair(vRow, caches.vMap)}) {
          Value viewRow = kb.add(row, kb.idx(p * ctx.smem.totalRows + i * rows));
          mlir::attn::detail::tmaLoad(
              b, kb.add(base, kb.mul(viewRow, kPanelRowBytes)), map, at, full);
        }
      }
    }
  });
}

/// Issues the copies of this thread's tile `tile` of the range into ring
/// slot `stage`, through the page indices `ids`.
void issueTile(KernelBuilder &kb, const KernelContext &ctx,
               const ItemValues &item, const Caches &caches,
               const RangeValues &range, Value tile, Value stage,
               ValueRange ids) {
  ImplicitLocOpBuilder &b = kb.builder();
  ThreadCoords tc(kb);
  Value tiles = getSharedTiles(kb, ctx);
  Value start = getTileStart(kb, range, tile);
  Value kRow = getKRow(kb, ctx, tc, stage), vRow = getVRow(kb, ctx, kRow);
  // Taller tiles' loop issues past the range; decode tiles past it are
  // zero-filled by the key test. Taller tiles test each copy's row against
  // the keys left from the tile's start (0 past the range), in 32 bits.
  Value eight = kb.idx(8), zero = kb.idx(0);
  Value keysLeft;
  if (!ctx.splitKeys) {
    Value left =
        kb.maxs(kb.mins(kb.sub(item.kvEnd, start), kb.idx(ctx.N)), zero);
    keysLeft = kb.toI32(kb.select(kb.slt(tile, range.count), left, zero));
  }
  // Whole tiles by TMA; a tile with keys past the item's end (or past the
  // range: none) keeps the copies below, in the else branch, which
  // zero-fill those keys. The guard leaves the builder after the branch.
  std::optional<OpBuilder::InsertionGuard> afterTMABranch;
  if (caches.kMap) {
    afterTMABranch.emplace(b);
    auto ifOp = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, keysLeft,
                                 kb.i32(ctx.N)),
        /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      issueTileByTMA(kb, ctx, item, caches, start, stage, ids);
    }
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
  }
  const int64_t Hkv = ctx.Hkv;
  // Whole pages (getPagesPerTile): copy i reads row (row0 + i x rowStep) %
  // PS = row0 + (i x rowStep) % PS of the tile's page i x rowStep / PS,
  // where row0 < rowStep is the thread's first row: one offset a thread and
  // per-copy constants the back end folds into the addresses.
  const int64_t pagesPerTile = ctx.paged ? getPagesPerTile(ctx) : 0;
  const int64_t rowStep = ctx.copyThreads() / ctx.chunks();
  // The producer's copy i is rowStep rows below copy i - 1 (getCopySlot).
  const bool rowsStride =
      ctx.specialized && ctx.copyThreads() % ctx.chunks() == 0;
  Value inPage, row0, stridedHead, stridedNext, stridedStep;
  if (rowsStride)
    row0 = kb.toI32(getCopySlot(kb, ctx, tc, 0).row);
  if (caches.tokenStride) {
    // Strided ragged rows: key t of head h at t x tokenStride + h x
    // headStride. The producer's copy i is rowStep keys below copy i - 1,
    // so its address is the last one's plus a step, one add a copy (dense
    // rows fold each copy's constant offset into its instruction instead).
    stridedHead = kb.mul(item.kvHead, caches.headStride);
    if (rowsStride) {
      CopySlot first = getCopySlot(kb, ctx, tc, 0);
      stridedNext =
          kb.add(kb.add(kb.mul(kb.add(item.kvBase, kb.add(start, first.row)),
                               caches.tokenStride),
                        stridedHead),
                 kb.mul(first.chunk, 8));
      stridedStep = kb.mul(caches.tokenStride, kb.idx(rowStep));
    }
  }
  if (pagesPerTile) {
    CopySlot first = getCopySlot(kb, ctx, tc, 0);
    Value headRow = ctx.nhd ? kb.add(kb.mul(first.row, Hkv), item.kvHead)
                            : kb.add(kb.mul(item.kvHead, ctx.PS), first.row);
    inPage = kb.add(kb.mul(headRow, ctx.D), kb.mul(first.chunk, 8));
  }
  SmallVector<Value> badIds;
  // Page indices held across the warp's lanes (getLanePageIds): this lane's
  // row in its round picks the entry of each copy.
  const bool idsInLanes = getLanePageIds(ctx) > 0;
  Value laneRow;
  if (idsInLanes)
    laneRow = kb.divu(tc.lane, ctx.chunks());
  for (int64_t i = 0, e = getCopiesPerThread(ctx); i < e; ++i) {
    CopySlot slot = getCopySlot(kb, ctx, tc, i);
    Value pos = kb.add(start, slot.row);
    Value valid;
    if (ctx.splitKeys)
      valid = kb.andi(kb.slt(pos, item.kvEnd),
                      arith::CmpIOp::create(b, arith::CmpIPredicate::sge, pos,
                                            item.kvBegin));
    else if (rowsStride)
      // row0 + i x rowStep < keys left, as row0 < keys left - i x rowStep:
      // one register (row0) for every copy, not a row each.
      valid = arith::CmpIOp::create(
          b, arith::CmpIPredicate::slt, row0,
          arith::SubIOp::create(b, keysLeft, kb.i32(i * rowStep)));
    else
      valid = arith::CmpIOp::create(b, arith::CmpIPredicate::slt,
                                    kb.toI32(slot.row), keysLeft);
    Value src;
    if (caches.tokenStride && rowsStride) {
      // Each address passes an opaque mov: seen through, LLVM made every
      // copy's address an induction variable of its own and the producer's
      // 40 registers spilled 472 bytes (P1's kernel).
      src = mlir::attn::detail::opaqueIndex(b, stridedNext);
      stridedNext = kb.add(src, stridedStep);
    } else if (caches.tokenStride) {
      Value token = pos;
      if (ctx.splitKeys)
        token = kb.maxs(kb.mins(pos, kb.sub(item.kvLen, kb.idx(1))), zero);
      src = kb.add(
          kb.add(kb.mul(kb.add(item.kvBase, token), caches.tokenStride),
                 stridedHead),
          kb.mul(slot.chunk, 8));
    } else if (pagesPerTile) {
      // Page indices are checked non-negative: zero-extended, the multiply
      // by the page stride needs no high word of the index.
      const int64_t rowInPage = (i * rowStep) % ctx.PS;
      Value id = arith::IndexCastOp::create(
          b, b.getIndexType(),
          arith::ExtUIOp::create(b, b.getI64Type(), ids[i * rowStep / ctx.PS]));
      Value pageStart = kb.add(kb.mul(id, caches.pageStride), inPage);
      src = kb.add(pageStart,
                   kb.idx(rowInPage * (ctx.nhd ? Hkv * ctx.D : ctx.D)));
    } else {
      // headRow: the (token, head) row within the request's rows (ragged)
      // or within its dense page, which starts pageStart elements in.
      Value headRow, pageStart;
      if (!ctx.paged) {
        // Zero-filled copies still name an address: a decode warp keeps it
        // inside the request's rows.
        Value token = pos;
        if (ctx.splitKeys)
          token = kb.maxs(kb.mins(pos, kb.sub(item.kvLen, kb.idx(1))), zero);
        headRow =
            kb.add(kb.mul(kb.add(item.kvBase, token), Hkv), item.kvHead);
      } else {
        Value id;
        if (idsInLanes) {
          const int64_t entry = i * (32 / ctx.chunks());
          id = kb.shuffleIdx(ids[entry / 32],
                             kb.add(laneRow, kb.idx(entry % 32)));
        } else if (ids.empty()) {
          // The producer's page of this copy, looked up now; only where
          // the copy reads a key.
          CheckedPageId c = loadPageIdIf(kb, ctx, item, caches, valid, pos);
          id = c.id;
          badIds.push_back(c.bad);
        } else {
          id = ids[ids.size() == 1 ? 0 : i];
        }
        pageStart = kb.mul(kb.toIndex(id), caches.pageStride);
        Value offset = kb.remu(
            idsInLanes ? mlir::attn::detail::opaqueIndex(b, pos) : pos, ctx.PS);
        headRow = ctx.nhd ? kb.add(kb.mul(offset, Hkv), item.kvHead)
                          : kb.add(kb.mul(item.kvHead, ctx.PS), offset);
      }
      src = kb.add(kb.mul(headRow, ctx.D), kb.mul(slot.chunk, 8));
      if (pageStart)
        src = kb.add(pageStart, src);
    }
    Value count = kb.select(valid, eight, zero);
    auto copy = [&] {
      for (auto [row0, cache] :
           {std::pair(kRow, caches.k), std::pair(vRow, caches.v)}) {
        SharedElement dst =
            getSharedElement(kb, ctx, kb.add(row0, slot.row), slot.chunk);
        nvgpu::DeviceAsyncCopyOp::create(
            b, tiles, ValueRange{dst.row, dst.col}, cache, ValueRange{src}, b.getIndexAttr(8), count, b.getUnitAttr());
      }
    };
    if (!slot.exists) {
      copy();
      continue;
    }
    auto ifOp = scf::IfOp::create(b, slot.exists, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    copy();
  }
  raiseBadPageIds(kb, caches, badIds);
}

template <typename Adaptor>
Caches getCaches(KernelBuilder &kb, Adaptor adaptor) {
  auto first = [](ValueRange r) { return r.empty() ? Value() : r.front(); };
  auto index = [&](ValueRange r) {
    return r.empty() ? Value() : kb.toIndex(r.front());
  };
  return {first(adaptor.getKeyCache()),    first(adaptor.getValueCache()),
          first(adaptor.getKvIndices()),   index(adaptor.getPageStride()),
          first(adaptor.getNumPages()),    first(adaptor.getIndexError()),
          index(adaptor.getTokenStride()), index(adaptor.getHeadStride()),
          first(adaptor.getKeyMap()),      first(adaptor.getValueMap())};
}

//===----------------------------------------------------------------------===//
// The ring of warp-specialized kernels
//===----------------------------------------------------------------------===//

// A CTA's tile counter fits in 32 bits, so its slot and phase are taken in
// i32: with three stages the division is a 32-bit multiply-high, where in
// index arithmetic it was a 64-bit one.

/// The ring slot (index) of the CTA's `tile`-th K/V tile.
Value getRingSlot(KernelBuilder &kb, const KernelContext &ctx, Value tile) {
  return kb.toIndex(kb.remu(kb.toI32(tile), kb.i32(ctx.S)));
}

/// Phase parity of the `tile`-th use of its slot, as i32.
Value getRingParity(KernelBuilder &kb, const KernelContext &ctx, Value tile) {
  return kb.andi(kb.divu(kb.toI32(tile), kb.i32(ctx.S)), kb.i32(1));
}

Value getFullBarrier(KernelBuilder &kb, const KernelContext &ctx, Value tile) {
  return getRingBarrier(kb, ctx, getRingSlot(kb, ctx, tile));
}

Value getEmptyBarrier(KernelBuilder &kb, const KernelContext &ctx,
                      Value tile) {
  return getRingBarrier(kb, ctx,
                        kb.add(getRingSlot(kb, ctx, tile), kb.idx(ctx.S)));
}

/// The producer: item tile `tile` (kernel tile `base + tile`) into its slot
/// once the slot's previous tile is released, if the item has it; one copy
/// group either way, so wait_group counts steps.
void produceTile(KernelBuilder &kb, const KernelContext &ctx,
                 const ItemValues &item, const Caches &caches,
                 const RangeValues &range, Value base, Value tile,
                 ValueRange ids) {
  ImplicitLocOpBuilder &b = kb.builder();
  Value g = kb.add(base, tile);
  emitIf(b, kb.slt(tile, range.count), [&] {
    Value reused = kb.sub(g, kb.idx(ctx.S));
    emitIf(b, kb.sgt(g, kb.idx(ctx.S - 1)), [&] {
      mlir::attn::detail::mbarrierWait(b, getEmptyBarrier(kb, ctx, reused),
                                       getRingParity(kb, ctx, reused));
    });
    issueTile(kb, ctx, item, caches, range, tile, getRingSlot(kb, ctx, g),
              ids);
  });
  cpAsyncCommit(b);
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

struct KVRangeLowering : public OpConversionPattern<TileKVRangeOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileKVRangeOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    KernelContext ctx = KernelContext::get(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    ItemValues item = ItemValues::unflatten(adaptor.getItem());
    Value zero = kb.idx(0);
    const int64_t align = ctx.N;
    auto token = [&](Value row) {
      return ctx.P == 1 ? row : kb.divu(row, ctx.P);
    };
    Value firstPos = kb.add(item.posOffset, token(item.rowBegin));
    Value lastPos = kb.add(
        item.posOffset,
        token(kb.sub(kb.add(item.rowBegin, item.rowCount), kb.idx(1))));
    RangeValues range;
    range.begin = item.kvBegin;
    range.end = item.kvEnd;
    range.safeLo = item.kvBegin;
    // Keys >= p - lower: the lowest the first row sees starts the range
    // (aligned down to a whole tile), the lowest the last row sees starts the
    // interior. The planner clips an item's kv_begin to that same lowest key
    // (unaligned), so max(kv_begin, aligned) would start the tiles off a page
    // boundary: keys below it are masked for every row, so the range starts
    // at the aligned key unless kv_begin is above it (a later chunk's start,
    // which the planner cuts at whole pages and tiles).
    auto clipBelow = [&](Value lower, Value active) {
      Value lo = kb.maxs(kb.sub(firstPos, lower), zero);
      Value aligned = kb.mul(kb.divu(lo, align), align);
      Value begin = kb.select(kb.sgt(range.begin, lo), range.begin, aligned);
      Value safeLo = kb.maxs(range.begin, kb.sub(lastPos, lower));
      range.begin = active ? kb.select(active, begin, range.begin) : begin;
      range.safeLo = active ? kb.select(active, safeLo, range.safeLo) : safeLo;
    };
    if (std::optional<int64_t> lower = op.getLower())
      clipBelow(kb.idx(*lower), {});
    if (Value bound = adaptor.getLowerBound().empty()
                          ? Value()
                          : adaptor.getLowerBound().front()) {
      // A negative run-time bound means no bound.
      clipBelow(kb.toIndex(bound),
                arith::CmpIOp::create(b, arith::CmpIPredicate::sge, bound,
                                      kb.i32(0)));
    }
    range.safeHi = range.end;
    if (std::optional<int64_t> upper = op.getUpper()) {
      // Keys <= p + upper: the last row's end ends the range, the first
      // row's the interior.
      range.end = kb.mins(range.end, kb.add(lastPos, kb.idx(*upper + 1)));
      range.safeHi = kb.mins(range.end, kb.add(firstPos, kb.idx(*upper + 1)));
    }
    Value nonEmpty = kb.sgt(range.end, range.begin);
    if (ctx.splitKeys) {
      // 16-key tiles at absolute multiples of 16; warp w runs tiles w,
      // w + W, ... of the range.
      ThreadCoords tc(kb);
      const int64_t T = ctx.N, W = ctx.W;
      Value tileBase = kb.divu(range.begin, T);
      Value tileEnd = kb.divu(kb.add(range.end, kb.idx(T - 1)), T);
      Value numTiles = kb.select(nonEmpty, kb.sub(tileEnd, tileBase), zero);
      range.count = kb.select(
          kb.sgt(numTiles, tc.warp),
          kb.divu(kb.add(kb.sub(numTiles, tc.warp), kb.idx(W - 1)), W), zero);
      range.firstTile = kb.mul(kb.add(tileBase, tc.warp), T);
      range.stride = kb.idx(W * T);
    } else {
      Value span = kb.select(nonEmpty, kb.sub(range.end, range.begin), zero);
      range.count = kb.divu(kb.add(span, kb.idx(ctx.N - 1)), ctx.N);
      range.firstTile = range.begin;
      range.stride = kb.idx(ctx.N);
    }
    rewriter.replaceOpWithMultiple(op, {range.flatten()});
    return success();
  }
};

struct KVTileCountLowering : public OpConversionPattern<TileKVTileCountOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileKVTileCountOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, RangeValues::unflatten(adaptor.getRange()).count);
    return success();
  }
};

struct KVPrologueLowering : public OpConversionPattern<TileKVPrologueOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileKVPrologueOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    KernelContext ctx = KernelContext::get(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    ItemValues item = ItemValues::unflatten(adaptor.getItem());
    RangeValues range = RangeValues::unflatten(adaptor.getRange());
    Caches caches = getCaches(kb, adaptor);
    if (ctx.specialized && !isProducerOp(op)) {
      // Consumers copy nothing; their pipe carries no page indices.
      SmallVector<Value> none(getNumPageIds(ctx), kb.i32(0));
      rewriter.replaceOpWithMultiple(op, {PipeValues{range, none}.flatten()});
      return success();
    }
    // Fill stages - 1 slots.
    SmallVector<Value> ids =
        loadPageIds(kb, ctx, item, caches, range, kb.idx(0));
    if (ctx.specialized) {
      // Fill the slots the producer may run ahead by.
      Value base = loadRingBase(kb, op);
      for (int64_t s = 0; s < ctx.ringAhead(); ++s) {
        produceTile(kb, ctx, item, caches, range, base, kb.idx(s), ids);
        ids = loadPageIds(kb, ctx, item, caches, range, kb.idx(s + 1));
      }
      rewriter.replaceOpWithMultiple(op, {PipeValues{range, ids}.flatten()});
      return success();
    }
    for (int64_t s = 0; s + 1 < ctx.S; ++s) {
      issueTile(kb, ctx, item, caches, range, kb.idx(s), kb.idx(s), ids);
      cpAsyncCommit(b);
      ids = loadPageIds(kb, ctx, item, caches, range, kb.idx(s + 1));
    }
    rewriter.replaceOpWithMultiple(op, {PipeValues{range, ids}.flatten()});
    return success();
  }
};

struct KVNextLowering : public OpConversionPattern<TileKVNextOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileKVNextOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    KernelContext ctx = KernelContext::get(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    ItemValues item = ItemValues::unflatten(adaptor.getItem());
    PipeValues pipe = PipeValues::unflatten(adaptor.getPipe());
    Caches caches = getCaches(kb, adaptor);
    const RangeValues &range = pipe.range;
    Value j = adaptor.getIteration().front();
    const int64_t S = ctx.S;
    Value stage = kb.remu(j, S);
    Value ahead = kb.add(j, kb.idx(S - 1));
    auto refill = [&] {
      issueTile(kb, ctx, item, caches, range, ahead, kb.remu(ahead, S),
                pipe.pageIds);
      cpAsyncCommit(b);
      return loadPageIds(kb, ctx, item, caches, range, kb.add(j, kb.idx(S)));
    };
    SmallVector<Value> nextIds;
    if (ctx.specialized) {
      Value base = loadRingBase(kb, op);
      Value g = kb.add(base, j);
      stage = getRingSlot(kb, ctx, g);
      if (isProducerOp(op)) {
        // Publish tile g, then issue the item's tile j + ringAhead (once
        // tile g - ringLag is released, which the computing warps do before
        // waiting for tile g).
        const int64_t A = ctx.ringAhead();
        cpAsyncWait(b, A - 1);
        publishSharedWrites(kb, ctx);
        mlir::attn::detail::mbarrierArrive(b, getFullBarrier(kb, ctx, g));
        produceTile(kb, ctx, item, caches, range, base, kb.add(j, kb.idx(A)),
                    pipe.pageIds);
        nextIds =
            loadPageIds(kb, ctx, item, caches, range, kb.add(j, kb.idx(A + 1)));
      } else {
        // Release tile g - 1 of this item (pipelined: g - 2, whose P V the
        // last step awaited), wait for tile g.
        const int64_t lag = ctx.ringLag();
        emitIf(b, kb.sgt(j, kb.idx(lag - 1)), [&] {
          mlir::attn::detail::mbarrierArrive(
              b, getEmptyBarrier(kb, ctx, kb.sub(g, kb.idx(lag))));
        });
        mlir::attn::detail::mbarrierWait(b, getFullBarrier(kb, ctx, g),
                                         getRingParity(kb, ctx, g));
        nextIds = pipe.pageIds;
      }
    } else if (ctx.splitKeys) {
      // Every lane is past the last step's reads of the slot refilled now.
      syncWarp(b);
      nextIds = refill();
      cpAsyncWait(b, S - 1);
      syncWarp(b);
    } else if (S >= 2) {
      // Tile j has landed for every thread, and every warp is past tile
      // j - 1, whose slot takes tile j + stages - 1.
      cpAsyncWait(b, S - 2);
      publishSharedWrites(kb, ctx);
      gpu::BarrierOp::create(b);
    } else {
      // One slot: every warp is done with tile j - 1 before tile j lands in
      // its place.
      gpu::BarrierOp::create(b);
      nextIds = refill();
      cpAsyncWait(b, 0);
      publishSharedWrites(kb, ctx);
      gpu::BarrierOp::create(b);
    }
    Value start = getTileStart(kb, range, j);
    Region &transform = op.getKeyTransform();
    if (!transform.empty() && !(ctx.specialized && isProducerOp(op))) {
      ThreadCoords tc(kb);
      Value tiles = getSharedTiles(kb, ctx);
      transformRows(kb, ctx, tiles, ctx.splitKeys ? tc.lane : tc.tid,
                    ctx.splitKeys ? 32 : ctx.threads(),
                    getKRow(kb, ctx, tc, stage), ctx.N,
                    [&](Value x, Value pair, Value dim, Value row) {
                      return inlineHook(b, transform,
                                        {x, pair, dim, kb.add(start, row),
                                         item.kvHead});
                    });
      if (ctx.splitKeys) {
        syncWarp(b);
      } else if (ctx.specialized) {
        publishSharedWrites(kb, ctx);
        mlir::attn::detail::namedBarrier(b, kConsumerBarrier, ctx.threads());
      } else {
        publishSharedWrites(kb, ctx);
        gpu::BarrierOp::create(b);
      }
    }
    if (!ctx.splitKeys && !ctx.specialized && S >= 2)
      nextIds = refill();
    // Only tiles that leave the range's interior can meet a masked key.
    Value needsMask =
        ctx.splitKeys
            ? arith::ConstantIntOp::create(b, 1, 1).getResult()
            : kb.ori(kb.slt(start, range.safeLo),
                     kb.sgt(kb.add(start, kb.idx(ctx.N)), range.safeHi));
    rewriter.replaceOpWithMultiple(
        op, {SmallVector<Value>{stage, start, needsMask},
             PipeValues{range, nextIds}.flatten()});
    return success();
  }
};

struct KVDrainLowering : public OpConversionPattern<TileKVDrainOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileKVDrainOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    KernelContext ctx = KernelContext::get(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    if (ctx.specialized) {
      // The consumers release the item's tiles they still hold (its last
      // ringLag, or fewer when it has fewer; the drain runs only for items
      // with a tile); both roles count the item's tiles into the ring's base.
      KernelBuilder kb(b);
      RangeValues range = PipeValues::unflatten(adaptor.getPipe()).range;
      Value base = loadRingBase(kb, op);
      Value next = kb.add(base, range.count);
      if (!isProducerOp(op)) {
        auto release = [&](int64_t fromEnd) {
          mlir::attn::detail::mbarrierArrive(
              b, getEmptyBarrier(kb, ctx, kb.sub(next, kb.idx(fromEnd))));
        };
        release(1);
        for (int64_t i = 2; i <= ctx.ringLag(); ++i)
          emitIf(b, kb.sgt(range.count, kb.idx(i - 1)), [&] { release(i); });
      }
      storeRingBase(kb, op, next);
      rewriter.eraseOp(op);
      return success();
    }
    // Copies issued past the last tile must land before the slots are
    // reused.
    cpAsyncWait(b, 0);
    if (ctx.splitKeys)
      syncWarp(b);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::attn::mmasync::populateKVPipelinePatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<KVRangeLowering, KVTileCountLowering, KVPrologueLowering,
               KVNextLowering, KVDrainLowering>(converter,
                                                patterns.getContext());
}
