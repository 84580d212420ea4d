//===- PrefillTiles.cpp - Q and K/V tiles of the prefill kernel -----------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Moving tiles into shared memory and out as mma fragments.
//
// Shared memory is one [rows][headDim] element view: Q rows [0, tileQ), the K
// ring [tileQ, tileQ + S*N), the V ring after it. Row r stores its 16-byte
// chunk c at chunk position c ^ (r % 8), so the cp.async stores of 8
// consecutive rows and the ldmatrix reads of 8 rows of one chunk column land
// in 8 different bank groups (every ring base is a multiple of 8 rows).
//
// Copies: thread `tid` moves chunk tid % (D/8) of rows tid / (D/8) + i *
// threads / (D/8). Keys past kv_end (and tiles past the last) are zero-filled
// by a 0-byte source, so stale or NaN cache contents never reach the math.
// Paged keys look their page up in kv_indices one tile ahead of the copies.
//
//===----------------------------------------------------------------------===//

#include "PrefillEmitter.h"
#include "attn/Conversion/AttnToGPU/VariantHooks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace ::attn;
using namespace ::attn::detail;

Value PrefillEmitter::swizzledCol(Value row, Value chunk) {
  return kb.mul(kb.xori(chunk, kb.andi(row, kb.idx(7))), 8);
}

//===----------------------------------------------------------------------===//
// Q
//===----------------------------------------------------------------------===//

void PrefillEmitter::issueQueryTile() {
  const int64_t chunks = D / 8, threads = spec.getThreads();
  const int64_t rowsPerStep = threads / chunks;
  Value ch = kb.remu(tid, chunks), row0 = kb.divu(tid, chunks);
  Value lastRow = kb.sub(rowCount, kb.idx(1));
  Value eight = kb.idx(8), zero = kb.idx(0);
  for (int64_t i = 0; i < Q / rowsPerStep; ++i) {
    Value row = kb.add(row0, kb.idx(i * rowsPerStep));
    // Rows past row_count read the item's last row and are zero-filled.
    Value src = kb.mins(row, lastRow);
    Value token = kb.add(qoStart, rowToken(src));
    Value qRow = kb.add(kb.mul(token, spec.numQoHeads), rowHead(src));
    Value count = kb.select(kb.slt(row, rowCount), eight, zero);
    nvgpu::DeviceAsyncCopyOp::create(
        b, tiles, ValueRange{row, swizzledCol(row, ch)}, q,
        ValueRange{kb.add(kb.mul(qRow, D), kb.mul(ch, 8))}, b.getIndexAttr(8),
        count, b.getUnitAttr());
  }
}

SmallVector<Value, 4> PrefillEmitter::queryFragment(int64_t kStep) {
  // Matrices (rows 0-7, k 0-7) (rows 8-15, k 0-7) (rows 0-7, k 8-15)
  // (rows 8-15, k 8-15) are a0..a3 of mma's A operand.
  Value row = kb.add(kb.mul(warp, 16),
                     kb.add(kb.remu(lane, 8), kb.mul(kb.remu(kb.divu(lane, 8), 2), 8)));
  Value chunk = kb.add(kb.divu(lane, 16), kb.idx(2 * kStep));
  return ldmatrixX4(b, tiles, row, swizzledCol(row, chunk),
                    /*transpose=*/false);
}

void PrefillEmitter::loadQueryFragments() {
  qFrag.clear();
  for (int64_t ks = 0; ks < D / 16; ++ks)
    qFrag.push_back(queryFragment(ks));
}

//===----------------------------------------------------------------------===//
// K / V
//===----------------------------------------------------------------------===//

SmallVector<Value> PrefillEmitter::loadPageIds(Value tile) {
  SmallVector<Value> ids;
  if (spec.indexing != KVIndexing::Paged)
    return ids;
  const int64_t chunks = D / 8, threads = spec.getThreads();
  const int64_t rowsPerStep = threads / chunks;
  // A tile inside one page (page size a multiple of the tile; chunk starts
  // are multiples of the tile) needs one id; otherwise one per copy.
  const bool onePage = PS % N == 0;
  const int64_t count = onePage ? 1 : N / rowsPerStep;
  Value tileStart = kb.add(kvBegin, kb.mul(tile, N));
  Value inRange = kb.slt(tile, numTiles);
  Value row0 = kb.divu(tid, chunks);
  for (int64_t i = 0; i < count; ++i) {
    Value token = onePage ? tileStart
                          : kb.add(tileStart,
                                   kb.add(row0, kb.idx(i * rowsPerStep)));
    Value valid = kb.andi(inRange, kb.slt(token, kvEnd));
    auto ifOp = scf::IfOp::create(b, b.getI32Type(), valid,
                                  /*withElseRegion=*/true);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    Value idx = kb.add(kvBase, kb.divu(token, PS));
    scf::YieldOp::create(b, ValueRange{memref::LoadOp::create(
                                b, kvIndices, ValueRange{idx})});
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(b, ValueRange{kb.i32(0)});
    b.setInsertionPointAfter(ifOp);
    ids.push_back(ifOp.getResult(0));
  }
  return ids;
}

