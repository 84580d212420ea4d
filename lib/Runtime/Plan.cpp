//===- Plan.cpp - Load-balancing planner for the persistent grid ----------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// The planner turns one batch step's ragged lengths into a work list for a
// persistent grid of num_sms * ctas_per_sm CTAs. Algorithm (docs/Runtime.md):
//   1. validate every input (monotone indptrs, block lengths, block indices);
//   2. pick the candidate from the batch's average packed query length
//      (selectTileCandidate; graph mode: the fixed one), take its grid
//      (num_sms * its ctas_per_sm) and cost its query tiles (fixed cost +
//      keys * cost per key, keys clipped to what causal/window masks leave
//      visible);
//   3. masked batches (causal, window) whose largest tile costs over twice
//      the smallest, all within the slack of a CTA's share, more tiles than
//      CTAs (prefill): longest first onto the least loaded CTA (LongestFirst), kept
//      when its largest CTA is within 1/16 of the mean or no other plan
//      balances better; otherwise
//      walk the tiles in (request, row tile, head group) order (when
//      splitting: the tiles too short to split first, then the rest) and fill
//      CTA after CTA up to a running target of remaining cost / remaining
//      CTAs, splitting a tile's KV range at a granule boundary when it
//      overflows (a tile longer than an empty CTA: into equal chunks, one CTA
//      each, when some chunk count lands within 1/64 of the target);
//      but first, when the largest tile is within 9/8 of the balanced target,
//      try the same pass without splitting and keep it if its makespan is
//      within 9/8 too (no merge pass, no extra chunks: D1's shape);
//   4. when tiles within a CTA's share and tiles above it share the grid,
//      first (before step 3's walk) a two-stream walk under fixed targets just
//      over the mean (mean + 1/48, 1/24, ..., 1/8; the first that fits the
//      grid is the plan): the short tiles in order, each CTA they leave short
//      topped up with a chunk of a long tile, then the rest of the long tiles.
//      If none fits, step 3, and when its largest CTA is over 17/16 of the
//      mean, a search (a few halving probes) for the smallest fixed target
//      that fits; the best of these plans and step 3's is kept (skew 0.25:
//      1.36x -> 1.08x).
// Each CTA boundary splits at most one tile, so work items <= tiles + CTAs,
// which sizes the work list, and split pieces (partial slots) <= 2 x CTAs,
// which sizes the partial buffers (kSplitSlotsPerCta; the walks check it and
// keep a tile whole rather than pass it). Integer arithmetic only: deterministic.
//
// Plan time (every batch step, bench/NOTES.md v2d): no allocation (the
// longest-first scratch is in the host workspace, after the flat plan); a
// few passes over the requests, each skipped when the cost pass
// shows it has nothing to do (the split-cost estimate when no tile exceeds the
// target, either half of the short-tiles-first walk when all tiles are long
// or short); only the chosen candidate is costed. The requests' KV lengths
// are computed once, into the plan's kv_last_len array, which the passes
// read until it gets its final values (writeKvLengths).
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/Plan.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

namespace attnrt {

static Status invalid(StatusCode code, std::string msg) {
  return Status(code, std::move(msg));
}

static int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();
/// Saturation value of satMul: above every limit below, and small enough
/// that a few of them add without overflow.
constexpr int64_t kSat = int64_t(1) << 60;
/// The flat plan and its scratch: int32 word offsets with room to spare.
constexpr int64_t kMaxPlanWords = int64_t(1) << 30;
/// The device workspace (partial buffers included).
constexpr int64_t kMaxWorkspaceBytes = int64_t(1) << 48;
/// A batch's total cost under its candidate's model; with this bound every
/// sum, running target and scaled comparison of plan() stays in int64.
constexpr int64_t kMaxPlanCost = int64_t(1) << 56;

/// a * b for a, b >= 0, saturating at kSat.
static int64_t satMul(int64_t a, int64_t b) {
  if (a == 0 || b == 0)
    return 0;
  return a > kSat / b ? kSat : std::min(a * b, kSat);
}

namespace {
/// One query tile of a request in every head group, as the longest-first
/// assignment sorts them (host scratch).
struct RowTile {
  int32_t request, row, kvBegin, kvEnd;
};
} // namespace
constexpr int64_t kRowTileWords = sizeof(RowTile) / 4;

int64_t getCandidateCtas(const PlanConfig &c, const TileCandidate &t) {
  return int64_t(c.num_sms) * (t.ctas_per_sm > 0 ? t.ctas_per_sm : c.ctas_per_sm);
}

int64_t getKvGranule(const PlanConfig &c, const TileCandidate &t) {
  if (c.indexing != KVIndexing::Paged || c.block_size <= 0)
    return t.kv_tile;
  return ceilDiv(t.kv_tile, c.block_size) * c.block_size;
}

int64_t getFixedSplitTokens(const PlanConfig &c, const TileCandidate &t) {
  const int64_t g = std::max<int64_t>(getKvGranule(c, t), 1);
  return ceilDiv(std::max<int64_t>(c.fixed_split_tokens, 1), g) * g;
}

Status computePlanLayout(const PlanConfig &c, PlanLayout *layout) {
  if (!layout)
    return invalid(StatusCode::InvalidArgument, "layout pointer is null");
  if (c.num_qo_heads <= 0 || c.num_kv_heads <= 0)
    return invalid(StatusCode::HeadCountMismatch,
                   "num_qo_heads (" + std::to_string(c.num_qo_heads) +
                       ") and num_kv_heads (" + std::to_string(c.num_kv_heads) +
                       ") must be positive");
  if (c.num_qo_heads % c.num_kv_heads != 0)
    return invalid(StatusCode::HeadCountMismatch,
                   "num_qo_heads " + std::to_string(c.num_qo_heads) +
                       " is not a multiple of num_kv_heads " +
                       std::to_string(c.num_kv_heads));
  if (c.head_dim <= 0)
    return invalid(StatusCode::InvalidArgument, "head_dim must be positive");
  if (c.indexing != KVIndexing::Paged && c.indexing != KVIndexing::Ragged)
    return invalid(StatusCode::InvalidArgument, "indexing is not Paged or Ragged");
  if (c.indexing == KVIndexing::Paged && c.block_size <= 0)
    return invalid(StatusCode::InvalidArgument, "block_size must be positive");
  if (c.num_sms <= 0 || c.ctas_per_sm <= 0)
    return invalid(StatusCode::InvalidArgument,
                   "num_sms and ctas_per_sm must be positive");
  if (c.max_batch < 0 || c.max_total_q_rows < 0)
    return invalid(StatusCode::InvalidArgument,
                   "max_batch and max_total_q_rows must be non-negative");
  if (c.num_candidates < 1 || c.num_candidates > kMaxTileCandidates)
    return invalid(StatusCode::InvalidArgument,
                   "num_candidates must be in [1, " +
                       std::to_string(kMaxTileCandidates) + "]");
  if (c.graph_mode &&
      (c.graph_candidate < 0 || c.graph_candidate >= c.num_candidates))
    return invalid(StatusCode::InvalidArgument,
                   "graph_candidate out of range of the candidates");
  if (c.max_partial_rows < 0)
    return invalid(StatusCode::InvalidArgument,
                   "max_partial_rows (" + std::to_string(c.max_partial_rows) +
                       ") must be >= 0 (0: the grid's bound)");
  if (c.fixed_split_tokens < 0 || c.max_kv_tokens < 0)
    return invalid(StatusCode::InvalidArgument,
                   "fixed_split_tokens (" + std::to_string(c.fixed_split_tokens) +
                       ") and max_kv_tokens (" + std::to_string(c.max_kv_tokens) +
                       ") must be >= 0 (fixed_split_tokens 0: off)");
  const bool fixedSplit = c.fixed_split_tokens > 0 && !c.disable_split;
  int32_t group = c.num_qo_heads / c.num_kv_heads;
  // Every size below is computed in 64 bits, saturating at kSat, and checked
  // against its limit before it is narrowed (docs/Runtime.md, Errors and
  // limits): the flat plan's offsets are int32 words, rows and keys int32.
  int64_t maxTiles = 0, maxRowTiles = 0, maxItems = 0, partialRows = 0;
  int64_t maxCtas = 0;
  for (int32_t i = 0; i < c.num_candidates; ++i) {
    const TileCandidate &t = c.candidates[i];
    // Built only for a message: plan() calls this every step.
    auto which = [i] { return "candidate " + std::to_string(i); };
    if (t.q_rows <= 0 || t.kv_tile <= 0)
      return invalid(StatusCode::InvalidArgument,
                     which() + ": q_rows and kv_tile must be positive");
    if (t.gqa_pack <= 0 || group % t.gqa_pack != 0)
      return invalid(StatusCode::HeadCountMismatch,
                     which() + ": gqa_pack " + std::to_string(t.gqa_pack) +
                         " does not divide the GQA group size " +
                         std::to_string(group));
    if (t.cost_per_item < 0 || t.cost_per_kv_token <= 0)
      return invalid(StatusCode::InvalidArgument,
                     which() + ": cost_per_item must be >= 0 and "
                               "cost_per_kv_token >= 1");
    if (t.ctas_per_sm < 0 || t.ctas_per_sm > 64 || t.min_chunk_tokens < 0)
      return invalid(StatusCode::InvalidArgument,
                     which() + ": ctas_per_sm must be in [0, 64] and "
                               "min_chunk_tokens >= 0 (0: the config's)");
    // Packed rows (token x packed head) of one request are int32.
    if (int64_t(c.max_total_q_rows) * t.gqa_pack > kMaxInt32)
      return invalid(StatusCode::InvalidArgument,
                     "max_total_q_rows " + std::to_string(c.max_total_q_rows) +
                         " x " + which() + "'s gqa_pack " +
                         std::to_string(t.gqa_pack) +
                         " packed rows exceed 2^31-1");
    // Chunk boundaries are int32 key positions.
    if (c.indexing == KVIndexing::Paged &&
        ceilDiv(t.kv_tile, c.block_size) * c.block_size > kMaxInt32)
      return invalid(StatusCode::InvalidArgument,
                     which() + ": kv_tile " + std::to_string(t.kv_tile) +
                         " rounded up to whole blocks of block_size " +
                         std::to_string(c.block_size) + " exceeds 2^31-1 keys");
    const int64_t ctas = getCandidateCtas(c, t);
    if (ctas > kMaxPlanWords)
      return invalid(StatusCode::InvalidArgument,
                     "num_sms " + std::to_string(c.num_sms) +
                         " x ctas_per_sm of " + which() + " = " +
                         std::to_string(ctas) + " CTAs exceed the limit of 2^30");
    maxCtas = std::max(maxCtas, ctas);
    int64_t groups = c.num_qo_heads / t.gqa_pack;
    int64_t rowTiles =
        int64_t(c.max_total_q_rows) * t.gqa_pack / t.q_rows + c.max_batch;
    int64_t tiles = satMul(groups, rowTiles);
    if (tiles > kMaxPlanWords / kMergeUnitWords)
      return invalid(StatusCode::GraphMaximaExceeded,
                     which() + ": " + std::to_string(groups) +
                         " head groups (num_qo_heads / gqa_pack) x " +
                         std::to_string(rowTiles) +
                         " row tiles (max_total_q_rows x gqa_pack / q_rows + "
                         "max_batch) = " + std::to_string(tiles) +
                         " tiles exceed the plan's limit of 2^28");
    maxRowTiles = std::max(maxRowTiles, rowTiles);
    // A candidate's work list holds its tiles plus at most one extra chunk
    // per CTA of its grid, and each item may need a partial slot of q_rows.
    // A fixed split cuts nothing else, and a tile's chunks beyond its first
    // are at most its keys / N, so max_kv_tokens / N per head group.
    int64_t items = tiles + (c.disable_split ? 0 : ctas);
    if (fixedSplit)
      items = tiles + satMul(groups, c.max_kv_tokens /
                                         getFixedSplitTokens(c, t));
    if (items > kMaxPlanWords / kWorkItemWords)
      return invalid(StatusCode::GraphMaximaExceeded,
                     which() + ": " + std::to_string(items) +
                         (fixedSplit
                              ? " work items (tiles + head groups x "
                                "max_kv_tokens / fixed_split_tokens) exceed "
                                "the plan's limit of 2^27 (raise "
                                "fixed_split_tokens or lower max_kv_tokens)"
                              : " work items (tiles + num_sms x ctas_per_sm) "
                                "exceed the plan's limit of 2^27 (lower "
                                "max_total_q_rows, max_batch or "
                                "num_qo_heads)"));
    maxTiles = std::max(maxTiles, tiles);
    maxItems = std::max(maxItems, items);
    // Partial slots: only the pieces of split tiles take one. The balancing
    // planner splits only to fill the grid, and each CTA boundary cuts at
    // most one tile, so its pieces are at most kSplitSlotsPerCta x CTAs
    // (the planner holds to that bound): the scratch follows the grid, not
    // the query rows. A fixed split cuts every tile at its multiples of N,
    // whatever the grid, so its bound stays its work list (max_kv_tokens);
    // without splitting nothing is needed.
    const int64_t slots =
        c.disable_split ? 0
        : fixedSplit    ? items
                        : std::min(items, kSplitSlotsPerCta * ctas);
    partialRows = std::max(partialRows, slots * t.q_rows); // < 2^58
  }
  // A caller's cap (e.g. the buffer it has): the balancing planner then
  // splits fewer tiles; a fixed split that needs more is refused by plan().
  if (c.max_partial_rows > 0)
    partialRows = std::min(partialRows, c.max_partial_rows);
  // The index arrays' copies (qo_indptr, kv_indptr, kv_last_len): laid out
  // for max_batch, so that graph mode's captured pointers hold.
  int64_t words = kPlanHeaderWords;
  const int64_t offQo = words;
  words += int64_t(c.max_batch) + 1;
  const int64_t offKv = words;
  words += int64_t(c.max_batch) + 1;
  const int64_t offLast = words;
  words += c.max_batch;
  int64_t offCta = words;
  words += maxCtas + 1;
  int64_t offItems = words;
  words += maxItems * kWorkItemWords;
  int64_t offMergeIndptr = words;
  words += maxTiles + 1;
  int64_t offMergeUnits = words;
  words += maxTiles * kMergeUnitWords;
  // Scratch (LongestFirst): a RowTile per row tile, an owner per tile, and
  // two 8-byte keys per CTA (its order, the raised run), 8-byte aligned.
  int64_t offScratch = words;
  int64_t scratch = maxRowTiles * kRowTileWords + maxTiles + 1 + 4 * maxCtas;
  if (words + scratch > kMaxPlanWords)
    return invalid(StatusCode::GraphMaximaExceeded,
                   "plan maxima too large: the flat plan and its scratch would "
                   "need " +
                       std::to_string(words + scratch) +
                       " words, over the limit of 2^30 (lower max_batch, "
                       "max_total_q_rows, num_qo_heads or num_sms)");
  // The partial buffers: partial_rows x head_dim floats, then partial_rows.
  const uint64_t oBytes =
      satMul(satMul(partialRows, c.head_dim), 4); // saturates at kSat
  const uint64_t oOffset = alignUp(size_t(words) * 4, kDeviceAlign);
  const uint64_t deviceBytes =
      oBytes >= uint64_t(kMaxWorkspaceBytes)
          ? uint64_t(kSat)
          : alignUp(alignUp(oOffset + oBytes, kDeviceAlign) + partialRows * 4,
                    kDeviceAlign);
  if (deviceBytes > uint64_t(kMaxWorkspaceBytes) ||
      deviceBytes > std::numeric_limits<size_t>::max())
    return invalid(StatusCode::GraphMaximaExceeded,
                   "device workspace too large: " + std::to_string(partialRows) +
                       " partial rows (work items x q_rows) x head_dim " +
                       std::to_string(c.head_dim) +
                       " floats exceed the limit of 2^48 bytes");
  PlanLayout &l = *layout;
  l.max_ctas = int32_t(maxCtas);
  l.max_items = int32_t(maxItems);
  l.max_merge_units = int32_t(maxTiles);
  l.partial_rows = partialRows;
  l.off_qo_indptr = int32_t(offQo);
  l.off_kv_indptr = int32_t(offKv);
  l.off_kv_last_len = int32_t(offLast);
  l.off_cta_indptr = int32_t(offCta);
  l.off_items = int32_t(offItems);
  l.off_merge_indptr = int32_t(offMergeIndptr);
  l.off_merge_units = int32_t(offMergeUnits);
  l.total_words = int32_t(words);
  l.off_scratch = int32_t(offScratch);
  l.max_row_tiles = int32_t(maxRowTiles);
  l.host_bytes = size_t(words + scratch) * 4;
  l.partial_o_offset = size_t(oOffset);
  l.partial_lse_offset = alignUp(l.partial_o_offset + size_t(oBytes), kDeviceAlign);
  l.device_bytes =
      alignUp(l.partial_lse_offset + size_t(partialRows) * 4, kDeviceAlign);
  return Status::success();
}

size_t planHostWorkspaceBytes(const PlanConfig &config) {
  PlanLayout l;
  return computePlanLayout(config, &l).ok() ? l.host_bytes : 0;
}

size_t planDeviceWorkspaceBytes(const PlanConfig &config) {
  PlanLayout l;
  return computePlanLayout(config, &l).ok() ? l.device_bytes : 0;
}

namespace {

/// Keys [begin, end) of a request that the rows of a tile can see.
struct Range {
  int32_t begin, end;
};

/// The batch as the planner reads it, with the config's branches resolved
/// once. The walks copy it into a local: they store int32 work items, and the
/// compiler must assume such a store may change any int32 field it can reach
/// (a PlanConfig's too) and reload it.
struct Requests {
  const int32_t *qoIndptr, *kvIndptr, *lastLen, *kvLens;
  /// Each request's KV length, when plan() has written them (writeKvLengths):
  /// one load instead of two indptr loads, the last block's and three
  /// branches, in each of the passes over the batch.
  const int32_t *kvLengths = nullptr;
  int32_t batch, blockSize, windowLeft;
  bool ragged;
  bool causal; ///< the causal mask applies (no custom mask replaces it)

