//===- RowKernels.cpp - The row kernels' tile ops -------------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The row kernels are memory-bound: every byte is read once and written
// once, so they are plain vector loads and stores, the same on every chip
// (this set serves sm_80 to sm_120). A row (one token's head, head_dim
// elements) is spread over head_dim / 8 threads, 8 elements (16 bytes at
// 2-byte types) each; a CTA of T threads holds R = T / (head_dim / 8) rows
// at a time (threads past R whole rows idle), and a loop step takes the
// contract's merge_rows, merge_rows / R such groups (each thread's loads of
// all of them in flight at once); the grid strides over the steps.
//
// merge_states: each thread loads its 8 elements and the LSE of every
// state, kGroup states' loads in flight at once, merged online across
// groups (one group for the common two-state merge):
//   m = max s_i, w_i = 2^(s_i - m), o = sum w_i v_i / sum w_i,
//   lse = m + log2(sum w_i)         (all -inf: o = 0, lse = -inf)
// in f32, then narrowed to the element type.
//
// append_kv: each thread copies its 8 elements of the row's key and value
// into the row's page slot. The index arrays are read, and checked, per
// row: a row whose request, position or page is out of range writes
// nothing, and its first thread counts it in dropped[0] (atomically), so a
// bad page table never writes outside the cache.
//
// copy_indices: rows are words; the pairs' words form one index space
// (pair i's after the counts of the ones before it), one word a thread per
// step of the grid-strided loop, and a chain of range tests finds a word's
// pair. The arrays are a step's plan indices and page table: a few
// thousand words, where one launch, not the copy, is the cost.
//
// copy_by_table: the same loop, with each pair's count and addresses read
// when the kernel runs from a table (in pinned host memory), which a CTA's
// first threads copy into shared memory once. A CUDA graph that captures
// it copies, at every replay, what the step's plan() wrote there.
//
//===----------------------------------------------------------------------===//

#include "MMASync.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::attn::mmasync;

