//===- MMASync.h - The sm_80+ lowering of the tile-level form ---*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Private to the AttnToGPU library: what the patterns of the sm_80+ set
// (mma.sync m16n8k16, ldmatrix, cp.async) share. Each tile type becomes a
// fixed list of SSA values (the type converter); a pattern unpacks its
// operands into the structs below, builds gpu/nvgpu/nvvm code, and packs its
// results. Every decision a pattern needs (tile, format, heads, layout) is
// read from the kernel's launch contract through KernelContext.
//
// Fragment layouts of mma.sync.m16n8k16 (g = lane / 4, t = lane % 4):
//   A (16x16, row): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..],
//                   a3 = A[g+8][2t+8..]
//   B (16x8, col):  b0 = B[2t..2t+1][g], b1 = B[2t+8..+9][g]
//   C/D (16x8):     c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..2t+1]
// A warp's 16 rows of the softmax state: m and l of rows g and g + 8, and the
// output accumulator as head_dim / 8 n-tiles of 4 C values.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_CONVERSION_ATTNTOGPU_MMASYNC_MMASYNC_H
#define ATTN_LIB_CONVERSION_ATTNTOGPU_MMASYNC_MMASYNC_H

#include "../KernelBuilder.h"
#include "attn/Dialect/Attn/IR/Attn.h"
#include "attn/Dialect/Attn/IR/TileLayout.h"
#include "attn/Dialect/Attn/Utils/TargetInfo.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::attn::mmasync {

using mlir::attn::detail::KernelBuilder;

/// The decisions of one kernel, read from its launch contract.
struct KernelContext {
  LaunchAttr launch;
  TileAttr tile;
  TileSharedMemory smem;
  std::optional<TargetInfo> target;
  Type elt;
  /// head dim, query / KV heads, GQA group and packing, page size.
  int64_t D, Hq, Hkv, G, P, PS;
  /// Warps, stages, tile rows and keys per warp step.
  int64_t W, S, Q, N;
  bool paged, nhd;
  /// Decode tiles: the warps split the keys, each with its own state.
  bool splitKeys;
  /// The tile math runs on wgmma (the sm_90a set): Q stays in shared memory,
  /// and what the threads write there is published to the async proxy.
  bool wgmma;
  /// Warp-specialized (getProducerWarps): a producer warpgroup (threads W *
  /// 32 .. W * 32 + 127) streams the K/V ring through mbarriers while the
  /// tile's warps compute; each runs its own copy of the work loop (ops of
  /// the producer's copy carry kProducerAttr).
  bool specialized;
  /// The K/V loop is software-pipelined (isKVLoopPipelined): the computing
  /// warps release a tile one step later, and the GEMMs the tile form marks
  /// in flight are awaited by their consumers.
  bool pipelined;
  /// The online softmax moves a warp's running max only past a slack
  /// (movesRowMaxLazily), and rescales the accumulator only then.
  bool lazyMax;

  /// The context of the kernel `op` is in (its attn.launch must exist: the
  /// tile ops' verifiers ensure it).
  static KernelContext get(Operation *op);
  /// The threads that compute (the tile's warps).
  int64_t threads() const { return W * 32; }
  /// The threads that copy K/V tiles: a decode warp's lanes, the producer
  /// warpgroup, or every thread of the CTA.
  int64_t copyThreads() const {
    return splitKeys ? 32 : specialized ? kProducerThreads : threads();
  }
  static constexpr int64_t kProducerThreads = 128;
  /// Warp-specialized ring: the tiles a step still holds behind the one it
  /// computes (pipelined: tile j - 1, whose P V it issues), and the tiles
  /// the producer keeps issued ahead of it: the stages left. More would
  /// make the producer wait for a release before announcing the tile the
  /// computing warps wait for.
  int64_t ringLag() const { return pipelined ? 2 : 1; }
  int64_t ringAhead() const { return S - ringLag(); }
  /// Keys a thread's loop advances per step: its warp's tile, or the
  /// shared tile.
  int64_t chunks() const { return D / 8; }
};