  Requests(const PlanConfig &c, const PlanInputs &in)
      : qoIndptr(in.qo_indptr), kvIndptr(in.kv_indptr), lastLen(in.kv_last_len),
        kvLens(in.kv_lens), batch(in.batch), blockSize(c.block_size),
        windowLeft(c.window_left), ragged(c.indexing == KVIndexing::Ragged),
        causal(c.causal && !c.has_custom_mask) {}

  /// Whether a mask may clip a tile's keys; if not, every tile sees them all.
  bool masked() const { return causal || windowLeft >= 0; }
  int32_t qoLen(int32_t b) const { return qoIndptr[b + 1] - qoIndptr[b]; }
  int32_t kvLen(int32_t b) const {
    if (kvLengths)
      return kvLengths[b];
    if (kvLens && !ragged)
      return kvLens[b];
    return requestKVLength(ragged ? KVIndexing::Ragged : KVIndexing::Paged,
                           blockSize, kvIndptr, lastLen, b);
  }
  /// Keys that any row of tokens t0..t1 can see under causal and window masks
  /// (bottom-right aligned: row t sits at kv_len - qo_len + t).
  Range visibleKeys(int32_t qoLen, int32_t kvLen, int32_t t0,
                    int32_t t1) const {
    int64_t begin = 0, end = kvLen;
    int64_t base = int64_t(kvLen) - qoLen;
    if (causal)
      end = std::clamp<int64_t>(base + t1 + 1, 0, kvLen);
    if (windowLeft >= 0)
      begin = std::clamp<int64_t>(base + t0 - windowLeft, 0, kvLen);
    if (begin > end)
      begin = end;
    return {int32_t(begin), int32_t(end)};
  }
  /// Calls f(row_begin, row_count, keys) for the query tiles of request b in
  /// one head group, in row order (Masked false: no mask, all keys).
  template <bool Masked, typename F>
  void forEachTile(int32_t b, int32_t P, int32_t Q, F &&f) const {
    const int32_t qo = qoLen(b), kv = kvLen(b);
    // 64-bit rows: r + Q must not wrap past the last tile (rows and Q may
    // both be near 2^31).
    const int64_t rows = int64_t(qo) * P;
    for (int64_t r = 0; r < rows; r += Q) {
      const int32_t rc = int32_t(std::min<int64_t>(Q, rows - r));
      f(int32_t(r), rc,
        Masked ? visibleKeys(qo, kv, int32_t(r / P), int32_t((r + rc - 1) / P))
               : Range{0, kv});
    }
  }
};

} // namespace

static Status validateInputs(const PlanConfig &c, const PlanInputs &in) {
  if (in.batch < 0)
    return invalid(StatusCode::InvalidArgument, "batch must be non-negative");
  if (in.batch > c.max_batch)
    return invalid(StatusCode::GraphMaximaExceeded,
                   "batch " + std::to_string(in.batch) +
                       " exceeds PlanConfig.max_batch " +
                       std::to_string(c.max_batch));
  if (!in.qo_indptr || !in.kv_indptr)
    return invalid(StatusCode::InvalidArgument,
                   "qo_indptr and kv_indptr must not be null");
  if (in.qo_indptr[0] != 0)
    return invalid(StatusCode::NonMonotoneIndptr,
                   "qo_indptr[0] is " + std::to_string(in.qo_indptr[0]) +
                       ", must be 0");
  if (in.kv_indptr[0] != 0)
    return invalid(StatusCode::NonMonotoneIndptr,
                   "kv_indptr[0] is " + std::to_string(in.kv_indptr[0]) +
                       ", must be 0");
  for (int32_t b = 0; b < in.batch; ++b) {
    if (in.qo_indptr[b + 1] < in.qo_indptr[b])
      return invalid(StatusCode::NonMonotoneIndptr,
                     "qo_indptr is not monotone at request " + std::to_string(b) +
                         " (" + std::to_string(in.qo_indptr[b]) + " > " +
                         std::to_string(in.qo_indptr[b + 1]) + ")");
    if (in.kv_indptr[b + 1] < in.kv_indptr[b])
      return invalid(StatusCode::NonMonotoneIndptr,
                     "kv_indptr is not monotone at request " + std::to_string(b) +
                         " (" + std::to_string(in.kv_indptr[b]) + " > " +
                         std::to_string(in.kv_indptr[b + 1]) + ")");
  }
  if (in.qo_indptr[in.batch] > c.max_total_q_rows)
    return invalid(StatusCode::GraphMaximaExceeded,
                   "total query rows " + std::to_string(in.qo_indptr[in.batch]) +
                       " exceed PlanConfig.max_total_q_rows " +
                       std::to_string(c.max_total_q_rows));
  if (c.indexing == KVIndexing::Paged) {
    if (in.batch > 0 && !in.kv_last_len && !in.kv_lens)
      return invalid(StatusCode::InvalidArgument,
                     "paged KV needs kv_last_len or kv_lens");
    int32_t bs = c.block_size;
    for (int32_t b = 0; b < in.batch; ++b) {
      int64_t nb = in.kv_indptr[b + 1] - in.kv_indptr[b];
      if (in.kv_lens) {
        int64_t len = in.kv_lens[b];
        bool ok = nb == 0 ? len == 0 : (len > (nb - 1) * bs && len <= nb * bs);
        if (!ok)
          return invalid(StatusCode::LastBlockLenOutOfRange,
                         "kv_lens[" + std::to_string(b) + "] = " +
                             std::to_string(len) + " does not fit " +
                             std::to_string(nb) + " blocks of " +
                             std::to_string(bs));
      } else if (nb > 0) {
        int32_t last = in.kv_last_len[b];
        if (last < 1 || last > bs)
          return invalid(StatusCode::LastBlockLenOutOfRange,
                         "kv_last_len[" + std::to_string(b) + "] = " +
                             std::to_string(last) + " is outside [1, " +
                             std::to_string(bs) + "]");
      }
      if (nb * bs > std::numeric_limits<int32_t>::max())
        return invalid(StatusCode::InvalidArgument,
                       "request " + std::to_string(b) + " has too many KV tokens");
    }
    if (in.kv_indices) {
      if (in.num_cache_blocks <= 0)
        return invalid(StatusCode::InvalidArgument,
                       "kv_indices given but num_cache_blocks is not positive");
      int32_t n = in.kv_indptr[in.batch];
      for (int32_t i = 0; i < n; ++i)
        if (in.kv_indices[i] < 0 || in.kv_indices[i] >= in.num_cache_blocks)
          return invalid(StatusCode::BlockIndexOutOfRange,
                         "kv_indices[" + std::to_string(i) + "] = " +
                             std::to_string(in.kv_indices[i]) +
                             " is outside the cache's " +
                             std::to_string(in.num_cache_blocks) + " blocks");
    }
  }
  return Status::success();
}

/// validateInputs' conditions without the messages, one flag per array
/// instead of a branch per element (the loops vectorize). plan() asks
/// validateInputs, which names the first failure, only when this fails.
static bool inputsValid(const PlanConfig &c, const PlanInputs &in) {
  const int32_t n = in.batch;
  if (n < 0 || n > c.max_batch || !in.qo_indptr || !in.kv_indptr ||
      in.qo_indptr[0] != 0 || in.kv_indptr[0] != 0)
    return false;
  const int32_t *qo = in.qo_indptr, *kv = in.kv_indptr;
  int bad = 0;
  for (int32_t b = 0; b < n; ++b)
    bad |= (qo[b + 1] < qo[b]) | (kv[b + 1] < kv[b]);
  if (bad || qo[n] > c.max_total_q_rows)
    return false;
  if (c.indexing != KVIndexing::Paged)
    return true;
  if (n > 0 && !in.kv_last_len && !in.kv_lens)
    return false;
  // Monotone from 0, so the block counts below are >= 0 and do not
  // overflow; nb * bs > INT32_MAX is tested as nb > INT32_MAX / bs, which
  // keeps the loops in 32 bits.
  const int32_t bs = c.block_size;
  const int32_t maxBlocks = std::numeric_limits<int32_t>::max() / bs;
  if (const int32_t *lens = in.kv_lens) {
    for (int32_t b = 0; b < n; ++b) {
      const int64_t nb = kv[b + 1] - kv[b], len = lens[b];
      bad |= (nb == 0) & (len != 0);
      bad |= (nb != 0) & ((len <= (nb - 1) * bs) | (len > nb * bs));
      bad |= nb > maxBlocks;
    }
  } else {
    const int32_t *last = in.kv_last_len;
    for (int32_t b = 0; b < n; ++b) {
      const int32_t nb = kv[b + 1] - kv[b], len = last[b];
      bad |= (nb > 0) & ((len < 1) | (len > bs));
      bad |= nb > maxBlocks;
    }
  }
  if (bad)
    return false;
  if (const int32_t *idx = in.kv_indices) {
    if (in.num_cache_blocks <= 0)
      return false;
    const uint32_t blocks = uint32_t(in.num_cache_blocks);
    for (int32_t i = 0, e = kv[n]; i < e; ++i)
      bad |= uint32_t(idx[i]) >= blocks; // negative ones wrap above
  }
  return !bad;
}

/// What plan() needs of one candidate's tiles over the batch.
struct TileStats {
  int64_t total = 0;   ///< cost of all tiles, all head groups
  int64_t largest = 0; ///< cost of the largest tile
  int64_t tiles = 0;   ///< tiles, all head groups
  int64_t fewestKeys = std::numeric_limits<int64_t>::max(); ///< smallest tile
  /// Some request has several row tiles in a head group, which read the same
  /// K/V (prefill; a decode step's requests have one each).
  bool sharedKV = false;
};

/// Stats of candidate t's tiles under a causal or window mask: the tiles of
/// a request see different keys.
static TileStats maskedCost(const Requests &q, const TileCandidate &t,
                            int32_t groups) {
  int64_t sum = 0, big = 0, count = 0;
  int64_t fewest = std::numeric_limits<int64_t>::max();
  bool shared = false;
  const int32_t P = t.gqa_pack, Q = t.q_rows;
  const int64_t fi = t.cost_per_item, ft = t.cost_per_kv_token;
  for (int32_t b = 0; b < q.batch; ++b) {
    const int32_t qo = q.qoLen(b), kv = q.kvLen(b);
    const int64_t rows = int64_t(qo) * P;
    shared |= rows > Q;
    for (int64_t r = 0; r < rows; r += Q) {
      const int64_t re = std::min<int64_t>(r + Q, rows);
      const Range k =
          q.visibleKeys(qo, kv, int32_t(r / P), int32_t((re - 1) / P));
      const int64_t keys = k.end - k.begin;
      const int64_t cost = fi + keys * ft;
      sum += cost;
      big = std::max(big, cost);
      ++count;
      fewest = std::min(fewest, keys);
    }
  }
  TileStats s;
  s.total = sum * groups;
  s.largest = big;
  s.tiles = count * groups;
  s.fewestKeys = fewest;
  s.sharedKV = shared;
  return s;
}

/// Stats of candidates [0, n) without a mask, in one pass over the batch:
/// each tile of a request sees all kv keys, so a candidate's total is
/// fi * tiles + ft * sum(tiles * kv), and its largest and smallest tiles are
/// those of the longest and shortest request with queries, whatever the
/// candidate.
static void unmaskedCosts(const Requests &q, const PlanConfig &c, int32_t n,
                          const TileCandidate *cands, TileStats *out) {
  int64_t P[kMaxTileCandidates], Q[kMaxTileCandidates];
  int64_t tiles[kMaxTileCandidates] = {}, keys[kMaxTileCandidates] = {};
  bool shared[kMaxTileCandidates] = {};
  // Requests of at most oneTile queries (decodes) are one tile under every
  // candidate: they are summed once for all.
  int64_t oneTile = std::numeric_limits<int32_t>::max();
  for (int32_t i = 0; i < n; ++i) {
    P[i] = cands[i].gqa_pack;
    Q[i] = cands[i].q_rows;
    oneTile = std::min(oneTile, Q[i] / P[i]);
  }
  int64_t shortTiles = 0, shortKeys = 0;
  int32_t longest = 0, shortest = std::numeric_limits<int32_t>::max();
  for (int32_t b = 0; b < q.batch; ++b) {
    const int32_t qo = q.qoLen(b);
    if (qo <= 0)
      continue;
    const int32_t kv = q.kvLen(b);
    longest = std::max(longest, kv);
    shortest = std::min(shortest, kv);
    if (qo <= oneTile) {
      ++shortTiles;
      shortKeys += kv;
      continue;
    }
    for (int32_t i = 0; i < n; ++i) {
      const int64_t t = ceilDiv(qo * P[i], Q[i]);
      tiles[i] += t;
      keys[i] += t * kv;
      shared[i] |= t > 1;
    }
  }
  for (int32_t i = 0; i < n; ++i) {
    tiles[i] += shortTiles;
    keys[i] += shortKeys;
  }
  for (int32_t i = 0; i < n; ++i) {
    const TileCandidate &t = cands[i];
    const int64_t groups = c.num_qo_heads / t.gqa_pack;
    TileStats &s = out[i];
    s = TileStats();
    s.total =
        (t.cost_per_item * tiles[i] + t.cost_per_kv_token * keys[i]) * groups;
    s.tiles = tiles[i] * groups;
    s.sharedKV = shared[i];
    if (tiles[i] > 0) {
      s.largest = itemCost(t, longest);
      s.fewestKeys = shortest;
    }
  }
}

/// A plan keeps every tile whole when its estimated makespan is within this
/// factor (9/8) of the balanced split one: the split's extra chunk costs and
/// merge pass cost more than that on the H200 (bench/NOTES.md: D1 unsplit
/// 96% of copy vs 91% split).
constexpr int64_t kNoSplitSlackNum = 9, kNoSplitSlackDen = 8;

/// A longest-first plan is kept when its largest CTA is within 1/16 of the
/// mean; splitting is then not worth its merge pass (D1's 5%), while a
/// coarser one (random skewed decode batches: 1.10-1.12) is balanced better
/// by cutting tiles.
constexpr int64_t kLongestFirstTol = 16;
/// Longest first is tried on masked batches (causal, window: the tiles of a
/// request differ, and request order puts the short ones together) whose
/// largest tile costs over twice the smallest: with tiles that close the
/// walk is within a tile of the mean too, and keeps each CTA's tiles in one
/// request (P5, 16 chunks of 512 over 4096 keys, tiles 3872-4352: the walk
/// ran in 1.25 ms on the H200, longest first in 1.36). Up to this many tiles
/// per CTA: it costs a merge over the CTAs per query tile (P2's 8704 tiles
/// ~115 us against the walk's ~25 us), and with more tiles per CTA the
/// walk's grains are fine anyway (256 causal requests, 312 tiles per CTA:
/// 1.002x). Unmasked batches (decode) keep the walk: their plan time is what
/// a decode step waits for (skewed 256 requests: 13 us, 37 us longest first).
constexpr int64_t kLongestFirstMaxPerCta = 128;

/// Equal chunks of a tile whose keys cost `work` on CTAs with `room` for keys
/// each (the running target less the fixed cost): ceil(work / room) chunks
/// when each is then at most 1/kEqualTol under the room (the difference
/// drifts into later targets), else floor(work / room) when each is at most
/// 1/kEqualTol over it; 0 when neither (the greedy fill then cuts at the
/// targets). D4: 131072 keys over rooms of 1986 -> 66 chunks of 1984 / 2048.
constexpr int64_t kEqualTol = 64;
/// The fixed-target search (plan()) runs when the running-target plan's
/// largest CTA is over 17/16 of the mean, for at most kMaxTargetProbes walks
/// (each halves the range between the mean and that plan's makespan; four
/// bring skew 0.25's 3392 within 3% of the best fixed target).
constexpr int64_t kSearchAboveNum = 17, kSearchAboveDen = 16;
constexpr int kMaxTargetProbes = 5;
/// Rounds of the split-cost fixed point (see plan()). Each is a pass over the
/// tiles that cost more than the target; one already holds the balance tests'
/// bounds (D3 <= 1.07, D4 <= 1.03).
constexpr int kReserveRounds = 1;
static int64_t equalChunkCount(int64_t work, int64_t room) {
  if (room <= 0)
    return 0;
  const int64_t hi = ceilDiv(work, room), lo = work / room;
  if (hi * room - work <= hi * room / kEqualTol)
    return hi;
  if (lo >= 1 && work - lo * room <= lo * room / kEqualTol)
    return lo;
  return 0;
}

/// Chunks beyond the first that place() will cut from the tiles of one head
/// group when the running target is `target`: equal chunks from an empty CTA,
/// or about one per target. A tile within the target counts none (equal
/// chunks then give 1 or 0, and ceil(cost / target) is 1), so only the tiles
/// above it are looked at, and none at all when the largest is not.
template <bool Masked>
static int64_t extraChunks(const Requests &q, const TileCandidate &t,
                           int64_t target, int64_t longKeys, int64_t minChunk,
                           int64_t granule) {
  const int64_t fi = t.cost_per_item, ft = t.cost_per_kv_token;
  int64_t extra = 0;
  for (int32_t b = 0; b < q.batch; ++b)
    q.forEachTile<Masked>(b, t.gqa_pack, t.q_rows,
                          [&](int32_t, int32_t, Range k) {
                            const int64_t keys = k.end - k.begin;
                            if (keys < longKeys || fi + keys * ft <= target)
                              return;
                            int64_t n = equalChunkCount(keys * ft, target - fi);
                            if (n == 0 || n > keys / (minChunk + granule))
                              n = ceilDiv(fi + keys * ft, target);
                            extra += n - 1;
                          });
  return extra;
}

namespace {

/// Greedy filling of CTAs in tile order (step 3 of the file comment). walk()
/// places the tiles that fit the current CTA whole; place() handles the rest:
/// splitting at a granule boundary or moving on to the next CTA.
struct Assigner {
  int32_t *ctaIndptr = nullptr, *mergeIndptr = nullptr;
  WorkItem *items = nullptr;
  MergeUnit *units = nullptr;
  int32_t maxItems = 0, numItems = 0, numUnits = 0, numSlots = 0;
  /// Partial slots the workspace holds (PlanLayout::getMaxSlots). At most
  /// one split tile is open at a time (a filler's pieces are never
  /// interleaved with another cut), so a cut that leaves room for its own
  /// piece and the open tile's last one (canCut(2)) never runs out.
  int32_t maxSlots = 0;
  int64_t C = 0, cta = 0, acc = 0, assigned = 0, total = 0, target = 0;
  int64_t fi = 0, ft = 1, granule = 1, minChunk = 1;
  int64_t longKeys = 0; ///< tiles with fewer keys never split
  /// What a tile may fill the current CTA up to: the target, or without
  /// bound on the last CTA (which takes whatever is left).
  int64_t limit = 0;
  int64_t makespan = 0; ///< largest closed CTA cost
  int64_t reserve = 0;  ///< split fixed costs counted in `total` ahead of time
  /// The no-split trial (plan()) stops once a CTA costs more than this.
  int64_t failAbove = std::numeric_limits<int64_t>::max();
  bool split = true, overflow = false, failed = false;
  /// The target stays put instead of following remaining cost / remaining
  /// CTAs (the fixed-target search of plan()); a tile that does not fit then
  /// never overshoots a CTA that holds something.
  bool fixedTarget = false;