void PrefillEmitter::issueKVTile(Value tile, Value stage, ValueRange ids) {
  const int64_t chunks = D / 8, threads = spec.getThreads();
  const int64_t rowsPerStep = threads / chunks;
  const int64_t Hkv = spec.numKVHeads;
  Value ch = kb.remu(tid, chunks), row0 = kb.divu(tid, chunks);
  Value tileStart = kb.add(kvBegin, kb.mul(tile, N));
  Value inRange = kb.slt(tile, numTiles);
  Value kRow = kb.add(kb.idx(Q), kb.mul(stage, N));
  Value vRow = kb.add(kRow, kb.idx(S * N));
  Value eight = kb.idx(8), zero = kb.idx(0);
  for (int64_t i = 0; i < N / rowsPerStep; ++i) {
    Value local = kb.add(row0, kb.idx(i * rowsPerStep));
    Value token = kb.add(tileStart, local);
    Value valid = kb.andi(inRange, kb.slt(token, kvEnd));
    Value headRow;
    if (spec.indexing == KVIndexing::Ragged) {
      headRow = kb.add(kb.mul(kb.add(kvBase, token), Hkv), kvHead);
    } else {
      Value page = kb.toIndex(ids[ids.size() == 1 ? 0 : i]);
      Value offset = kb.remu(token, PS);
      if (spec.layout == KVLayout::NHD)
        headRow = kb.add(kb.mul(kb.add(kb.mul(page, PS), offset), Hkv), kvHead);
      else
        headRow = kb.add(kb.mul(kb.add(kb.mul(page, Hkv), kvHead), PS), offset);
    }
    Value src = kb.add(kb.mul(headRow, D), kb.mul(ch, 8));
    Value col = swizzledCol(local, ch);
    Value count = kb.select(valid, eight, zero);
    nvgpu::DeviceAsyncCopyOp::create(
        b, tiles, ValueRange{kb.add(kRow, local), col}, kCache,
        ValueRange{src}, b.getIndexAttr(8), count, b.getUnitAttr());
    nvgpu::DeviceAsyncCopyOp::create(
        b, tiles, ValueRange{kb.add(vRow, local), col}, vCache,
        ValueRange{src}, b.getIndexAttr(8), count, b.getUnitAttr());
  }
}

//===----------------------------------------------------------------------===//
// In-place query / key transforms (variant hooks, e.g. RoPE)
//===----------------------------------------------------------------------===//

namespace {
/// Applies `transform(x, xPair, dim, row)` to every element of rows
/// [rowBase, rowBase + rows) of the tile view, pairing dim d with d + D/2
/// (rotate-half). Each thread owns both elements of its pairs, so no barrier
/// is needed between the reads and the writes. A loop, not unrolled here:
/// a hook such as RoPE is tens of ops with sin/cos, and 16-32 inlined copies
/// per tile cost seconds of LLVM and ptxas time for no speed.
template <typename Fn>
void transformRows(ImplicitLocOpBuilder &b, KernelBuilder &kb, Value tiles,
                   Value tid, int64_t threads, int64_t D, Type eltType,
                   Value rowBase, int64_t rows,
                   llvm::function_ref<Value(Value, Value)> colOf, Fn transform) {
  const int64_t half = D / 2;
  Type f32 = b.getF32Type();
  auto loop = scf::ForOp::create(b, kb.idx(0), kb.idx(rows * half),
                                 kb.idx(threads));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  {
    Value item = kb.add(tid, loop.getInductionVar());
    Value row = kb.divu(item, half), d = kb.remu(item, half);
    Value d2 = kb.add(d, kb.idx(half));
    Value smemRow = kb.add(rowBase, row);
    auto colFor = [&](Value dim) {
      return kb.add(colOf(row, kb.divu(dim, 8)), kb.remu(dim, 8));
    };
    Value c1 = colFor(d), c2 = colFor(d2);
    Value x = arith::ExtFOp::create(
        b, f32, memref::LoadOp::create(b, tiles, ValueRange{smemRow, c1}).getResult());
    Value y = arith::ExtFOp::create(
        b, f32, memref::LoadOp::create(b, tiles, ValueRange{smemRow, c2}).getResult());
    Value nx = transform(x, y, d, row);
    Value ny = transform(y, x, d2, row);
    memref::StoreOp::create(b, arith::TruncFOp::create(b, eltType, nx), tiles,
                            ValueRange{smemRow, c1});
    memref::StoreOp::create(b, arith::TruncFOp::create(b, eltType, ny), tiles,
                            ValueRange{smemRow, c2});
  }
}
} // namespace

void PrefillEmitter::transformQueryTile() {
  if (!hooks || !hooks->has(mlir::attn::HookKind::query_transform))
    return;
  auto colOf = [&](Value row, Value chunk) { return swizzledCol(row, chunk); };
  transformRows(b, kb, tiles, tid, spec.getThreads(), D, eltType, kb.idx(0), Q,
                colOf, [&](Value x, Value y, Value dim, Value row) {
                  return hooks->emitQueryTransform(b, b.getLoc(), x, y, dim,
                                                   rowPos(row), rowHead(row));
                });
  gpu::BarrierOp::create(b);
}

void PrefillEmitter::transformKeyTile(Value tile, Value stage) {
  if (!hooks || !hooks->has(mlir::attn::HookKind::key_transform))
    return;
  Value tileStart = kb.add(kvBegin, kb.mul(tile, N));
  Value kRow = kb.add(kb.idx(Q), kb.mul(stage, N));
  auto colOf = [&](Value row, Value chunk) { return swizzledCol(row, chunk); };
  transformRows(b, kb, tiles, tid, spec.getThreads(), D, eltType, kRow, N,
                colOf, [&](Value x, Value y, Value dim, Value row) {
                  return hooks->emitKeyTransform(b, b.getLoc(), x, y, dim,
                                                 kb.add(tileStart, row),
                                                 kvHead);
                });
  gpu::BarrierOp::create(b);
}