namespace {

/// States whose loads a thread issues together.
constexpr int64_t kGroup = 4;

/// One of the rows a thread holds a part of in a loop step.
struct RowPlace {
  Value exists; ///< i1: the row is one of the num_rows (else clamped, unused)
  Value token;  ///< row / heads (of the clamped row: always in bounds)
  Value head;   ///< row % heads
  Value chunk;  ///< which 8 elements of the row this thread holds
  Value offset; ///< chunk * 8
};

/// The grid-strided loop of a row kernel. Each step, CTA c takes the
/// merge_rows / R consecutive row groups of its step; for each of the
/// thread's rows
/// `load` runs first (every row's, so their loads overlap; it may load at
/// the clamped row of a row that does not exist), then `finish` inside the
/// row's existence test, with what its `load` returned.
template <typename Load, typename Finish>
void buildRowLoop(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                  LaunchAttr launch, Value numRows, Value heads, Load load,
                  Finish finish) {
  const int64_t chunks = launch.getHeadDim() / 8;
  const int64_t R = launch.getThreads() / chunks;
  const int64_t rowsPerStep = launch.getMergeRows() / R; // verified whole
  const bool idle = R * chunks != launch.getThreads();
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value cta = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value grid = gpu::GridDimOp::create(b, gpu::Dimension::x);
  Value part = kb.divu(tid, chunks);
  Value chunk = kb.remu(tid, chunks);
  Value rows = kb.toIndex(numRows);
  Value headCount = kb.toIndex(heads);
  Value groups = kb.divu(kb.add(rows, kb.idx(R - 1)), kb.idx(R));
  Value lastRow = kb.sub(rows, kb.idx(1));
  auto loop = scf::ForOp::create(b, kb.mul(cta, rowsPerStep), groups,
                                 kb.mul(grid, rowsPerStep));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  SmallVector<RowPlace> places;
  SmallVector<SmallVector<Value>> loaded;
  for (int64_t u = 0; u < rowsPerStep; ++u) {
    Value row = kb.add(kb.mul(kb.add(loop.getInductionVar(), u), R), part);
    Value exists = kb.slt(row, rows);
    if (idle)
      exists = kb.andi(exists, kb.slt(part, kb.idx(R)));
    // Rows are < 2^31 (the launch checks): a 32-bit division, not 64.
    Value clamped = kb.mins(row, lastRow);
    Value token = kb.toIndex(kb.divu(kb.toI32(clamped), heads));
    Value head = kb.sub(clamped, kb.mul(token, headCount));
    places.push_back({exists, token, head, chunk, kb.mul(chunk, 8)});
    loaded.push_back(load(places.back()));
  }
  for (auto [place, values] : llvm::zip(places, loaded)) {
    auto ifRow = scf::IfOp::create(b, place.exists, false);
    OpBuilder::InsertionGuard rowGuard(b);
    b.setInsertionPointToStart(&ifRow.getThenRegion().front());
    finish(place, values);
  }
}

Value toIndex64(ImplicitLocOpBuilder &b, Value i64) {
  return arith::IndexCastOp::create(b, b.getIndexType(), i64);
}

/// Elements `index` .. + 7 of `buffer`, in its element type (widened only
/// where used, so the rows in flight hold 16 bytes each, not 32).
Value loadChunk(ImplicitLocOpBuilder &b, Value buffer, Value index) {
  Type elt = cast<MemRefType>(buffer.getType()).getElementType();
  auto load = vector::LoadOp::create(b, VectorType::get({8}, elt), buffer,
                                     ValueRange{index});
  load.setAlignment(16);
  return load;
}

/// A chunk as 8 x f32.
Value widen(ImplicitLocOpBuilder &b, Value chunk) {
  auto type = cast<VectorType>(chunk.getType());
  if (type.getElementType().isF32())
    return chunk;
  return arith::ExtFOp::create(b, VectorType::get({8}, b.getF32Type()), chunk);
}

void storeChunk(ImplicitLocOpBuilder &b, Value f32x8, Value buffer,
                Value index) {
  Type elt = cast<MemRefType>(buffer.getType()).getElementType();
  Value value = elt.isF32() ? f32x8
                            : Value(arith::TruncFOp::create(
                                  b, VectorType::get({8}, elt), f32x8));
  auto store = vector::StoreOp::create(b, value, buffer, ValueRange{index});
  store.setAlignment(16);
}

struct MergeStatesLowering : public OpConversionPattern<TileMergeStatesOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileMergeStatesOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    LaunchAttr launch = op.getLaunch();
    const int64_t D = launch.getHeadDim();
    auto f32x8 = VectorType::get({8}, b.getF32Type());
    auto splat = [&](Value x) { return vector::BroadcastOp::create(b, f32x8, x); };
    Value vStride = toIndex64(b, op.getStateStride());
    Value sStride = toIndex64(b, op.getLseStride());
    Value oStride = toIndex64(b, op.getOutputStride());
    Value lseStride = toIndex64(b, op.getMergedLseStride());
    Value negInf = kb.negInf(), zero = kb.f32(0.0f);