  /// The fixed-target walk's second stream (plan() step 4): the tiles that
  /// cost more than the target (`fillerAbove`) and can be cut. The short
  /// tiles are placed first, in order; when one does not fit the current
  /// CTA, the room left is first filled with a chunk of the current filler,
  /// so CTAs of whole short tiles do not close short (skew 0.25: 1638-key
  /// tiles of cost 1766 against a mean of ~2230 left 344 each, and the
  /// running target piled 1.36x the mean on the last CTAs). What the gaps
  /// leave of the fillers is placed after the short tiles. A filler's pieces
  /// take consecutive slots because nothing else is cut while one is open
  /// (short tiles stay whole while fillers remain).
  struct Filler {
    int32_t b = 0, r = 0, rc = 0, g = 0; ///< tile: request, row, rows, group
    int32_t kb = 0, ke = 0;              ///< keys not yet placed
    int32_t tileBegin = 0, tileEnd = 0;  ///< all its keys (every head group)
    int32_t pieces = 0;                  ///< chunks already emitted
    bool live = false;                   ///< a filler tile remains
  };
  Filler fill;
  int64_t fillerAbove = std::numeric_limits<int64_t>::max();
  const Requests *req = nullptr;
  int32_t P = 1, Q = 1, groups = 1;
  bool masked = false;

  /// Whether `pieces` more split pieces fit the partial slots; when not,
  /// the tile (or its rest) stays whole: whole tiles need no scratch.
  bool canCut(int64_t pieces) const {
    return int64_t(numSlots) + pieces <= maxSlots;
  }

  bool isFiller(int64_t keys, int64_t cost) const {
    return keys >= longKeys && cost > fillerAbove;
  }