/// Marks the ops of the producer's copy of a warp-specialized work loop.
inline constexpr llvm::StringLiteral kProducerAttr = "attn.producer";
inline bool isProducerOp(Operation *op) { return op->hasAttr(kProducerAttr); }
/// The named barrier (bar.sync id) of a warp-specialized kernel's computing
/// warps; 0 is the CTA's.
inline constexpr int64_t kConsumerBarrier = 1;
/// The turn barriers of a warp-specialized K/V loop's two computing warpgroups:
/// warpgroup w waits on kTurnBarrier + w before issuing a step's GEMMs and
/// then hands the turn to the other (takeTurn, giveTurn).
inline constexpr int64_t kTurnBarrier = 2;
/// The named barrier of computing warpgroup w alone (its query rows):
/// kWarpgroupBarrier + w.
inline constexpr int64_t kWarpgroupBarrier = 4;
/// Warpgroup turns: wait for this warpgroup's turn (`take`) or give it to
/// the other (`give`). The turns run on across items: warpgroup 1 gives
/// warpgroup 0 the first before the CTA's first item (`startTurns`) and
/// warpgroup 0 takes back the one left over after its last (`endTurns`);
/// both warpgroups take as many turns in every item. Warp-specialized
/// kernels of two computing warpgroups take turns: a pipelined step issues
/// its S and the last tile's P V in one turn, an unpipelined one its S
/// alone (its P V waits for the softmax, which runs under the other
/// warpgroup's S).
bool takesTurns(const KernelContext &ctx);
void takeTurn(KernelBuilder &kb, const KernelContext &ctx);
void giveTurn(KernelBuilder &kb, const KernelContext &ctx);
void startTurns(KernelBuilder &kb, const KernelContext &ctx);
void endTurns(KernelBuilder &kb, const KernelContext &ctx);

/// This thread's coordinates (index): thread, lane, warp, the mma row group
/// g = lane / 4 and column pair t = lane % 4.
struct ThreadCoords {
  Value tid, lane, warp, g, t;
  explicit ThreadCoords(KernelBuilder &kb);
};

//===----------------------------------------------------------------------===//
// Lowered tile values
//===----------------------------------------------------------------------===//

/// !attn.item: the work item's fields and what the kernel derives from them
/// (all index but flags, i32).
struct ItemValues {
  Value request, headGroup, rowBegin, rowCount, kvBegin, kvEnd, slot, flags;
  /// The request's first query row and its length, its first block (or
  /// token row) in the KV index arrays, its block count and KV length, the
  /// item's KV head and the position of the request's first query token.
  Value qoStart, qoLen, kvBase, numBlocks, kvLen, kvHead, posOffset;
  /// The item's index in the stored work list and the end of the CTA's run
  /// of items (where its next item is, and whether it has one).
  Value index, end;

  static constexpr unsigned kSize = 17;
  static SmallVector<Type> getTypes(MLIRContext *ctx);
  SmallVector<Value> flatten() const;
  static ItemValues unflatten(ValueRange values);
};

/// The fields of stored work item `index` of the CTA's run that place its
/// query rows (request, head group moved as `item`'s, first packed row, row
/// count, the request's first query row and the index); the others stay
/// null.
ItemValues loadNextItemQueryRows(KernelBuilder &kb, Value workItems,
                                 Value qoIndptr, const ItemValues &item,
                                 Value index);

/// !attn.kv_range: the visible keys [begin, end), the interior
/// [safeLo, safeHi) every row sees in full, and this thread's walk: its
/// first tile's first key, the keys between its tiles, its tile count.
struct RangeValues {
  Value begin, end, safeLo, safeHi, firstTile, stride, count;

  static constexpr unsigned kSize = 7;
  SmallVector<Value> flatten() const {
    return {begin, end, safeLo, safeHi, firstTile, stride, count};
  }
  static RangeValues unflatten(ValueRange v) {
    return {v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
  }
};

/// !attn.kv_pipe: the range it walks and the page indices (i32) of the next
/// tile to issue, loaded one tile ahead of the copies that need them.
struct PipeValues {
  RangeValues range;
  SmallVector<Value> pageIds;