    ValueRange states = op.getStates(), lses = op.getLses();
    const size_t firstGroup = std::min<size_t>(states.size(), kGroup);
    auto loadGroup = [&](const RowPlace &r, size_t begin, size_t end) {
      Value vIndex =
          kb.add(kb.add(kb.mul(r.token, vStride), kb.mul(r.head, D)), r.offset);
      Value sIndex = kb.add(kb.mul(r.token, sStride), r.head);
      SmallVector<Value> out; // LSEs, then chunks
      for (size_t i = begin; i < end; ++i)
        out.push_back(memref::LoadOp::create(b, lses[i], ValueRange{sIndex}));
      for (size_t i = begin; i < end; ++i)
        out.push_back(loadChunk(b, states[i], vIndex));
      return out;
    };
    // The first group's loads of every row are issued before any math.
    auto load = [&](const RowPlace &r) { return loadGroup(r, 0, firstGroup); };
    auto finish = [&](const RowPlace &r, ArrayRef<Value> firstValues) {
      // m, sum and acc over the states so far.
      Value m, sum, acc, first, firstLse;
      for (size_t g = 0; g < states.size(); g += kGroup) {
        size_t end = std::min(states.size(), g + kGroup);
        SmallVector<Value> values =
            g == 0 ? SmallVector<Value>(firstValues) : loadGroup(r, g, end);
        size_t count = end - g;
        ArrayRef<Value> ls = ArrayRef<Value>(values).take_front(count);
        SmallVector<Value> vs;
        for (Value raw : ArrayRef<Value>(values).drop_front(count))
          vs.push_back(widen(b, raw));
        if (g == 0) {
          first = vs.front();
          firstLse = ls.front();
        }
        Value mNew = g == 0 ? ls.front() : m;
        for (Value l : ls.drop_front(g == 0 ? 1 : 0))
          mNew = kb.fmax(mNew, l);
        // With every state so far -inf, weigh against 0: all weights 0.
        Value mUse = kb.select(kb.foeq(mNew, negInf), zero, mNew);
        Value newSum, newAcc;
        if (g != 0) {
          Value scale = kb.exp2(kb.fsub(m, mUse));
          newSum = kb.fmul(sum, scale);
          newAcc = arith::MulFOp::create(b, acc, splat(scale));
        }
        for (auto [l, v] : llvm::zip(ls, vs)) {
          Value w = kb.exp2(kb.fsub(l, mUse));
          Value wv = arith::MulFOp::create(b, v, splat(w));
          newSum = newSum ? kb.fadd(newSum, w) : w;
          newAcc = newAcc ? Value(arith::AddFOp::create(b, newAcc, wv)) : wv;
        }
        m = mNew;
        sum = newSum;
        acc = newAcc;
      }
      Value nonEmpty = kb.fogt(sum, zero);
      Value inv = kb.select(nonEmpty, kb.fdiv(kb.f32(1.0f), sum), zero);
      Value out = arith::MulFOp::create(b, acc, splat(inv));
      Value lse = kb.select(nonEmpty, kb.fadd(m, kb.log2(sum)), negInf);
      if (Value mask = op.getMask()) {
        // A masked-off row is state 0's, unmerged.
        Value byte = memref::LoadOp::create(b, mask, ValueRange{r.token});
        Value keep = arith::CmpIOp::create(
            b, arith::CmpIPredicate::ne, byte,
            arith::ConstantIntOp::create(b, b.getI8Type(), 0));
        out = arith::SelectOp::create(b, keep, out, first);
        lse = kb.select(keep, lse, firstLse);
      }
      storeChunk(b, out, op.getOutput(),
                 kb.add(kb.add(kb.mul(r.token, oStride), kb.mul(r.head, D)),
                        r.offset));
      auto writer = scf::IfOp::create(b, kb.eq(r.chunk, kb.idx(0)), false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&writer.getThenRegion().front());
      memref::StoreOp::create(
          b, lse, op.getMergedLse(),
          ValueRange{kb.add(kb.mul(r.token, lseStride), r.head)});
    };
    buildRowLoop(b, kb, launch, op.getNumRows(), op.getHeads(), load, finish);
    rewriter.eraseOp(op);
    return success();
  }
};