  /// Moves `fill` to the next filler tile in (request, row tile, head group)
  /// order after the current one (or to the first, when `start`).
  void nextFiller(bool start) {
    const Requests &q = *req;
    int32_t b = fill.b, g = fill.g + 1;
    int64_t r = fill.r; // 64-bit: r + Q must not wrap
    if (start)
      b = 0, r = 0, g = 0;
    else if (g < groups) {
      // The same row tile in the next head group.
      fill.g = g, fill.kb = fill.tileBegin, fill.ke = fill.tileEnd;
      fill.pieces = 0;
      return;
    } else
      r += Q, g = 0;
    for (; b < q.batch; ++b, r = 0) {
      const int32_t qo = q.qoLen(b), kv = q.kvLen(b);
      const int64_t rows = int64_t(qo) * P;
      if (!masked && (rows == 0 || !isFiller(kv, fi + int64_t(kv) * ft)))
        continue;
      for (; r < rows; r += Q) {
        const int32_t rc = int32_t(std::min<int64_t>(Q, rows - r));
        const Range k =
            masked ? q.visibleKeys(qo, kv, int32_t(r / P),
                                   int32_t((r + rc - 1) / P))
                   : Range{0, kv};
        const int64_t keys = k.end - k.begin;
        if (!isFiller(keys, fi + keys * ft))
          continue;
        fill = {b, int32_t(r), rc, 0, k.begin, k.end, k.begin, k.end, 0, true};
        return;
      }
    }
    fill.live = false;
  }

  /// Records the merge unit of a tile cut into `pieces` > 1 chunks (whose
  /// slots are the last `pieces` taken).
  void closeUnit(int32_t b, int32_t g, int32_t r, int32_t rc, int pieces) {
    if (pieces <= 1)
      return;
    units[numUnits] = {b, g, r, rc};
    mergeIndptr[numUnits + 1] = numSlots;
    ++numUnits;
  }

  /// Fills the room left in the current CTA with chunks of the fillers, each
  /// of at least minChunk keys and leaving at least minChunk of its tile.
  void fillGap() {
    while (fill.live && !overflow) {
      const int64_t room = (target - acc - fi) / ft;
      if (room < minChunk)
        return;
      const int64_t kb = fill.kb, ke = fill.ke;
      if (ke - kb <= room) {
        // The rest of the filler fits: it ends here.
        endFiller();
        continue;
      }
      // Round down: the CTA stays within its target.
      const int64_t at = (kb + std::min(room, ke - kb - minChunk)) / granule *
                         granule;
      if (!canCut(2))
        return; // out of slots: the filler's rest is drained whole
      if (at - kb < minChunk) {
        // A rest under two chunks that this room cannot take whole: it ends
        // a fresh CTA's first item instead (left for later, it would stop
        // every later gap from being filled), and the next filler tops that
        // CTA up.
        if (cta == C - 1)
          return;
        closeCta();
        endFiller();
        continue;
      }
      if (fill.pieces > 0)
        chargeExtraPiece();
      emit(fill.b, fill.g, fill.r, fill.rc, int32_t(kb), int32_t(at),
           fill.pieces == 0, false);
      acc += fi + (at - kb) * ft;
      fill.kb = int32_t(at);
      ++fill.pieces;
      return;
    }
  }

  /// Places the rest of the current filler in the current CTA and moves on.
  void endFiller() {
    if (fill.pieces > 0)
      chargeExtraPiece();
    emit(fill.b, fill.g, fill.r, fill.rc, fill.kb, fill.ke, fill.pieces == 0,
         true);
    acc += fi + int64_t(fill.ke - fill.kb) * ft;
    closeUnit(fill.b, fill.g, fill.r, fill.rc, fill.pieces + 1);
    nextFiller(false);
  }

  /// Places what the gaps left of the fillers, after the short tiles.
  void drainFillers() {
    while (fill.live && !overflow && !failed) {
      place(fill.b, fill.g, fill.r, fill.rc, fill.kb, fill.ke, fill.pieces,
            true);
      nextFiller(false);
    }
  }

  void setLimit() {
    limit = cta == C - 1 ? std::numeric_limits<int64_t>::max() : target;
  }

  void closeCta() {
    ++cta;
    ctaIndptr[cta] = numItems;
    makespan = std::max(makespan, acc);
    failed = failed || makespan > failAbove;
    assigned += acc;
    acc = 0;
    if (!fixedTarget)
      target = ceilDiv(std::max<int64_t>(total - assigned, 0), C - cta);
    else if (ceilDiv(std::max<int64_t>(total - assigned, 0), C - cta) >
             failAbove)
      failed = true; // what is left no longer fits the CTAs left
    setLimit();
  }

  void emit(int32_t b, int32_t g, int32_t r0, int32_t rc, int32_t k0, int32_t k1,
            bool first, bool last) {
    if (numItems >= maxItems) {
      overflow = true;
      return;
    }
    bool direct = first && last;
    items[numItems++] = {b, g, r0, rc, k0, k1, direct ? -1 : numSlots++,
                         (first ? kItemFirstChunk : 0) |
                             (last ? kItemLastChunk : 0) |
                             (direct ? kItemDirect : 0)};
  }

  /// Places the batch's tiles in (request, row tile, head group) order: all
  /// of them (Stream::All), or those that are not fillers (Short), or only
  /// the fillers (Long). With fillerAbove < 0 every tile of longKeys or more
  /// is a filler: the running-target walk's split into tiles too short to
  /// split and the rest.
  enum class Stream { All, Short, Long };
  template <bool Masked>
  void walk(const Requests &req, int32_t P, int32_t Q, int32_t groups,
            Stream stream) {
    // Locals, so that the item stores need not reload them.
    const Requests q = req;
    const int64_t fixed = fi, perKey = ft, shortBelow = longKeys,
                  fillerCost = fillerAbove;
    const bool wantFillers = stream == Stream::Long;
    WorkItem *const out = items;
    const int32_t cap = maxItems;
    for (int32_t b = 0; b < q.batch && !overflow && !failed; ++b)
      q.forEachTile<Masked>(b, P, Q, [&](int32_t r, int32_t rc, Range k) {
        const int64_t keys = k.end - k.begin;
        const int64_t cost = fixed + keys * perKey;
        if (stream != Stream::All &&
            (keys >= shortBelow && cost > fillerCost) != wantFillers)
          return;
        int64_t a = acc, lim = limit;
        int32_t n = numItems;
        if (a + groups * cost < lim && n + groups <= cap) {
          // Every head group's tile fits the current CTA whole and leaves it
          // open (the common case): no checks per group.
          for (int32_t g = 0; g < groups; ++g)
            out[n + g] = {
                b,       g,
                r,       rc,
                k.begin, k.end,
                -1,      kItemFirstChunk | kItemLastChunk | kItemDirect};
          acc = a + groups * cost;
          numItems = n + groups;
          return;
        }
        for (int32_t g = 0; g < groups; ++g) {
          if (a + cost <= lim && n < cap) {
            // The whole tile fits the current CTA.
            out[n++] = {
                b,       g,
                r,       rc,
                k.begin, k.end,
                -1,      kItemFirstChunk | kItemLastChunk | kItemDirect};
            a += cost;
            if (a < lim)
              continue;
            acc = a;
            numItems = n;
            closeCta();
          } else {
            acc = a;
            numItems = n;
            place(b, g, r, rc, k.begin, k.end);
          }
          a = acc;
          lim = limit;
          n = numItems;
        }
        acc = a;
        numItems = n;
      });
  }

  /// Extra piece of a split tile: its fixed cost comes from the reserve
  /// counted up front, or on top of the total once that is used up.
  void chargeExtraPiece() {
    if (reserve >= fi)
      reserve -= fi;
    else
      total += fi;
  }

  /// Places one tile that does not fit the current CTA whole; `prior`
  /// chunks of it are placed already (a filler's gap chunks).
  __attribute__((noinline)) void place(int32_t b, int32_t g, int32_t r,
                                       int32_t rc, int32_t kb, int32_t ke,
                                       int prior = 0, bool isFiller = false) {
    bool first = prior == 0;
    int pieces = prior;
    // A short tile: the fillers take the room it leaves, and it is not cut
    // while one is open (its pieces' slots would interleave the filler's).
    const bool shortTile = !isFiller && fill.live;
    const bool split = this->split && !shortTile;
    if (shortTile)
      fillGap();
    // The fixed cost of a tile's first piece is in the total; each later one
    // is charged as the piece before it is cut, or here for a filler's rest.
    if (prior > 0)
      chargeExtraPiece();
    while (!overflow) {
      int64_t cost = fi + int64_t(ke - kb) * ft;
      bool lastCta = cta == C - 1;
      if (!lastCta && acc + cost > target) {
        if (split && acc == 0) {
          // A fresh CTA and a (rest of a) tile longer than it: cut it into n
          // equal chunks, one CTA each (the last stays open for what follows).
          // Greedy cuts at each running target left the remainder, and every
          // granule of rounding, to the last chunk and the last CTAs (D4:
          // 1.18x the mean); equal chunks differ by at most one granule.
          int64_t n = equalChunks(ke - kb);
          if (n >= 2 && canCut(n)) {
            const int64_t len = ke - kb;
            int64_t from = kb;
            for (int64_t j = 1; j <= n && !overflow; ++j) {
              // Boundary j at kb + j * len / n, to the nearest granule.
              int64_t at =
                  j < n ? (kb + len * j / n + granule / 2) / granule * granule
                        : ke;
              if (j > 1) // piece 1's fixed cost is charged already
                chargeExtraPiece();
              emit(b, g, r, rc, int32_t(from), int32_t(at), first && j == 1,
                   j == n);
              acc += fi + (at - from) * ft;
              from = at;
              if (j < n || (acc >= target && cta != C - 1))
                closeCta();
            }
            pieces += int(n);
            break;
          }
        }
        int64_t room = target - acc - fi;
        if (split && room > 0) {
          // Nearest granule boundary: rounding down left every CTA up to a
          // granule short and piled the difference onto the last CTAs.
          // (A fixed target rounds down: the CTA may not pass it.)
          int64_t at = (kb + room / ft + (fixedTarget ? 0 : granule / 2)) /
                       granule * granule;
          // A rest just over the room: under a fixed target, cut it so the
          // second piece keeps minChunk keys (overshooting fails the target;
          // the running target prefers the whole: 50 x 2048 keys 1.28x).
          if (fixedTarget && ke - at < minChunk)
            at = (ke - minChunk) / granule * granule;
          if (at - kb >= minChunk && ke - at >= minChunk && canCut(2)) {
            // Every piece after the first pays the fixed cost again.
            chargeExtraPiece();
            emit(b, g, r, rc, kb, int32_t(at), first, false);
            acc += fi + (at - kb) * ft;
            kb = int32_t(at);
            first = false;
            ++pieces;
            closeCta();
            continue;
          }
        }
        // No good split point: overshoot this CTA if that is the smaller
        // imbalance, else leave the tile to the next CTA.
        if (acc > 0 && (fixedTarget || acc + cost - target > target - acc)) {
          closeCta();
          continue;
        }
      }
      emit(b, g, r, rc, kb, ke, first, true);
      acc += cost;
      ++pieces;
      if (acc >= target && !lastCta)
        closeCta();
      break;
    }
    closeUnit(b, g, r, rc, pieces);
  }

  /// Equal chunks for `len` keys starting on an empty CTA, or 0 to fill
  /// CTAs greedily instead (equalChunkCount). Never more chunks than CTAs
  /// left; every chunk keeps minChunk keys.
  int64_t equalChunks(int64_t len) const {
    // Under a fixed target the greedy cuts fill every CTA to it, and what
    // is left over is the tail that the target was chosen to fit.
    if (fixedTarget)
      return 0;
    const int64_t n = equalChunkCount(len * ft, target - fi);
    const int64_t maxN =
        std::min<int64_t>(len / (minChunk + granule), C - cta);
    return n >= 2 && n <= maxN ? n : 0;
  }
};

/// Longest processing time first (step 3 when the tiles differ in cost and
/// none needs splitting): the query tiles in order of falling cost, the
/// head groups of each onto the CTAs with the least cost so far (ties: the
/// lower index), then each CTA's tiles written together, head group by head
/// group and longest first in each (see orderByHeadGroup).
/// (Giving a query tile's head groups to distinct CTAs at once, not one by
/// one to the least loaded, is what makes it a merge of sorted runs rather
/// than a heap step per tile: P2 115 us rather than 336 on the development
/// machine, the same balance.) The running-target walk places
/// tiles in request order, so a causal request's short tiles pile up on the
/// first CTAs and its longest ones are the last CTAs' coarse grains (P1:
/// 128 tiles on CTA 0, 8 on CTA 131, the largest CTA 1.12x the mean); longest
/// first ends with the short tiles filling the gaps (1.00x; on the H200
/// 1.24x faster, bench/NOTES.md v12). Writes the CTA index and the work
/// list; returns the largest CTA cost. Needs tiles > CTAs (every CTA gets a
/// tile) and the layout's scratch.
class LongestFirst {
public:
  /// CTAs are numbered in the low bits of a key, their cost above.
  static constexpr int kCtaBits = 20;
  /// Whether the keys can hold `C` CTAs of up to `total` cost each.
  static bool fits(int64_t C, int64_t total) {
    return C < (int64_t(1) << kCtaBits) &&
           total < (std::numeric_limits<int64_t>::max() >> kCtaBits);
  }

  LongestFirst(const PlanLayout &l, int32_t *w, int64_t numCtas)
      : rowTiles(reinterpret_cast<RowTile *>(w + l.off_scratch)),
        owner(w + l.off_scratch + int64_t(l.max_row_tiles) * kRowTileWords),
        C(numCtas), ctaIndptr(w + l.off_cta_indptr),
        items(reinterpret_cast<WorkItem *>(w + l.off_items)) {
    // The CTA keys and the raised run on the first 8-byte boundary after
    // the owners (one per tile: max_merge_units is the most tiles).
    uintptr_t p = reinterpret_cast<uintptr_t>(owner + l.max_merge_units);
    order = reinterpret_cast<int64_t *>((p + 7) / 8 * 8);
    raised = order + l.max_ctas;
  }