  SmallVector<Value> flatten() const {
    SmallVector<Value> v = range.flatten();
    v.append(pageIds.begin(), pageIds.end());
    return v;
  }
  static PipeValues unflatten(ValueRange v) {
    return {RangeValues::unflatten(v.take_front(RangeValues::kSize)),
            SmallVector<Value>(v.drop_front(RangeValues::kSize))};
  }
};

/// !attn.kv_tile: its ring stage, the key position of its first row, and
/// whether its keys may need the element mask (i1).
struct KVTileValues {
  Value stage, start, needsMask;
};

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

/// The page indices a thread loads a tile ahead: one when a tile lies inside
/// a page, one per page when whole pages fill it, else one per 16-byte copy
/// it issues (a producer warpgroup: spread over its warps' lanes,
/// getLanePageIds, or none where the head dim's rows do not divide a warp:
/// it looks each up as it issues the copy); none for ragged KV.
int64_t getNumPageIds(const KernelContext &ctx);
/// Where pages do not fill a warp-specialized producer's copy rounds (page
/// sizes 1, 3, ...): the registers a producer lane holds page indices in,
/// lane l of a warp the index of its rows' entry l (+ 32 per register; the
/// entry of copy i of a lane in row p of its round is i x 32 / chunks + p),
/// shuffled to the lanes that copy them as they issue; 0 otherwise (the
/// head dim's chunks do not divide a warp).
int64_t getLanePageIds(const KernelContext &ctx);
/// Whether !attn.query lives in registers (A fragments) rather than in
/// shared memory (the Q tile, read at every k-step).
bool keepsQueryInRegisters(const KernelContext &ctx);
/// 16-byte copies one thread issues per K (and V) tile.
int64_t getCopiesPerThread(const KernelContext &ctx);
/// The pages of a K/V tile when every producer thread's copies read the
/// tile's pages in the same pattern (warp-specialized kernels, pages of whole
/// copy rows dividing the tile): the pipe then carries one index per page,
/// not one per copy; 0 otherwise.
int64_t getPagesPerTile(const KernelContext &ctx);
/// Byte address (index) of mbarrier `i` of the ring (warp-specialized
/// kernels): full[s] = s, empty[s] = stages + s.
Value getRingBarrier(KernelBuilder &kb, const KernelContext &ctx, Value i);
/// The shared-memory byte address of the dynamic shared memory's start.
Value getSharedBase(KernelBuilder &kb);
/// Runs `body` when `cond` holds.
void emitIf(ImplicitLocOpBuilder &b, Value cond,
            llvm::function_ref<void()> body);
/// Warp-specialized kernels: the ring tiles the items before this one used,
/// per thread (a private memref<1xindex> marked kRingBaseAttr at the
/// kernel's entry, which LLVM keeps in a register).
inline constexpr llvm::StringLiteral kRingBaseAttr = "attn.ring_base";
Value loadRingBase(KernelBuilder &kb, Operation *op);
void storeRingBase(KernelBuilder &kb, Operation *op, Value tiles);
/// Warp-specialized kernels: the work item whose query rows this thread's
/// last prefetch_query copied (-1 for none; a private memref<1xindex> marked
/// kQueryTagAttr beside the ring base).
inline constexpr llvm::StringLiteral kQueryTagAttr = "attn.query_tag";
Value loadQueryTag(KernelBuilder &kb, Operation *op);
void storeQueryTag(KernelBuilder &kb, Operation *op, Value item);

/// The dynamic shared memory as bytes (memref<?xi8> in the workgroup address
/// space), which every view of it starts from.
Value getDynamicSharedMemory(KernelBuilder &kb);
Attribute getWorkgroupSpace(MLIRContext *ctx);
/// The [columnBlocks * rows][blockElements] element view of the dynamic
/// shared memory (TileSharedMemory).
Value getSharedTiles(KernelBuilder &kb, const KernelContext &ctx);
/// First shared-memory row of the K tile in ring slot `stage` (this warp's
/// ring for decode tiles), and of its V tile.
Value getKRow(KernelBuilder &kb, const KernelContext &ctx,
              const ThreadCoords &tc, Value stage);
Value getVRow(KernelBuilder &kb, const KernelContext &ctx, Value kRow);
/// Where row `row` keeps its 16-byte chunk `chunk` in the view of
/// getSharedTiles: the view's row (the row in its column block) and column
/// (in elements), XOR-swizzled, or plain in padded rows.
struct SharedElement {
  Value row, col;
};
SharedElement getSharedElement(KernelBuilder &kb, const KernelContext &ctx,
                               Value row, Value chunk);
/// The same for chunk `inner` (< 8) of column block `block`, known here.
SharedElement getSharedElement(KernelBuilder &kb, const KernelContext &ctx,
                               Value row, int64_t block, Value inner);
/// Makes this thread's completed shared-memory writes (cp.async, stores)
/// visible to wgmma's reads (the async proxy) once a barrier follows; nothing
/// for mma.sync tiles.
void publishSharedWrites(KernelBuilder &kb, const KernelContext &ctx);

/// This thread's rows of the item for the mma fragments: local rows
/// rowBase + g and rowBase + g + 8 of the tile (r = 0, 1), with rowBase =
/// 16 * warp for taller tiles and 0 for decode tiles.
Value getLocalRow(KernelBuilder &kb, const KernelContext &ctx,
                  const ThreadCoords &tc, int64_t r);
/// Packed row `local` of the item: its query token (relative to the
/// request), its query head, its position (kv_len - qo_len + token).
Value getRowToken(KernelBuilder &kb, const KernelContext &ctx,
                  const ItemValues &item, Value local);
Value getRowHead(KernelBuilder &kb, const KernelContext &ctx,
                 const ItemValues &item, Value local);
Value getRowPos(KernelBuilder &kb, const KernelContext &ctx,
                const ItemValues &item, Value local);

/// The A fragment of k-step `kStep` of the query tile in shared memory
/// (ldmatrix x4 of this warp's 16 rows).
SmallVector<Value, 4> loadQueryFragment(KernelBuilder &kb,
                                        const KernelContext &ctx,
                                        const ThreadCoords &tc, Value tiles,
                                        int64_t kStep);

/// Applies `fn(x, xPair, dim, row)` to every element of shared-memory rows
/// [rowBase, rowBase + rows) of `tiles`, element d paired with d + D/2 (a
/// query or key transform), spread over `numThreads` threads of which
/// `thread` is this one (QueryTile.cpp).
void transformRows(
    KernelBuilder &kb, const KernelContext &ctx, Value tiles, Value thread,
    int64_t numThreads, Value rowBase, int64_t rows,
    llvm::function_ref<Value(Value x, Value pair, Value dim, Value row)> fn);

/// mma.sync m16n8k16 of the kernel's element type.
SmallVector<Value, 4> mma(KernelBuilder &kb, const KernelContext &ctx,
                          ArrayRef<Value> a, ArrayRef<Value> b,
                          ArrayRef<Value> c);

/// Clones the single block of hook region `region` at the builder, its
/// arguments bound to `args`; returns the yielded value. An op whose results
/// `preset` already maps is not cloned: the caller has its values.
Value inlineHook(OpBuilder &b, Region &region, ValueRange args,
                 IRMapping preset = {});

//===----------------------------------------------------------------------===//
// Pattern families (one file each)
//===----------------------------------------------------------------------===//

void populateWorkLoopPatterns(const TypeConverter &converter,
                              RewritePatternSet &patterns);
void populateQueryTilePatterns(const TypeConverter &converter,
                               RewritePatternSet &patterns);
void populateKVPipelinePatterns(const TypeConverter &converter,
                                RewritePatternSet &patterns);
void populateTileMathPatterns(const TypeConverter &converter,
                              RewritePatternSet &patterns);
/// The softmax init and update alone (TileMath.cpp): other targets' GEMMs
/// that leave mma.sync's fragment layout reuse them.
void populateOnlineSoftmaxPatterns(const TypeConverter &converter,
                                   RewritePatternSet &patterns);
void populateStorePatterns(const TypeConverter &converter,
                           RewritePatternSet &patterns);
void populateMergePatterns(const TypeConverter &converter,
                           RewritePatternSet &patterns);
/// merge_states and append_kv (RowKernels.cpp): chip-independent.
void populateRowKernelPatterns(const TypeConverter &converter,
                               RewritePatternSet &patterns);

/// The type converter of one kernel: each tile type to its values.
void addTypeConversions(TypeConverter &converter, const KernelContext &ctx);

} // namespace mlir::attn::mmasync

#endif // ATTN_LIB_CONVERSION_ATTNTOGPU_MMASYNC_MMASYNC_H