struct AppendKVLowering : public OpConversionPattern<TileAppendKVOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileAppendKVOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    LaunchAttr launch = op.getLaunch();
    const int64_t D = launch.getHeadDim();
    const int64_t P = launch.getFormat().getBlockCols();
    Value keyStride = toIndex64(b, op.getKeyStride());
    Value valueStride = toIndex64(b, op.getValueStride());
    Value pageStride = toIndex64(b, op.getPageStride());
    Value slotStride = toIndex64(b, op.getSlotStride());
    Value headStride = toIndex64(b, op.getHeadStride());
    Value batch = kb.toIndex(op.getBatch());
    Value numPages = kb.toIndex(op.getNumPages());
    Value zero = kb.idx(0);
    auto loadIndex = [&](Value buffer, Value i) {
      return kb.toIndex(memref::LoadOp::create(b, buffer, ValueRange{i}));
    };
    auto inRange = [&](Value x, Value end) {
      return kb.andi(kb.slt(x, end),
                     arith::CmpIOp::create(b, arith::CmpIPredicate::sge, x,
                                           zero));
    };

    // Everything a row needs is loaded first, the K/V chunks and the index
    // chain (its page read only where the request owns the slot), so the
    // rows of a step overlap their round trips; then the checked copy.
    auto load = [&](const RowPlace &r) -> SmallVector<Value> {
      Value inner = kb.add(kb.mul(r.head, D), r.offset);
      SmallVector<Value> out;
      for (auto [src, stride] : {std::pair{op.getKey(), keyStride},
                                 std::pair{op.getValue(), valueStride}}) {
        Type elt = cast<MemRefType>(src.getType()).getElementType();
        auto chunk = vector::LoadOp::create(
            b, VectorType::get({8}, elt), src,
            ValueRange{kb.add(kb.mul(r.token, stride), inner)});
        chunk.setAlignment(16);
        out.push_back(chunk);
      }
      Value request = loadIndex(op.getBatchIndices(), r.token);
      Value position = loadIndex(op.getPositions(), r.token);
      Value known = kb.andi(inRange(request, batch),
                            arith::CmpIOp::create(
                                b, arith::CmpIPredicate::sge, position, zero));
      // Reads of kv_indptr stay in bounds whatever the request says.
      Value safeRequest = kb.select(known, request, zero);
      Value first = loadIndex(op.getKvIndptr(), safeRequest);
      Value last = loadIndex(op.getKvIndptr(), kb.add(safeRequest, 1));
      Value slot = kb.add(first, kb.divu(position, P));
      Value mapped = kb.andi(known, kb.slt(slot, last));
      // kv_indices is read only at a slot the request owns (-1 otherwise).
      auto ifMapped = scf::IfOp::create(b, b.getIndexType(), mapped,
                                        /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&ifMapped.getThenRegion().front());
        scf::YieldOp::create(b, loadIndex(op.getKvIndices(), slot));
        b.setInsertionPointToStart(&ifMapped.getElseRegion().front());
        scf::YieldOp::create(b, kb.idx(-1));
      }
      out.push_back(position);
      out.push_back(ifMapped.getResult(0));
      return out;
    };
    auto finish = [&](const RowPlace &r, ArrayRef<Value> values) {
      Value key = values[0], value = values[1], position = values[2];
      Value page = values[3];
      auto ifOk = scf::IfOp::create(b, inRange(page, numPages),
                                    /*withElse=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifOk.getThenRegion().front());
      Value cache = kb.add(kb.add(kb.mul(page, pageStride),
                                  kb.mul(kb.remu(position, P), slotStride)),
                           kb.add(kb.mul(r.head, headStride), r.offset));
      for (auto [chunk, dst] : {std::pair{key, op.getKeyCache()},
                                std::pair{value, op.getValueCache()}}) {
        auto store = vector::StoreOp::create(b, chunk, dst, ValueRange{cache});
        store.setAlignment(16);
      }
      b.setInsertionPointToStart(&ifOk.getElseRegion().front());
      auto counter = scf::IfOp::create(b, kb.eq(r.chunk, kb.idx(0)), false);
      b.setInsertionPointToStart(&counter.getThenRegion().front());
      memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::addi, kb.i32(1),
                                  op.getDropped(), ValueRange{zero});
    };
    buildRowLoop(b, kb, launch, op.getNumRows(), op.getHeads(), load, finish);
    rewriter.eraseOp(op);
    return success();
  }
};

/// The copies' grid-strided loop over `numRows` words (i32; `stopAtCounts`:
/// or fewer, the sum of the counts) of CTAs of `threads`: pair i takes the
/// `counts[i]` (index) words after the pairs before it, and
/// `copyWord(i, at)` copies its word `at`.
void buildWordCopies(ImplicitLocOpBuilder &b, KernelBuilder &kb,
                     int64_t threads, Value numRows, bool stopAtCounts,
                     ArrayRef<Value> counts,
                     llvm::function_ref<void(size_t, Value)> copyWord) {
  // Where each pair's words end in the joint index space (a negative count
  // copies nothing).
  SmallVector<Value> ends;
  Value end = kb.idx(0);
  for (Value count : counts) {
    end = kb.add(end, kb.maxs(count, kb.idx(0)));
    ends.push_back(end);
  }
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value cta = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value grid = gpu::GridDimOp::create(b, gpu::Dimension::x);
  Value last = kb.toIndex(numRows);
  if (stopAtCounts)
    last = arith::MinSIOp::create(b, last, end);
  auto loop = scf::ForOp::create(b, kb.add(kb.mul(cta, threads), tid), last,
                                 kb.mul(grid, threads));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  Value word = loop.getInductionVar();
  Value begin = kb.idx(0);
  for (auto [i, pairEnd] : llvm::enumerate(ends)) {
    auto inPair = scf::IfOp::create(b, kb.slt(word, pairEnd),
                                    /*withElseRegion=*/true);
    b.setInsertionPointToStart(&inPair.getThenRegion().front());
    copyWord(i, kb.sub(word, begin));
    // The next pair's test in the else branch.
    b.setInsertionPointToStart(&inPair.getElseRegion().front());
    begin = pairEnd;
  }
}