  template <bool Masked>
  int64_t assign(const Requests &q, const TileCandidate &t, int32_t groups,
                 int32_t *numItems) {
    const int32_t P = t.gqa_pack, Q = t.q_rows;
    int64_t n = 0;
    for (int32_t b = 0; b < q.batch; ++b)
      q.forEachTile<Masked>(b, P, Q, [&](int32_t r, int32_t, Range k) {
        rowTiles[n++] = {b, r, k.begin, k.end};
      });
    std::sort(rowTiles, rowTiles + n, [](const RowTile &x, const RowTile &y) {
      const int32_t kx = x.kvEnd - x.kvBegin, ky = y.kvEnd - y.kvBegin;
      if (kx != ky)
        return kx > ky;
      return x.request != y.request ? x.request < y.request : x.row < y.row;
    });
    // The CTAs as (cost << kCtaBits | cta) keys in ascending order (ties go
    // to the lower index); all costs zero, that is index order. A query
    // tile's head groups cost the same, so they go together to the CTAs at
    // the front, and their raised keys (a sorted run) merge back.
    for (int64_t c = 0; c < C; ++c) {
      order[c] = c;
      ctaIndptr[c + 1] = 0;
    }
    const int64_t mask = (int64_t(1) << kCtaBits) - 1;
    // Tile i's first head group, (i mod groups), stepped rather than divided
    // for: a division per (tile, group) was most of the assignment's time.
    int64_t first = 0;
    for (int64_t i = 0; i < n; ++i, first = first + 1 == groups ? 0 : first + 1) {
      const int64_t cost = itemCost(t, rowTiles[i].kvEnd - rowTiles[i].kvBegin)
                           << kCtaBits;
      // Head groups rotate with the tile, so that each CTA gets about as
      // many of every group (the least loaded CTA would take group 0 each
      // time): the g-th CTA taken gets group (g + i) mod groups. Owners are
      // head group major, as written below.
      int64_t group = first;
      for (int64_t g = 0; g < groups;) {
        const int64_t m = std::min<int64_t>(groups - g, C);
        for (int64_t k = 0; k < m; ++k, ++g) {
          const int32_t c = int32_t(order[k] & mask);
          owner[group * n + i] = c;
          group = group + 1 == groups ? 0 : group + 1;
          ++ctaIndptr[c + 1];
          raised[k] = order[k] + cost;
        }
        mergeRaised(m);
      }
    }
    // Counts to ends, shifted down by one: ctaIndptr[c + 1] is then CTA c's
    // start, the cursor its tiles advance to its end.
    ctaIndptr[0] = 0;
    for (int64_t c = 0; c < C; ++c)
      ctaIndptr[c + 1] += ctaIndptr[c];
    for (int64_t c = C; c > 0; --c)
      ctaIndptr[c] = ctaIndptr[c - 1];
    // Head group by head group, longest first in each (orderByHeadGroup).
    for (int32_t g = 0; g < groups; ++g)
      for (int64_t i = 0; i < n; ++i) {
        const RowTile &rt = rowTiles[i];
        const int32_t rows = q.qoLen(rt.request) * P;
        items[ctaIndptr[owner[g * n + i] + 1]++] = {
            rt.request, g, rt.row, std::min(Q, rows - rt.row), rt.kvBegin,
            rt.kvEnd, -1, kItemFirstChunk | kItemLastChunk | kItemDirect};
      }
    const int64_t makespan = order[C - 1] >> kCtaBits;
    *numItems = int32_t(n * groups);
    return makespan;
  }

private:
  /// Merges raised[0, m) (ascending) with order[m, C) (ascending) into
  /// order: the keys below raised[0] move down m places in one block (the
  /// usual case: a tile's cost lifts its CTAs past most others), the rest
  /// merge; writing never passes reading, so in place.
  void mergeRaised(int64_t m) {
    int64_t *rest = order + m, *end = order + C;
    int64_t *split = std::lower_bound(rest, end, raised[0]);
    std::memmove(order, rest, size_t(split - rest) * sizeof(int64_t));
    int64_t *out = order + (split - rest), *r = raised, *rEnd = raised + m;
    int64_t *o = split;
    while (r != rEnd && o != end)
      *out++ = *o < *r ? *o++ : *r++;
    while (r != rEnd)
      *out++ = *r++;
  }

  RowTile *rowTiles;
  int32_t *owner;
  int64_t *order = nullptr, *raised = nullptr;
  int64_t C;
  int32_t *ctaIndptr;
  WorkItem *items;
};

} // namespace

/// Refuses a batch whose total cost under candidate `cand` exceeds
/// kMaxPlanCost, so that no sum of plan() can overflow: an O(1) bound first
/// (the row tiles the layout allows for the batch, each over the most keys a
/// request can have), the exact sum (one pass) only when that bound is over.
static Status checkBatchCost(const PlanConfig &c, const Requests &q,
                             int32_t cand) {
  const TileCandidate &t = c.candidates[cand];
  const int64_t groups = c.num_qo_heads / t.gqa_pack;
  const int64_t totalQ = q.qoIndptr[q.batch];
  const int64_t rowTiles = totalQ * t.gqa_pack / t.q_rows + q.batch;
  // No request has more keys than the batch or than 2^31-1.
  const int64_t kvTotal =
      q.ragged ? q.kvIndptr[q.batch] : satMul(q.kvIndptr[q.batch], q.blockSize);
  const int64_t keys = std::min(kvTotal, kMaxInt32);
  const int64_t tileBound = t.cost_per_item + satMul(keys, t.cost_per_kv_token);
  if (satMul(groups, satMul(rowTiles, tileBound)) <= kMaxPlanCost)
    return Status::success();
  const int64_t cap = kMaxPlanCost / groups;
  int64_t sum = 0;
  for (int32_t b = 0; b < q.batch && sum <= cap; ++b) {
    if (q.masked()) {
      q.forEachTile<true>(b, t.gqa_pack, t.q_rows, [&](int32_t, int32_t, Range k) {
        if (sum <= cap)
          sum += itemCost(t, k.end - k.begin); // each < 2^63 - cap
      });
    } else {
      const int64_t tiles = ceilDiv(int64_t(q.qoLen(b)) * t.gqa_pack, t.q_rows);
      sum += satMul(tiles, itemCost(t, q.kvLen(b)));
    }
  }
  if (sum <= cap)
    return Status::success();
  return invalid(StatusCode::InvalidArgument,
                 "the batch's cost under candidate " + std::to_string(cand) +
                     " (cost_per_item " + std::to_string(t.cost_per_item) +
                     ", cost_per_kv_token " +
                     std::to_string(t.cost_per_kv_token) + ", " +
                     std::to_string(groups) +
                     " head groups) exceeds the planner's limit of 2^56");
}

/// The fixed split (PlanConfig::fixed_split_tokens): every tile's keys are
/// cut at the multiples of N (a multiple of the granule), so a request's
/// chunks, their slots' order and their merge depend on the request alone:
/// its output is the same bits whatever else the batch holds. The chunks go
/// in (request, row tile, head group, key) order onto the CTAs, each CTA
/// closed once it reaches the running target (remaining cost / remaining
/// CTAs); the work list fits, as counted first. Costs stay in int64:
/// checkBatchCost bounds the unsplit total by 2^56, and the extra fixed costs
/// are at most max_items x cost_per_item < 2^27 x 2^31.
template <bool Masked>
static Status assignFixedSplit(const Requests &q, const TileCandidate &t,
                               int32_t groups, int64_t C, int64_t N,
                               const PlanLayout &l, int32_t *w,
                               Assigner &a) {
  const int32_t P = t.gqa_pack, Q = t.q_rows;
  const int64_t fi = t.cost_per_item, ft = t.cost_per_kv_token;
  auto chunks = [N](Range k) {
    // Pieces of [begin, end) cut at the multiples of N inside it.
    return k.end <= k.begin
               ? int64_t(1)
               : (int64_t(k.end) - 1) / N - int64_t(k.begin) / N + 1;
  };
  int64_t items = 0, total = 0, splitSlots = 0;
  for (int32_t b = 0; b < q.batch; ++b)
    q.forEachTile<Masked>(b, P, Q, [&](int32_t, int32_t, Range k) {
      const int64_t n = chunks(k);
      items += n;
      splitSlots += n > 1 ? n : 0;
      total += n * fi + int64_t(k.end - k.begin) * ft;
    });
  items *= groups;
  splitSlots *= groups;
  total *= groups;
  if (items > l.max_items)
    return invalid(StatusCode::GraphMaximaExceeded,
                   "fixed split: the batch's tiles cut at every " +
                       std::to_string(N) + " keys make " +
                       std::to_string(items) +
                       " work items, the workspace holds " +
                       std::to_string(l.max_items) +
                       " (PlanConfig.max_kv_tokens bounds the keys of a "
                       "plan's tiles per head group: raise it to this "
                       "batch's)");
  // The exact chunks or nothing: only a max_partial_rows cap below the
  // work list's bound can leave too few slots.
  if (splitSlots > l.getMaxSlots(t))
    return invalid(StatusCode::GraphMaximaExceeded,
                   "fixed split: the batch's split tiles need " +
                       std::to_string(splitSlots) + " partial slots of " +
                       std::to_string(Q) + " rows, the workspace holds " +
                       std::to_string(l.getMaxSlots(t)) +
                       " (PlanConfig.max_partial_rows " +
                       std::to_string(l.partial_rows) +
                       " caps them: raise it, or 0 for the work list's bound)");
  // Locals, not the Assigner's fields: the item stores would make the
  // compiler reload those (bench/plan BM_PlanDecodeSkewedFixedSplit).
  int32_t *const ctaIndptr = w + l.off_cta_indptr;
  int32_t *const mergeIndptr = w + l.off_merge_indptr;
  WorkItem *const out = reinterpret_cast<WorkItem *>(w + l.off_items);
  MergeUnit *const units = reinterpret_cast<MergeUnit *>(w + l.off_merge_units);
  ctaIndptr[0] = 0;
  mergeIndptr[0] = 0;
  int32_t n = 0, slots = 0, numUnits = 0;
  int64_t cta = 0, acc = 0, assigned = 0;
  int64_t target = std::max<int64_t>(ceilDiv(total, C), 1);
  for (int32_t b = 0; b < q.batch; ++b)
    q.forEachTile<Masked>(b, P, Q, [&](int32_t r, int32_t rc, Range k) {
      const int64_t pieces = chunks(k), base = int64_t(k.begin) / N;
      for (int32_t g = 0; g < groups; ++g) {
        int64_t from = k.begin;
        for (int64_t j = 0; j < pieces; ++j) {
          const bool first = j == 0, last = j + 1 == pieces;
          const int64_t at = last ? k.end : (base + j + 1) * N;
          out[n++] = {b, g, r, rc, int32_t(from), int32_t(at),
                      first && last ? -1 : slots++,
                      (first ? kItemFirstChunk : 0) | (last ? kItemLastChunk : 0) |
                          (first && last ? kItemDirect : 0)};
          acc += fi + (at - from) * ft;
          from = at;
          if (acc >= target && cta < C - 1) {
            // Close the CTA; the next one's target is what is left over the
            // CTAs left.
            ctaIndptr[++cta] = n;
            assigned += acc;
            acc = 0;
            target = ceilDiv(std::max<int64_t>(total - assigned, 0), C - cta);
          }
        }
        if (pieces > 1) {
          units[numUnits] = {b, g, r, rc};
          mergeIndptr[++numUnits] = slots;
        }
      }
    });
  a.ctaIndptr = ctaIndptr;
  a.numItems = n;
  a.numSlots = slots;
  a.numUnits = numUnits;
  a.cta = cta;
  a.acc = acc;
  return Status::success();
}

/// Each CTA's items in head-group order (stable, so each group's items stay
/// in the walk's order). The CTAs of a prefill (TileStats::sharedKV) then
/// pass through the head groups at about the same pace, and the items running at once read
/// the K/V of one or two KV heads of each request instead of all of them:
/// at P5 (16 requests over 4096 keys, 8 KV heads) the (request, row tile,
/// head group) walk had every CTA on its own (request, KV head), 256 MB of
/// K/V against a 50 MB L2, re-read 8 times from DRAM (bench/NOTES.md v21).
/// A CTA's cost, so the balance, is unchanged. `scratch` holds
/// `scratchItems` items; a CTA with more keeps its order.
static void orderByHeadGroup(int64_t ctas, const int32_t *ctaIndptr,
                             int32_t *itemWords, int32_t groups,
                             int32_t *scratchWords, int64_t scratchItems) {
  constexpr int32_t kMaxGroups = 256;
  if (groups < 2 || groups > kMaxGroups)
    return;
  WorkItem *items = reinterpret_cast<WorkItem *>(itemWords);
  WorkItem *scratch = reinterpret_cast<WorkItem *>(scratchWords);
  int32_t start[kMaxGroups + 1];
  for (int64_t c = 0; c < ctas; ++c) {
    WorkItem *first = items + ctaIndptr[c], *last = items + ctaIndptr[c + 1];
    const int64_t n = last - first;
    if (n < 2 || n > scratchItems ||
        std::is_sorted(first, last, [](const WorkItem &x, const WorkItem &y) {
          return x.head_group < y.head_group;
        }))
      continue;
    std::fill(start, start + groups + 1, 0);
    for (const WorkItem *it = first; it != last; ++it)
      ++start[it->head_group + 1];
    for (int32_t g = 0; g < groups; ++g)
      start[g + 1] += start[g];
    for (const WorkItem *it = first; it != last; ++it)
      scratch[start[it->head_group]++] = *it;
    std::memcpy(first, scratch, sizeof(WorkItem) * size_t(n));
  }
}

/// Writes each request's KV length in tokens (Requests::kvLen of the
/// validated inputs) to `lens`, the plan's kv_last_len array: nothing else
/// reads or writes that array until copyIndexArrays() turns the lengths into
/// the last blocks' fill, so the passes over the batch read one word per
/// request instead of recomputing it from the indptr. One loop per indexing,
/// each vectorizable. Request b's length is read and written at index b
/// only, so inputs that alias the array (a plan's own copies) still work.
static void writeKvLengths(const PlanConfig &c, const PlanInputs &in,
                           int32_t *lens) {
  const int32_t n = in.batch, bs = c.block_size;
  const int32_t *kv = in.kv_indptr, *last = in.kv_last_len;
  if (c.indexing == KVIndexing::Ragged) {
    for (int32_t b = 0; b < n; ++b)
      lens[b] = requestKVLength(KVIndexing::Ragged, bs, kv, last, b);
  } else if (const int32_t *given = in.kv_lens) {
    for (int32_t b = 0; b < n; ++b)
      lens[b] = given[b];
  } else {
    // requestKVLength(Paged), with the last block's fill read even where
    // there are no blocks (inputsValid() reads it too; its value is then
    // unchecked, so the sum wraps unsigned) and no branch: it vectorizes.
    for (int32_t b = 0; b < n; ++b) {
      const int32_t blocks = kv[b + 1] - kv[b];
      const uint32_t len =
          uint32_t(blocks - 1) * uint32_t(bs) + uint32_t(last[b]);
      lens[b] = blocks == 0 ? 0 : int32_t(len);
    }
  }
}

/// The plan's copies of the (validated) index arrays the kernels read:
/// qo_indptr and kv_indptr as given; kv_last_len (paged) from kv_lens when
/// given (the lengths the planner reads then), else kv_last_len, and 0 for
/// a request without blocks (whose given value is never checked); zeros for
/// ragged KV, where nothing reads it. `lengthsWritten`: kv_last_len holds
/// writeKvLengths()' lengths, whose fill of the last block is the same word
/// (a length is (blocks - 1) x block_size plus that fill).
static void copyIndexArrays(const PlanConfig &c, const PlanInputs &in,
                            const PlanLayout &l, int32_t *w,
                            bool lengthsWritten) {
  const int32_t n = in.batch;
  std::memcpy(w + l.off_qo_indptr, in.qo_indptr, (size_t(n) + 1) * 4);
  std::memcpy(w + l.off_kv_indptr, in.kv_indptr, (size_t(n) + 1) * 4);
  int32_t *last = w + l.off_kv_last_len;
  const bool paged = c.indexing == KVIndexing::Paged;
  const int32_t bs = c.block_size;
  for (int32_t b = 0; b < n; ++b) {
    const int32_t blocks = in.kv_indptr[b + 1] - in.kv_indptr[b];
    last[b] = !paged || blocks == 0 ? 0
              : lengthsWritten      ? last[b] - (blocks - 1) * bs
              : in.kv_lens          ? in.kv_lens[b] - (blocks - 1) * bs
                                    : in.kv_last_len[b];
  }
}

Status plan(const PlanConfig &c, const PlanInputs &in, void *workspace,
            size_t workspaceBytes) {
  PlanLayout l;
  if (Status s = computePlanLayout(c, &l); !s.ok())
    return s;
  if (!workspace)
    return invalid(StatusCode::InvalidArgument, "workspace is null");
  if (reinterpret_cast<uintptr_t>(workspace) % 4 != 0)
    return invalid(StatusCode::InvalidArgument, "workspace is not 4-byte aligned");
  if (workspaceBytes < l.host_bytes)
    return invalid(StatusCode::WorkspaceTooSmall,
                   "plan workspace has " + std::to_string(workspaceBytes) +
                       " bytes, needs " + std::to_string(l.host_bytes));
  if (!inputsValid(c, in))
    if (Status s = validateInputs(c, in); !s.ok())
      return s;
  Requests req(c, in);
  const bool masked = req.masked();
  // Pick the tile from the batch's average packed query length (graph mode:
  // the fixed one), then cost its tiles.
  int32_t cand = c.graph_mode ? c.graph_candidate : 0;
  if (!c.graph_mode && c.num_candidates > 1)
    cand = selectTileCandidate(c.candidates, c.num_candidates,
                               in.qo_indptr[in.batch], in.batch);
  if (Status s = checkBatchCost(c, req, cand); !s.ok())
    return s;
  const bool fixedSplit = c.fixed_split_tokens > 0 && !c.disable_split;
  int32_t *w = static_cast<int32_t *>(workspace);
  // The KV lengths, once, where the plan's kv_last_len goes (every later
  // pass reads them). Not for a fixed split, which can still refuse the
  // batch below: a refused batch leaves the workspace as it was.
  if (!fixedSplit) {
    writeKvLengths(c, in, w + l.off_kv_last_len);
    req.kvLengths = w + l.off_kv_last_len;
  }
  TileStats st;
  if (masked) {
    const TileCandidate &t = c.candidates[cand];
    st = maskedCost(req, t, c.num_qo_heads / t.gqa_pack);
  } else {
    unmaskedCosts(req, c, 1, c.candidates + cand, &st);
  }
  const TileCandidate &t = c.candidates[cand];
  const int32_t P = t.gqa_pack, Q = t.q_rows;
  // The grid the candidate's kernel keeps resident.
  const int64_t gridCtas = getCandidateCtas(c, t);
  // Head-group symmetry: without a mask every head group of a request sees
  // the same keys, so its tiles cost the same in each group. When the grid
  // divides by the groups, the walks below plan one group on its share of
  // the CTAs, and the kernels run that plan once per group (the header's
  // head-group copies): the same balance (the same tiles per CTA) for a
  // G-th of the walking and of the upload (decode at 256 requests, 8
  // groups: 2446 items walked and uploaded as 306). Not where
  // row tiles share K/V: each group's CTAs would walk their own requests at
  // once (every (request, KV head) in flight, orderByHeadGroup's case).
  const int32_t allGroups = c.num_qo_heads / P;
  // Each group then has a G-th of the partial slots: at least the two of
  // one split (under a caller's small cap the groups share the few there are).
  const int32_t copies = !masked && !st.sharedKV && !fixedSplit &&
                                 allGroups > 1 && gridCtas % allGroups == 0 &&
                                 l.getMaxSlots(t) / allGroups >= 2
                             ? allGroups
                             : 1;
  const int64_t C = gridCtas / copies;
  const int32_t groups = allGroups / copies;
  const int64_t total = st.total / copies, largest = st.largest,
                tiles = st.tiles / copies;
  const int32_t maxItems = l.max_items / copies;
  const int32_t maxSlots = l.getMaxSlots(t) / copies;

  const int64_t target0 = ceilDiv(total, C);
  // Chunk boundaries fall on multiples of the KV tile rounded up to whole blocks.
  const int64_t granule = getKvGranule(c, t);

  // Splitting adds a fixed cost per extra chunk. Counted only as it happens,
  // it raised the running target CTA after CTA and piled up on the last
  // CTAs (D4: 1.45x the mean). Estimate it up front instead: a tile that
  // may split (>= 2 chunks' worth of keys) gets the chunks place() will cut
  // from an empty CTA; kReserveRounds rounds of the fixed point (the rest,
  // e.g. head pieces, is added as it happens).
  const int64_t minChunk = t.min_chunk_tokens > 0   ? t.min_chunk_tokens
                           : c.min_chunk_tokens > 0 ? c.min_chunk_tokens
                                                    : 2 * granule;
  const int64_t longKeys = 2 * minChunk; // < 2^34
  // No tile has 2^31 keys: the clamp keeps its cost in int64.
  const int64_t longKeysCost = itemCost(t, std::min(longKeys, kMaxInt32 + 1));
  int64_t splitReserve = 0, splitTarget = target0;
  if (!c.disable_split && !fixedSplit && t.cost_per_item > 0) {
    for (int round = 0; round < kReserveRounds; ++round) {
      int64_t extra = 0;
      if (largest > splitTarget)
        extra = masked ? extraChunks<true>(req, t, splitTarget, longKeys,
                                           minChunk, granule)
                       : extraChunks<false>(req, t, splitTarget, longKeys,
                                            minChunk, granule);
      extra = std::min<int64_t>(extra * groups, C - 1);
      splitReserve = extra * t.cost_per_item;
      splitTarget = std::max<int64_t>(ceilDiv(total + splitReserve, C), 1);
    }
  }

  // One greedy pass (step 3) into the workspace, splitting or not.
  const bool anyShort = st.fewestKeys < longKeys;
  const bool anyLong = tiles > 0 && largest >= longKeysCost;
  auto assign = [&](Assigner &a, bool split, int64_t failAbove,
                    int64_t splitReserve, int64_t fixedTarget = 0) {
    a = Assigner();
    a.ctaIndptr = w + l.off_cta_indptr;
    a.items = reinterpret_cast<WorkItem *>(w + l.off_items);
    a.mergeIndptr = w + l.off_merge_indptr;
    a.units = reinterpret_cast<MergeUnit *>(w + l.off_merge_units);
    a.maxItems = maxItems;
    a.maxSlots = maxSlots;
    a.C = C;
    a.reserve = split ? splitReserve : 0;
    a.total = total + a.reserve;
    a.target = fixedTarget ? fixedTarget : ceilDiv(a.total, C);
    a.fixedTarget = fixedTarget != 0;
    a.setLimit();
    a.failAbove = failAbove;
    a.fi = t.cost_per_item;
    a.ft = t.cost_per_kv_token;
    a.split = split;
    a.granule = granule;
    a.minChunk = minChunk;
    a.longKeys = longKeys;
    a.ctaIndptr[0] = 0;
    a.mergeIndptr[0] = 0;
    auto walk = [&](Assigner::Stream stream) {
      if (masked)
        a.walk<true>(req, P, Q, groups, stream);
      else
        a.walk<false>(req, P, Q, groups, stream);
    };
    if (!split) {
      walk(Assigner::Stream::All);
    } else if (!fixedTarget) {
      // The tiles too short to split go first and the long ones last: the
      // CTAs of whole short tiles end up to a tile's cost off the target,
      // and only the long tiles' chunks can absorb that drift (D3: 4 x 640 =
      // 2560 per CTA against a target of 2670; placed in request order, the
      // drift piled 5 short tiles on each of the last CTAs). The cost pass
      // said which of the two walks have tiles to place.
      a.fillerAbove = -1;
      if (anyShort)
        walk(Assigner::Stream::Short);
      if (anyLong)
        walk(Assigner::Stream::Long);
    } else {
      // Two streams (Assigner::Filler): the tiles within the target in
      // order, their CTAs topped up with chunks of the longer ones (the
      // fillers), then what is left of those.
      a.fillerAbove = fixedTarget;
      a.req = &req;
      a.P = P, a.Q = Q, a.groups = groups;
      a.masked = masked;
      a.nextFiller(true);
      walk(Assigner::Stream::Short);
      a.drainFillers();
    }
    a.makespan = std::max(a.makespan, a.acc);
  };

  // Split only when it pays (docs/Runtime.md): a split costs a second pass
  // over the partial outputs (the merge kernel) and a fixed cost per chunk,
  // while a batch whose tiles already fill the grid (D1: 512 tiles of equal
  // length on 528 CTAs) loses at most a few percent of balance without it.
  // So first try the whole tiles (only possible when the largest tile is
  // within the slack of the balanced target) and keep that plan when its
  // makespan is within kNoSplitSlack of the balanced one.
  Assigner a;
  if (fixedSplit) {
    const int64_t N = getFixedSplitTokens(c, t);
    Status s = masked ? assignFixedSplit<true>(req, t, groups, C, N, l, w, a)
                      : assignFixedSplit<false>(req, t, groups, C, N, l, w, a);
    if (!s.ok())
      return s;
  }
  bool planned = fixedSplit;
  // Tiles of different costs, more than the CTAs, none over the slack of
  // the balanced target (prefill, chunked prefill): longest first, kept when
  // its largest CTA is within kLongestFirstTol of the mean (else the tiles
  // are too coarse for the grid, and the plans below split them). Without
  // splitting it is the plan whatever its balance.
  const int64_t slack = target0 * kNoSplitSlackNum / kNoSplitSlackDen;
  const bool fits = largest * kNoSplitSlackDen <= target0 * kNoSplitSlackNum;
  int32_t lptItems = 0;
  int64_t lptMakespan = 0;
  bool longestFirst = false;
  LongestFirst lpt(l, w, C);
  auto assignLongestFirst = [&] {
    lptMakespan = masked ? lpt.assign<true>(req, t, groups, &lptItems)
                         : lpt.assign<false>(req, t, groups, &lptItems);
  };
  const bool tryLongestFirst = !fixedSplit && masked && tiles > C &&
                               tiles <= kLongestFirstMaxPerCta * C &&
                               2 * itemCost(t, st.fewestKeys) < largest &&
                               (c.disable_split || fits) &&
                               LongestFirst::fits(C, total);
  if (tryLongestFirst) {
    assignLongestFirst();
    longestFirst = planned = c.disable_split ||
                             lptMakespan <= target0 + target0 / kLongestFirstTol;
  }
  // Only batches of similar tiles are tried: with a tile over twice the mean
  // (skewed batches) the greedy fill piles the difference on the last CTAs
  // and the trial fails, at the price of a whole extra walk.
  // (largest * tiles <= 2 * total, without the product's overflow.)
  if (!planned && !c.disable_split && fits &&
      (tiles == 0 || largest <= 2 * total / tiles)) {
    // The trial writes its plan as it goes (kept when it holds, so a batch
    // that passes is walked once) and stops at the first CTA over the slack;
    // a failed one is overwritten by the split plan.
    assign(a, false, slack, 0);
    planned = !a.overflow && a.makespan <= slack;
  }
  // Short tiles and fillers sharing the grid (skewed decode): the two-stream
  // walk under a fixed target just over the mean, the first of mean + 1/48,
  // 1/24, 1/16, 1/12, 1/8 that holds. The running-target walk piles the gaps
  // the short tiles leave on the last CTAs here (1.07-1.19x the mean), and
  // searching down from its makespan took three to five full walks; a target
  // that does not hold stops its walk early, so this costs about one
  // (bench/NOTES.md v16: 256 skewed requests 43 -> 14 us, 1.017 -> 1.012x).
  const bool twoStreams = anyLong && largest > splitTarget &&
                          itemCost(t, st.fewestKeys) <= splitTarget;
  if (!planned && twoStreams && !c.disable_split) {
    for (int64_t den : {48, 24, 16, 12, 8}) {
      const int64_t fixed = target0 + target0 / den;
      const int64_t slack = fixed + fixed / kEqualTol;
      assign(a, true, slack, splitReserve, fixed);
      if (!a.overflow && !a.failed && a.makespan <= slack) {
        planned = true;
        break;
      }
    }
  }
  if (!planned) {
    assign(a, !c.disable_split, std::numeric_limits<int64_t>::max(),
           splitReserve);
    // The running target creeps when short tiles and fillers share the grid
    // (the gaps the short tiles leave, and the fixed cost of every gap
    // chunk, land on the last CTAs: skew 0.25 1.37x, skew 0.5 1.35x). Then
    // search the smallest fixed target under which the two-stream walk
    // fits the grid, and keep the best plan (bench/NOTES.md v2e).
    const int64_t mean = ceilDiv(a.total - a.reserve, C);
    if (twoStreams && !c.disable_split && !a.overflow &&
        a.makespan * kSearchAboveDen > mean * kSearchAboveNum) {
      const int64_t running = a.makespan;
      int64_t lo = mean, hi = running, best = running, bestTarget = 0;
      for (int probe = 0; probe < kMaxTargetProbes && hi - lo > mean / 32;
           ++probe) {
        const int64_t mid = lo + (hi - lo) / 2, slack = mid + mid / kEqualTol;
        assign(a, true, slack, splitReserve, mid);
        if (a.overflow || a.failed || a.makespan > slack) {
          lo = mid + 1;
          continue;
        }
        hi = mid;
        if (a.makespan < best)
          best = a.makespan, bestTarget = mid;
      }
      // Rewrite the best plan unless the last probe wrote it.
      if (a.target != bestTarget || a.overflow || a.failed ||
          a.makespan > best)
        assign(a, true, std::numeric_limits<int64_t>::max(), splitReserve,
               bestTarget);
    }
  }
  // A longest-first plan outside the tolerance still wins over a plan that
  // balances no better (coarse tiles: 280 causal tiles of one 4480-token
  // request on 132 CTAs, 1.08x whole against 1.19x with 92 tiles split).
  if (tryLongestFirst && !longestFirst && !a.overflow &&
      lptMakespan <= a.makespan) {
    assignLongestFirst();
    longestFirst = true;
  }
  if (longestFirst) {
    // The longest-first plan: every CTA holds tiles, none split.
    a.numItems = lptItems;
    a.numUnits = a.numSlots = 0;
    a.cta = C - 1;
    a.ctaIndptr = w + l.off_cta_indptr;
    w[l.off_merge_indptr] = 0;
  }
  int32_t numItems = a.numItems, numUnits = a.numUnits, numSlots = a.numSlots;
  int64_t cta = a.cta;
  int32_t *ctaIndptr = a.ctaIndptr;
  bool overflow = a.overflow;
  if (overflow)
    return invalid(StatusCode::WorkspaceTooSmall,
                   "internal: work list exceeded its bound of " +
                       std::to_string(l.max_items) + " items");
  if (numSlots > maxSlots)
    return invalid(StatusCode::WorkspaceTooSmall,
                   "internal: " + std::to_string(numSlots) +
                       " partial slots exceed the bound of " +
                       std::to_string(maxSlots));
  // Close the open CTA; trim trailing empty CTAs unless the grid is fixed.
  int64_t used = cta + ((numItems > ctaIndptr[cta]) ? 1 : 0);
  ctaIndptr[cta + 1] = numItems;
  // The walk's CTAs, head group by head group, where row tiles share K/V
  // (longest first writes its CTAs that way), in the scratch the walks left
  // free; not past longest first's bound of tiles per CTA (reordering 41k
  // items, 256 causal requests, took 82 -> 298 us on the 2-core machine).
  if (st.sharedKV && !longestFirst &&
      numItems <= kLongestFirstMaxPerCta * used) {
    const int64_t scratchWords =
        int64_t(l.max_row_tiles) * kRowTileWords + l.max_merge_units;
    orderByHeadGroup(used, ctaIndptr, w + l.off_items, groups,
                     w + l.off_scratch, scratchWords / kWorkItemWords);
  }
  // The stored plan is copy 0; the header says how the kernels run the
  // other copies (Plan.h, "Head-group copies").
  const int64_t numCtas = c.graph_mode ? gridCtas : used * copies;
  const int32_t copyCtas = int32_t(std::max<int64_t>(
      copies > 1 ? used : numCtas, 1));
  // The CTAs past the used ones are empty (a fill: in a loop, the stores
  // would make the compiler reload l.max_ctas on each of the grid's CTAs).
  if (used < l.max_ctas)
    std::fill(ctaIndptr + used + 1, ctaIndptr + l.max_ctas + 1, numItems);

  copyIndexArrays(c, in, l, w, req.kvLengths != nullptr);
  std::memset(w, 0, kPlanHeaderWords * 4);
  w[kHdrMagic] = kPlanMagic;
  w[kHdrVersion] = kPlanAbiVersion;
  w[kHdrNumCtas] = int32_t(numCtas);
  w[kHdrNumItems] = numItems * copies;
  w[kHdrNumMergeUnits] = numUnits * copies;
  w[kHdrNumSlots] = numSlots * copies;
  w[kHdrCandidate] = cand;
  w[kHdrTileQ] = Q;
  w[kHdrGqaPack] = P;
  w[kHdrKvGranule] = int32_t(granule);
  w[kHdrNumHeadGroups] = allGroups;
  w[kHdrMaxCtas] = l.max_ctas;
  w[kHdrMaxItems] = l.max_items;
  w[kHdrMaxMergeUnits] = l.max_merge_units;
  w[kHdrOffCtaIndptr] = l.off_cta_indptr;
  w[kHdrOffItems] = l.off_items;
  w[kHdrOffMergeIndptr] = l.off_merge_indptr;
  w[kHdrOffMergeUnits] = l.off_merge_units;
  w[kHdrTotalWords] = l.total_words;
  w[kHdrMaxSlots] = l.getMaxSlots(t);
  w[kHdrSlotRows] = l.getSlotRows(t);
  w[kHdrHeadDim] = c.head_dim;
  w[kHdrBatch] = in.batch;
  w[kHdrTotalQRows] = in.qo_indptr[in.batch];
  w[kHdrGraphMode] = c.graph_mode != 0; // any nonzero value turns it on
  w[kHdrPartialOOffsetLo] = int32_t(uint32_t(l.partial_o_offset));
  w[kHdrPartialOOffsetHi] = int32_t(uint32_t(uint64_t(l.partial_o_offset) >> 32));
  w[kHdrPartialLseOffsetLo] = int32_t(uint32_t(l.partial_lse_offset));
  w[kHdrPartialLseOffsetHi] =
      int32_t(uint32_t(uint64_t(l.partial_lse_offset) >> 32));
  w[kHdrNumQoHeads] = c.num_qo_heads;
  w[kHdrNumKvHeads] = c.num_kv_heads;
  w[kHdrOffQoIndptr] = l.off_qo_indptr;
  w[kHdrOffKvIndptr] = l.off_kv_indptr;
  w[kHdrOffKvLastLen] = l.off_kv_last_len;
  w[kHdrMaxBatch] = c.max_batch;
  w[kHdrCopies] = copies;
  w[kHdrCopyCtas] = copyCtas;
  w[kHdrCopyGroups] = groups;
  w[kHdrCopyUnits] = numUnits;
  w[kHdrCopySlots] = numSlots;
  return Status::success();
}

size_t PlanView::partialOOffset() const {
  return size_t(uint32_t(words[kHdrPartialOOffsetLo])) |
         (size_t(uint32_t(words[kHdrPartialOOffsetHi])) << 32);
}

size_t PlanView::partialLseOffset() const {
  return size_t(uint32_t(words[kHdrPartialLseOffsetLo])) |
         (size_t(uint32_t(words[kHdrPartialLseOffsetHi])) << 32);
}

size_t PlanView::deviceBytes() const {
  // viewPlan() checked that this does not overflow.
  return partialLseOffset() +
         size_t(words[kHdrMaxSlots]) * size_t(words[kHdrSlotRows]) * 4;
}

int32_t planUploadSpans(const PlanView &plan, PlanSpan spans[kMaxPlanSpans]) {
  const int32_t *w = plan.words;
  const size_t n = size_t(plan.batch());
  // One copy's arrays: the kernels derive the other copies.
  const int32_t units = plan.copyUnits();
  auto part = [&](int32_t offField, size_t words) {
    return PlanSpan{size_t(w[offField]) * 4, words * 4};
  };
  const PlanSpan parts[kMaxPlanSpans] = {
      {0, (size_t(w[kHdrOffQoIndptr]) + n + 1) * 4},
      part(kHdrOffKvIndptr, n + 1),
      part(kHdrOffKvLastLen, n),
      {size_t(w[kHdrOffCtaIndptr]) * 4,
       (size_t(w[kHdrOffItems] - w[kHdrOffCtaIndptr]) +
        size_t(plan.copyItems()) * kWorkItemWords) * 4},
      part(kHdrOffMergeIndptr, size_t(units) + 1),
      part(kHdrOffMergeUnits, size_t(units) * kMergeUnitWords)};
  int32_t count = 0;
  for (int32_t i = 0; i < (units > 0 ? kMaxPlanSpans : kMaxPlanSpans - 2); ++i) {
    const PlanSpan &p = parts[i];
    if (p.bytes == 0)
      continue;
    if (count > 0 && p.offset - (spans[count - 1].offset + spans[count - 1].bytes) <
                         kPlanUploadGapBytes)
      spans[count - 1].bytes = p.offset + p.bytes - spans[count - 1].offset;
    else
      spans[count++] = p;
  }
  return count;
}

/// "plan header: <what>" as the InvalidArgument viewPlan() returns.
static Status badPlan(const std::string &what) {
  return invalid(StatusCode::InvalidArgument,
                 "plan buffer is corrupt or not from this planner: " + what);
}

Status viewPlan(const void *workspace, size_t bytes, PlanView *view) {
  if (!workspace || !view)
    return invalid(StatusCode::InvalidArgument, "plan buffer or view is null");
  if (reinterpret_cast<uintptr_t>(workspace) % 4 != 0)
    return invalid(StatusCode::InvalidArgument, "plan buffer is not 4-byte aligned");
  if (bytes < kPlanHeaderWords * 4)
    return invalid(StatusCode::WorkspaceTooSmall, "plan buffer smaller than a header");
  const int32_t *w = static_cast<const int32_t *>(workspace);
  if (w[kHdrMagic] != kPlanMagic || w[kHdrVersion] != kPlanAbiVersion)
    return invalid(StatusCode::InvalidArgument,
                   "buffer holds no plan of ABI version " +
                       std::to_string(kPlanAbiVersion));
  auto field = [&](PlanHeaderField f, const char *name) {
    return std::string(name) + " = " + std::to_string(w[f]);
  };
  // Header fields the views and the launches read, each against its range.
  struct Range64 {
    PlanHeaderField f;
    const char *name;
    int64_t lo, hi;
  };
  const int64_t total = w[kHdrTotalWords];
  const Range64 ranges[] = {
      {kHdrTotalWords, "total_words", kPlanHeaderWords,
       std::min<int64_t>(kMaxPlanWords, int64_t(bytes / 4))},
      {kHdrMaxCtas, "max_ctas", 0, kMaxPlanWords},
      {kHdrMaxItems, "max_items", 0, kMaxPlanWords / kWorkItemWords},
      {kHdrMaxMergeUnits, "max_merge_units", 0, kMaxPlanWords / kMergeUnitWords},
      {kHdrMaxSlots, "max_slots", 0, kMaxInt32},
      {kHdrNumCtas, "num_ctas", 0, w[kHdrMaxCtas]},
      {kHdrNumItems, "num_items", 0, w[kHdrMaxItems]},
      {kHdrNumMergeUnits, "num_merge_units", 0, w[kHdrMaxMergeUnits]},
      {kHdrNumSlots, "num_slots", 0, w[kHdrMaxSlots]},
      {kHdrCandidate, "candidate", 0, kMaxTileCandidates - 1},
      {kHdrTileQ, "tile_q", 1, kMaxInt32},
      {kHdrGqaPack, "gqa_pack", 1, kMaxInt32},
      {kHdrSlotRows, "slot_rows", w[kHdrTileQ], kMaxInt32},
      {kHdrKvGranule, "kv_granule", 1, kMaxInt32},
      {kHdrNumHeadGroups, "num_head_groups", 1, kMaxInt32},
      {kHdrHeadDim, "head_dim", 1, kMaxInt32},
      {kHdrNumQoHeads, "num_qo_heads", 1, kMaxInt32},
      {kHdrNumKvHeads, "num_kv_heads", 1, kMaxInt32},
      {kHdrMaxBatch, "max_batch", 0, kMaxInt32},
      {kHdrBatch, "batch", 0, w[kHdrMaxBatch]},
      {kHdrTotalQRows, "total_q_rows", 0, kMaxInt32},
      {kHdrGraphMode, "graph_mode", 0, 1},
      {kHdrCopies, "copies", 1, w[kHdrNumHeadGroups]},
      {kHdrCopyCtas, "copy_ctas", 1, w[kHdrMaxCtas]},
      {kHdrCopyGroups, "copy_groups", 1, w[kHdrNumHeadGroups]},
      {kHdrCopyUnits, "copy_units", 0, w[kHdrNumMergeUnits]},
      {kHdrCopySlots, "copy_slots", 0, w[kHdrNumSlots]},
  };
  for (const Range64 &r : ranges)
    if (w[r.f] < r.lo || w[r.f] > r.hi)
      return badPlan(field(r.f, r.name) + " is outside [" +
                     std::to_string(r.lo) + ", " + std::to_string(r.hi) + "]" +
                     (r.f == kHdrTotalWords ? " (the buffer's words)" : ""));
  const int64_t P = w[kHdrGqaPack], groups = w[kHdrNumHeadGroups];
  if (int64_t(w[kHdrNumQoHeads]) % w[kHdrNumKvHeads] != 0 ||
      groups * P != w[kHdrNumQoHeads] ||
      (w[kHdrNumQoHeads] / w[kHdrNumKvHeads]) % P != 0)
    return badPlan("num_head_groups x gqa_pack (" + std::to_string(groups) +
                   " x " + std::to_string(P) + ") is not num_qo_heads " +
                   std::to_string(w[kHdrNumQoHeads]) +
                   ", or gqa_pack does not divide its GQA group");
  // The arrays, in order, inside total_words and not overlapping.
  const int64_t offQo = w[kHdrOffQoIndptr], offKv = w[kHdrOffKvIndptr],
                offLast = w[kHdrOffKvLastLen], maxBatch = w[kHdrMaxBatch];
  const int64_t offCta = w[kHdrOffCtaIndptr], offItems = w[kHdrOffItems],
                offMi = w[kHdrOffMergeIndptr], offMu = w[kHdrOffMergeUnits];
  const struct {
    int64_t off, begin;
    const char *name;
  } arrays[] = {
      {offQo, kPlanHeaderWords, "off_qo_indptr"},
      {offKv, offQo + maxBatch + 1, "off_kv_indptr"},
      {offLast, offKv + maxBatch + 1, "off_kv_last_len"},
      {offCta, offLast + maxBatch, "off_cta_indptr"},
      {offItems, offCta + w[kHdrMaxCtas] + 1, "off_items"},
      {offMi, offItems + int64_t(w[kHdrMaxItems]) * kWorkItemWords,
       "off_merge_indptr"},
      {offMu, offMi + w[kHdrMaxMergeUnits] + 1, "off_merge_units"},
      {total, offMu + int64_t(w[kHdrMaxMergeUnits]) * kMergeUnitWords,
       "total_words"},
  };
  for (const auto &a : arrays)
    if (a.off < a.begin || a.off > total)
      return badPlan(std::string(a.name) + " = " + std::to_string(a.off) +
                     ": the arrays must follow each other (this one from " +
                     std::to_string(a.begin) + ") inside total_words " +
                     std::to_string(total));
  // The partial buffers after the plan, aligned, inside 2^48 bytes.
  const uint64_t oOff = uint64_t(uint32_t(w[kHdrPartialOOffsetLo])) |
                        (uint64_t(uint32_t(w[kHdrPartialOOffsetHi])) << 32);
  const uint64_t lseOff = uint64_t(uint32_t(w[kHdrPartialLseOffsetLo])) |
                          (uint64_t(uint32_t(w[kHdrPartialLseOffsetHi])) << 32);
  const uint64_t slotFloats =
      uint64_t(w[kHdrMaxSlots]) * uint64_t(w[kHdrSlotRows]); // < 2^58
  if (oOff < uint64_t(total) * 4 || oOff % kDeviceAlign != 0 ||
      oOff > uint64_t(kMaxWorkspaceBytes))
    return badPlan("partial_o offset " + std::to_string(oOff) +
                   " is not a 256-byte aligned offset after the plan's " +
                   std::to_string(total * 4) + " bytes, within 2^48");
  if (slotFloats > uint64_t(kMaxWorkspaceBytes) ||
      satMul(int64_t(slotFloats), int64_t(w[kHdrHeadDim]) * 4) >
          kMaxWorkspaceBytes - int64_t(oOff) ||
      lseOff < oOff + slotFloats * uint64_t(w[kHdrHeadDim]) * 4 ||
      lseOff % kDeviceAlign != 0 || lseOff > uint64_t(kMaxWorkspaceBytes) ||
      lseOff + slotFloats * 4 > uint64_t(kMaxWorkspaceBytes))
    return badPlan("partial_lse offset " + std::to_string(lseOff) +
                   " does not follow partial_o (" + std::to_string(oOff) +
                   " + max_slots x slot_rows x head_dim floats) 256-byte "
                   "aligned within 2^48 bytes");
  // The index arrays the kernels address K/V and outputs by: from 0,
  // monotone, qo_indptr up to total_q_rows.
  const int32_t *qo = w + offQo, *kv = w + offKv, *last = w + offLast;
  const int32_t n = w[kHdrBatch];
  if (qo[0] != 0 || qo[n] != w[kHdrTotalQRows] || kv[0] != 0)
    return badPlan("qo_indptr must run from 0 to total_q_rows " +
                   std::to_string(w[kHdrTotalQRows]) + " and kv_indptr from 0 (" +
                   std::to_string(qo[0]) + ".." + std::to_string(qo[n]) + ", " +
                   std::to_string(kv[0]) + "..)");
  for (int32_t b = 0; b < n; ++b)
    if (qo[b + 1] < qo[b] || kv[b + 1] < kv[b] || last[b] < 0)
      return badPlan("qo_indptr or kv_indptr decreases, or kv_last_len is "
                     "negative, at request " + std::to_string(b));
  // The copies: the header's counts are the stored ones times the copies,
  // over head groups and CTAs the plan has.
  const int32_t copies = w[kHdrCopies], copyCtas = w[kHdrCopyCtas],
                copyGroups = w[kHdrCopyGroups];
  const int32_t numCtas = w[kHdrNumCtas], numItems = w[kHdrNumItems];
  const int32_t copyItems = numItems / copies, numUnits = w[kHdrCopyUnits],
                numSlots = w[kHdrCopySlots];
  if (int64_t(copyItems) * copies != numItems ||
      int64_t(numUnits) * copies != w[kHdrNumMergeUnits] ||
      int64_t(numSlots) * copies != w[kHdrNumSlots] ||
      int64_t(copyGroups) * copies > groups ||
      (numItems > 0 && int64_t(copyCtas) * copies > numCtas))
    return badPlan(field(kHdrCopies, "copies") + " of " +
                   field(kHdrCopyCtas, "copy_ctas") + ", " +
                   field(kHdrCopyGroups, "copy_groups") + ", " +
                   field(kHdrCopyUnits, "copy_units") + " and " +
                   field(kHdrCopySlots, "copy_slots") +
                   " do not make num_items, num_merge_units, num_slots, or "
                   "fit num_head_groups and num_ctas");
  // The stored CTA index partitions the stored work list.
  const int32_t *ci = w + offCta;
  if (ci[0] != 0 || ci[copyCtas] != copyItems)
    return badPlan("cta_indptr must run from 0 to num_items / copies " +
                   std::to_string(copyItems) + " (it runs from " +
                   std::to_string(ci[0]) + " to " +
                   std::to_string(ci[copyCtas]) + ")");
  for (int32_t c = 0; c < copyCtas; ++c)
    if (ci[c + 1] < ci[c])
      return badPlan("cta_indptr decreases at CTA " + std::to_string(c));
  // The merge map lists every slot once, in order; without merge units
  // there are no slots and nothing reads merge_indptr (nor uploads it).
  const int32_t *mi = w + offMi;
  if (numUnits == 0 && numSlots != 0)
    return badPlan("num_slots = " + std::to_string(numSlots) +
                   " without merge units");
  if (numUnits > 0 && (mi[0] != 0 || mi[numUnits] != numSlots))
    return badPlan("merge_indptr must run from 0 to num_slots " +
                   std::to_string(numSlots) + " (it runs from " +
                   std::to_string(mi[0]) + " to " + std::to_string(mi[numUnits]) +
                   ")");
  const int64_t packedRows = int64_t(w[kHdrTotalQRows]) * P;
  const int32_t batch = w[kHdrBatch], Q = w[kHdrTileQ];
  auto rowsBad = [&](int32_t request, int32_t group, int32_t rowBegin,
                     int32_t rowCount) {
    return request < 0 || request >= batch || group < 0 || group >= copyGroups ||
           rowBegin < 0 || rowCount < 1 || rowCount > Q ||
           int64_t(rowBegin) + rowCount > packedRows;
  };
  const MergeUnit *mu = reinterpret_cast<const MergeUnit *>(w + offMu);
  for (int32_t u = 0; u < numUnits; ++u) {
    if (mi[u + 1] <= mi[u])
      return badPlan("merge_indptr does not increase at unit " +
                     std::to_string(u));
    if (rowsBad(mu[u].request, mu[u].head_group, mu[u].row_begin,
                mu[u].row_count))
      return badPlan("merge unit " + std::to_string(u) + " (request " +
                     std::to_string(mu[u].request) + ", head group " +
                     std::to_string(mu[u].head_group) + ", rows " +
                     std::to_string(mu[u].row_begin) + "+" +
                     std::to_string(mu[u].row_count) +
                     ") is outside the batch, head groups or tile");
  }
  // Work items: rows inside the batch's packed rows, keys ordered, slots in
  // range (split chunks) or -1 (direct items).
  const WorkItem *items = reinterpret_cast<const WorkItem *>(w + offItems);
  constexpr int32_t kAllFlags = kItemFirstChunk | kItemLastChunk | kItemDirect;
  for (int32_t i = 0; i < copyItems; ++i) {
    const WorkItem &it = items[i];
    const bool direct = (it.flags & kItemDirect) != 0;
    const char *bad = nullptr;
    if (rowsBad(it.request, it.head_group, it.row_begin, it.row_count))
      bad = "its rows are outside the batch, head groups or tile";
    else if (it.kv_begin < 0 || it.kv_end < it.kv_begin)
      bad = "its key range is negative or reversed";
    else if ((it.flags & ~kAllFlags) != 0 ||
             (direct && (it.flags != kAllFlags || it.slot != -1)))
      bad = "its flags are unknown or a direct item has a slot";
    else if (!direct && (it.slot < 0 || it.slot >= numSlots))
      bad = "its partial slot is outside [0, num_slots)";
    if (bad)
      return badPlan("work item " + std::to_string(i) + " (request " +
                     std::to_string(it.request) + ", head group " +
                     std::to_string(it.head_group) + ", rows " +
                     std::to_string(it.row_begin) + "+" +
                     std::to_string(it.row_count) + ", keys " +
                     std::to_string(it.kv_begin) + ".." +
                     std::to_string(it.kv_end) + ", slot " +
                     std::to_string(it.slot) + ", flags " +
                     std::to_string(it.flags) + "): " + bad);
  }
  view->words = w;
  return Status::success();
}

void planCtaCosts(const PlanConfig &config, const PlanView &view,
                  int64_t *costs) {
  const TileCandidate &t = config.candidates[view.candidate()];
  for (int32_t c = 0; c < view.numCtas(); ++c) {
    int32_t first, last;
    view.ctaItems(c, &first, &last);
    int64_t sum = 0;
    for (int32_t i = first; i < last; ++i) {
      const WorkItem it = view.item(i);
      sum += itemCost(t, it.kv_end - it.kv_begin);
    }
    costs[c] = sum;
  }
}

} // namespace attnrt