struct CopyIndicesLowering : public OpConversionPattern<TileCopyIndicesOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileCopyIndicesOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    SmallVector<Value> counts;
    for (Value count : op.getCounts())
      counts.push_back(kb.toIndex(count));
    auto sources = op.getSources(), destinations = op.getDestinations();
    buildWordCopies(b, kb, op.getLaunch().getThreads(), op.getNumRows(),
                    /*stopAtCounts=*/false, counts, [&](size_t i, Value at) {
                      Value v = memref::LoadOp::create(b, sources[i],
                                                       ValueRange{at});
                      memref::StoreOp::create(b, v, destinations[i],
                                              ValueRange{at});
                    });
    rewriter.eraseOp(op);
    return success();
  }
};

struct CopyByTableLowering : public OpConversionPattern<TileCopyByTableOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(TileCopyByTableOp op, OneToNOpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    KernelBuilder kb(b);
    const int64_t words = CopyByTableOp::kRowWords * op.getRows();
    // The table lies in host memory: the CTA's first threads read it once
    // into shared memory (its contract's dynamic shared bytes), where every
    // thread reads it, instead of each thread reading it across the bus.
    auto tableType = MemRefType::get({words}, b.getI64Type(),
                                     MemRefLayoutAttrInterface{},
                                     getWorkgroupSpace(b.getContext()));
    Value table = memref::ViewOp::create(b, tableType,
                                         getDynamicSharedMemory(kb),
                                         kb.idx(0), ValueRange{});
    Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
    auto reader = scf::IfOp::create(b, kb.slt(tid, kb.idx(words)),
                                    /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&reader.getThenRegion().front());
      Value w = memref::LoadOp::create(b, op.getTable(), ValueRange{tid});
      memref::StoreOp::create(b, w, table, ValueRange{tid});
    }
    gpu::BarrierOp::create(b);
    // Row i: count, source address, destination address. The addresses are
    // raw device pointers (the global address space: host memory the
    // device maps included), so the copy is LLVM's load and store.
    auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), /*global=*/1);
    auto word = [&](int64_t w) -> Value {
      return memref::LoadOp::create(b, table, ValueRange{kb.idx(w)});
    };
    SmallVector<Value> counts, sources, destinations;
    for (int64_t i = 0; i < op.getRows(); ++i) {
      counts.push_back(
          arith::IndexCastOp::create(b, b.getIndexType(), word(3 * i)));
      sources.push_back(LLVM::IntToPtrOp::create(b, ptrType, word(3 * i + 1)));
      destinations.push_back(
          LLVM::IntToPtrOp::create(b, ptrType, word(3 * i + 2)));
    }
    Type i32 = b.getI32Type();
    buildWordCopies(
        b, kb, op.getLaunch().getThreads(), op.getNumRows(),
        /*stopAtCounts=*/true, counts, [&](size_t i, Value at) {
          Value offset = arith::IndexCastOp::create(b, b.getI64Type(), at);
          auto element = [&](Value base) -> Value {
            return LLVM::GEPOp::create(b, ptrType, i32, base,
                                       ValueRange{offset});
          };
          Value v = LLVM::LoadOp::create(b, i32, element(sources[i]));
          LLVM::StoreOp::create(b, v, element(destinations[i]));
        });
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void mlir::attn::mmasync::populateRowKernelPatterns(
    const TypeConverter &converter, RewritePatternSet &patterns) {
  patterns.add<MergeStatesLowering, AppendKVLowering, CopyIndicesLowering,
               CopyByTableLowering>(converter, patterns.getContext());
}
