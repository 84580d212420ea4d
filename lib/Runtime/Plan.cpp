//===- Plan.cpp - Load-balancing planner for the persistent grid ----------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// The planner turns one batch step's ragged lengths into a work list for a
// persistent grid of num_sms * ctas_per_sm CTAs. Algorithm (docs/Runtime.md):
//   1. validate every input (monotone indptrs, block lengths, block indices);
//   2. cost every query tile under every candidate (fixed cost + keys * cost
//      per key, keys clipped to what causal/window masks leave visible) and pick
//      the candidate with the smallest estimated makespan (graph mode: fixed);
//   3. walk the tiles in (request, row tile, head group) order (when
//      splitting: the tiles too short to split first, then the rest) and fill
//      CTA after CTA up to a running target of remaining cost / remaining
//      CTAs, splitting a tile's KV range at a granule boundary when it
//      overflows (a tile longer than an empty CTA: into equal chunks, one CTA
//      each, when some chunk count lands within 1/64 of the target);
//      but first, when the largest tile is within 9/8 of the balanced target,
//      try the same pass without splitting and keep it if its makespan is
//      within 9/8 too (no merge pass, no extra chunks: D1's shape).
// Each CTA boundary splits at most one tile, so work items <= tiles + CTAs,
// which is how the workspace is sized. Integer arithmetic only: deterministic.
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/Plan.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

namespace attn::runtime {

static Status invalid(StatusCode code, std::string msg) {
  return Status(code, std::move(msg));
}

static int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

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
  int32_t group = c.num_qo_heads / c.num_kv_heads;
  int64_t maxTiles = 0;
  int32_t slotRows = 0;
  for (int32_t i = 0; i < c.num_candidates; ++i) {
    const TileCandidate &t = c.candidates[i];
    std::string which = "candidate " + std::to_string(i);
    if (t.q_rows <= 0 || t.kv_tile <= 0)
      return invalid(StatusCode::InvalidArgument,
                     which + ": q_rows and kv_tile must be positive");
    if (t.gqa_pack <= 0 || group % t.gqa_pack != 0)
      return invalid(StatusCode::HeadCountMismatch,
                     which + ": gqa_pack " + std::to_string(t.gqa_pack) +
                         " does not divide the GQA group size " +
                         std::to_string(group));
    if (t.cost_per_item < 0 || t.cost_per_kv_token <= 0)
      return invalid(StatusCode::InvalidArgument,
                     which + ": cost_per_item must be >= 0 and "
                             "cost_per_kv_token >= 1");
    int64_t groups = c.num_qo_heads / t.gqa_pack;
    int64_t tiles =
        groups * (int64_t(c.max_total_q_rows) * t.gqa_pack / t.q_rows +
                  c.max_batch);
    maxTiles = std::max(maxTiles, tiles);
    slotRows = std::max(slotRows, t.q_rows);
  }
  int64_t maxCtas = int64_t(c.num_sms) * c.ctas_per_sm;
  int64_t maxItems = maxTiles + (c.disable_split ? 0 : maxCtas);
  int64_t words = kPlanHeaderWords;
  int64_t offCta = words;
  words += maxCtas + 1;
  int64_t offItems = words;
  words += maxItems * kWorkItemWords;
  int64_t offMergeIndptr = words;
  words += maxTiles + 1;
  int64_t offMergeUnits = words;
  words += maxTiles * kMergeUnitWords;
  if (words > std::numeric_limits<int32_t>::max() / 2)
    return invalid(StatusCode::InvalidArgument,
                   "plan maxima too large: the flat plan would need " +
                       std::to_string(words) + " words");
  PlanLayout &l = *layout;
  l.max_ctas = int32_t(maxCtas);
  l.max_items = int32_t(maxItems);
  l.max_merge_units = int32_t(maxTiles);
  l.max_slots = int32_t(maxItems);
  l.slot_rows = slotRows;
  l.off_cta_indptr = int32_t(offCta);
  l.off_items = int32_t(offItems);
  l.off_merge_indptr = int32_t(offMergeIndptr);
  l.off_merge_units = int32_t(offMergeUnits);
  l.total_words = int32_t(words);
  l.host_bytes = size_t(words) * 4;
  l.partial_o_offset = alignUp(l.host_bytes, kDeviceAlign);
  size_t slotFloats = size_t(maxItems) * slotRows;
  l.partial_lse_offset = alignUp(
      l.partial_o_offset + slotFloats * size_t(c.head_dim) * 4, kDeviceAlign);
  l.device_bytes = alignUp(l.partial_lse_offset + slotFloats * 4, kDeviceAlign);
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

/// Host-side description of one request's lengths, computed on the fly.
struct Lengths {
  const PlanConfig &c;
  const PlanInputs &in;
  int32_t qoLen(int32_t b) const { return in.qo_indptr[b + 1] - in.qo_indptr[b]; }
  int32_t kvLen(int32_t b) const {
    int32_t n = in.kv_indptr[b + 1] - in.kv_indptr[b];
    if (c.indexing == KVIndexing::Ragged)
      return n;
    if (in.kv_lens)
      return in.kv_lens[b];
    return n == 0 ? 0 : (n - 1) * c.block_size + in.kv_last_len[b];
  }
};

/// Keys [begin, end) that any row of tokens t0..t1 can see under causal and
/// window masks (bottom-right aligned: row t sits at kv_len - qo_len + t).
struct Range {
  int32_t begin, end;
};
static Range visibleKeys(const PlanConfig &c, int32_t qoLen, int32_t kvLen,
                         int32_t t0, int32_t t1) {
  int64_t begin = 0, end = kvLen;
  int64_t base = int64_t(kvLen) - qoLen;
  if (c.causal && !c.has_custom_mask)
    end = std::clamp<int64_t>(base + t1 + 1, 0, kvLen);
  if (c.window_left >= 0)
    begin = std::clamp<int64_t>(base + t0 - c.window_left, 0, kvLen);
  if (begin > end)
    begin = end;
  return {int32_t(begin), int32_t(end)};
}

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

/// Total cost of all tiles of the batch under candidate `t`, the largest
/// single tile cost, and the number of tiles.
static void batchCost(const PlanConfig &c, const Lengths &len,
                      const TileCandidate &t, int64_t *total, int64_t *largest,
                      int64_t *tiles) {
  int64_t sum = 0, big = 0, count = 0;
  int32_t P = t.gqa_pack, Q = t.q_rows;
  for (int32_t b = 0; b < len.in.batch; ++b) {
    int32_t qo = len.qoLen(b), kv = len.kvLen(b);
    int64_t rows = int64_t(qo) * P;
    for (int64_t r = 0; r < rows; r += Q) {
      int64_t re = std::min<int64_t>(r + Q, rows);
      Range k = visibleKeys(c, qo, kv, int32_t(r / P), int32_t((re - 1) / P));
      int64_t cost = itemCost(t, k.end - k.begin);
      sum += cost;
      big = std::max(big, cost);
      ++count;
    }
  }
  int64_t groups = c.num_qo_heads / P;
  *total = sum * groups;
  *largest = big;
  *tiles = count * groups;
}

/// A plan keeps every tile whole when its estimated makespan is within this
/// factor (9/8) of the balanced split one: the split's extra chunk costs and
/// merge pass cost more than that on the H200 (bench/NOTES.md: D1 unsplit
/// 96% of copy vs 91% split).
constexpr int64_t kNoSplitSlackNum = 9, kNoSplitSlackDen = 8;

/// Equal chunks of a tile whose keys cost `work` on CTAs with `room` for keys
/// each (the running target less the fixed cost): ceil(work / room) chunks
/// when each is then at most 1/kEqualTol under the room (the difference
/// drifts into later targets), else floor(work / room) when each is at most
/// 1/kEqualTol over it; 0 when neither (the greedy fill then cuts at the
/// targets). D4: 131072 keys over rooms of 1986 -> 66 chunks of 1984 / 2048.
constexpr int64_t kEqualTol = 64;
/// Rounds of the split-cost fixed point (see plan()). Each is a pass over the
/// tiles; one already holds the balance tests' bounds (D3 <= 1.07, D4 <=
/// 1.03), and three cost 1.5x the plan time.
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

namespace {

/// Greedy filling of CTAs in tile order (step 3 of the file comment). The fast
/// path for a tile that fits whole is inlined in plan(); place() handles the
/// rest: splitting at a granule boundary or moving on to the next CTA.
struct Assigner {
  int32_t *ctaIndptr = nullptr, *mergeIndptr = nullptr;
  WorkItem *items = nullptr;
  MergeUnit *units = nullptr;
  int32_t maxItems = 0, numItems = 0, numUnits = 0, numSlots = 0;
  int64_t C = 0, cta = 0, acc = 0, assigned = 0, total = 0, target = 0;
  int64_t fi = 0, ft = 1, granule = 1, minChunk = 1;
  int64_t makespan = 0; ///< largest closed CTA cost
  int64_t reserve = 0;  ///< split fixed costs counted in `total` ahead of time
  bool split = true, overflow = false;
  /// Count and cost only, write nothing: the no-split trial (plan()).
  bool dry = false;

  void closeCta() {
    ++cta;
    if (!dry)
      ctaIndptr[cta] = numItems;
    makespan = std::max(makespan, acc);
    assigned += acc;
    acc = 0;
    target = ceilDiv(std::max<int64_t>(total - assigned, 0), C - cta);
  }

  void emit(int32_t b, int32_t g, int32_t r0, int32_t rc, int32_t k0, int32_t k1,
            bool first, bool last) {
    if (numItems >= maxItems) {
      overflow = true;
      return;
    }
    bool direct = first && last;
    if (dry) {
      ++numItems;
      return;
    }
    items[numItems++] = {b, g, r0, rc, k0, k1, direct ? -1 : numSlots++,
                         (first ? kItemFirstChunk : 0) |
                             (last ? kItemLastChunk : 0) |
                             (direct ? kItemDirect : 0)};
  }

  /// Extra piece of a split tile: its fixed cost comes from the reserve
  /// counted up front, or on top of the total once that is used up.
  void chargeExtraPiece() {
    if (reserve >= fi)
      reserve -= fi;
    else
      total += fi;
  }

  /// Places one tile that does not fit the current CTA whole.
  __attribute__((noinline)) void place(int32_t b, int32_t g, int32_t r,
                                       int32_t rc, int32_t kb, int32_t ke) {
    bool first = true;
    int pieces = 0;
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
          if (n >= 2) {
            const int64_t len = ke - kb;
            int64_t from = kb;
            for (int64_t j = 1; j <= n && !overflow; ++j) {
              // Boundary j at kb + j * len / n, to the nearest granule.
              int64_t at =
                  j < n ? (kb + len * j / n + granule / 2) / granule * granule
                        : ke;
              if (j > 1) // piece 1's fixed cost is in the total already
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
          int64_t at = (kb + room / ft + granule / 2) / granule * granule;
          if (at - kb >= minChunk && ke - at >= minChunk) {
            // The second piece pays the fixed cost again.
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
        if (acc > 0 && acc + cost - target > target - acc) {
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
    if (pieces > 1) {
      if (!dry) {
        units[numUnits] = {b, g, r, rc};
        mergeIndptr[numUnits + 1] = numSlots;
      }
      ++numUnits;
    }
  }

  /// Equal chunks for `len` keys starting on an empty CTA, or 0 to fill
  /// CTAs greedily instead (equalChunkCount). Never more chunks than CTAs
  /// left; every chunk keeps minChunk keys.
  int64_t equalChunks(int64_t len) const {
    const int64_t n = equalChunkCount(len * ft, target - fi);
    const int64_t maxN =
        std::min<int64_t>(len / (minChunk + granule), C - cta);
    return n >= 2 && n <= maxN ? n : 0;
  }
};

} // namespace

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
  if (Status s = validateInputs(c, in); !s.ok())
    return s;
  Lengths len{c, in};

  // Pick the tile: the smallest estimated makespan, first on ties.
  int32_t cand = c.graph_mode ? c.graph_candidate : 0;
  const int64_t C = l.max_ctas;
  int64_t total = 0, largest = 0, tiles = 0;
  if (c.graph_mode || c.num_candidates == 1) {
    batchCost(c, len, c.candidates[cand], &total, &largest, &tiles);
  } else {
    int64_t best = std::numeric_limits<int64_t>::max();
    for (int32_t i = 0; i < c.num_candidates; ++i) {
      int64_t tot, big, count;
      batchCost(c, len, c.candidates[i], &tot, &big, &count);
      int64_t est = ceilDiv(tot, C);
      if (c.disable_split)
        est = std::max(est, big);
      if (est < best) {
        best = est;
        cand = i;
        total = tot;
        largest = big;
        tiles = count;
      }
    }
  }
  const TileCandidate &t = c.candidates[cand];

  int32_t *w = static_cast<int32_t *>(workspace);
  const int64_t target0 = ceilDiv(total, C);
  // Chunk boundaries fall on multiples of the KV tile rounded up to whole blocks.
  int64_t granule = t.kv_tile;
  if (c.indexing == KVIndexing::Paged)
    granule = ceilDiv(granule, c.block_size) * c.block_size;
  const int32_t P = t.gqa_pack, Q = t.q_rows;
  const int32_t groups = c.num_qo_heads / P;

  // Splitting adds a fixed cost per extra chunk. Counted only as it happens,
  // it raised the running target CTA after CTA and piled up on the last
  // CTAs (D4: 1.45x the mean). Estimate it up front instead: a tile that
  // may split (>= 2 chunks' worth of keys) gets the chunks place() will cut
  // from an empty CTA; kReserveRounds rounds of the fixed point (the rest, e.g. head
  // pieces, is added as it happens).
  const int64_t minChunk =
      c.min_chunk_tokens > 0 ? c.min_chunk_tokens : 2 * granule;
  int64_t splitReserve = 0, splitTarget = target0;
  if (!c.disable_split && t.cost_per_item > 0) {
    for (int round = 0; round < kReserveRounds; ++round) {
      int64_t extra = 0;
      for (int32_t b = 0; b < in.batch; ++b) {
        const int32_t qo = len.qoLen(b), kv = len.kvLen(b);
        const int32_t rows = qo * P;
        for (int32_t r = 0; r < rows; r += Q) {
          const int32_t rc = std::min(Q, rows - r);
          const Range k = visibleKeys(c, qo, kv, r / P, (r + rc - 1) / P);
          const int64_t keys = k.end - k.begin;
          if (keys < 2 * minChunk)
            continue;
          // Pieces as place() will cut them from an empty CTA: equal chunks,
          // or about one per target (a head piece may add one more).
          const int64_t room = splitTarget - t.cost_per_item;
          int64_t n = equalChunkCount(keys * t.cost_per_kv_token, room);
          if (n == 0 || n > keys / (minChunk + granule))
            n = ceilDiv(itemCost(t, keys), splitTarget);
          extra += n - 1;
        }
      }
      extra = std::min<int64_t>(extra * groups, C - 1);
      splitReserve = extra * t.cost_per_item;
      splitTarget = std::max<int64_t>(ceilDiv(total + splitReserve, C), 1);
    }
  }

  // One greedy pass (step 3) into the workspace, splitting or not.
  auto assign = [&](Assigner &a, bool split, bool dry = false) {
    a = Assigner();
    a.dry = dry;
    a.ctaIndptr = w + l.off_cta_indptr;
    a.items = reinterpret_cast<WorkItem *>(w + l.off_items);
    a.mergeIndptr = w + l.off_merge_indptr;
    a.units = reinterpret_cast<MergeUnit *>(w + l.off_merge_units);
    a.maxItems = l.max_items;
    a.C = C;
    a.reserve = split ? splitReserve : 0;
    a.total = total + a.reserve;
    a.target = ceilDiv(a.total, C);
    a.fi = t.cost_per_item;
    a.ft = t.cost_per_kv_token;
    a.split = split;
    a.granule = granule;
    a.minChunk = minChunk;
    a.ctaIndptr[0] = 0;
    a.mergeIndptr[0] = 0;
    // When splitting, the tiles too short to split go first and the long
    // ones last: the CTAs of whole short tiles end up to a tile's cost off
    // the target, and only the long tiles' chunks can absorb that drift (D3:
    // 4 x 640 = 2560 per CTA against a target of 2670; placed in request
    // order, the drift piled 5 short tiles on each of the last CTAs).
    for (int pass = split ? 0 : 1; pass < 2; ++pass)
    for (int32_t b = 0; b < in.batch && !a.overflow; ++b) {
      const int32_t qo = len.qoLen(b), kv = len.kvLen(b);
      const int32_t rows = qo * P;
      for (int32_t r = 0; r < rows; r += Q) {
        const int32_t rc = std::min(Q, rows - r);
        const Range k = visibleKeys(c, qo, kv, r / P, (r + rc - 1) / P);
        if (split && (pass == 0) != (k.end - k.begin < 2 * minChunk))
          continue;
        const int64_t cost = a.fi + int64_t(k.end - k.begin) * a.ft;
        for (int32_t g = 0; g < groups; ++g) {
          // Fast path: the whole tile fits the current CTA.
          if ((a.acc + cost <= a.target || a.cta == C - 1) &&
              a.numItems < a.maxItems) {
            if (!a.dry)
              a.items[a.numItems] = {b, g, r, rc, k.begin, k.end, -1,
                                     kItemFirstChunk | kItemLastChunk |
                                         kItemDirect};
            ++a.numItems;
            a.acc += cost;
            if (a.acc >= a.target && a.cta != C - 1)
              a.closeCta();
            continue;
          }
          a.place(b, g, r, rc, k.begin, k.end);
        }
      }
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
  bool planned = false;
  // Only batches of similar tiles are tried: with a tile over twice the mean
  // (skewed batches) the greedy fill piles the difference on the last CTAs
  // and the trial fails, at the price of a whole extra walk.
  if (!c.disable_split &&
      largest * kNoSplitSlackDen <= target0 * kNoSplitSlackNum &&
      largest * tiles <= 2 * total) {
    // A dry run first: a trial that fails (skewed batches) then costs a
    // walk without the item writes, not a whole second plan.
    assign(a, false, /*dry=*/true);
    planned = !a.overflow &&
              a.makespan * kNoSplitSlackDen <= target0 * kNoSplitSlackNum;
    if (planned)
      assign(a, false);
  }
  if (!planned)
    assign(a, !c.disable_split);
  int32_t numItems = a.numItems, numUnits = a.numUnits, numSlots = a.numSlots;
  int64_t cta = a.cta;
  int32_t *ctaIndptr = a.ctaIndptr;
  bool overflow = a.overflow;
  if (overflow)
    return invalid(StatusCode::WorkspaceTooSmall,
                   "internal: work list exceeded its bound of " +
                       std::to_string(l.max_items) + " items");
  // Close the open CTA; trim trailing empty CTAs unless the grid is fixed.
  int64_t used = cta + ((numItems > ctaIndptr[cta]) ? 1 : 0);
  ctaIndptr[cta + 1] = numItems;
  int64_t numCtas = c.graph_mode ? C : used;
  for (int64_t i = cta + 1; i <= C; ++i)
    ctaIndptr[i] = numItems;

  std::memset(w, 0, kPlanHeaderWords * 4);
  w[kHdrMagic] = kPlanMagic;
  w[kHdrVersion] = kPlanAbiVersion;
  w[kHdrNumCtas] = int32_t(numCtas);
  w[kHdrNumItems] = numItems;
  w[kHdrNumMergeUnits] = numUnits;
  w[kHdrNumSlots] = numSlots;
  w[kHdrCandidate] = cand;
  w[kHdrTileQ] = Q;
  w[kHdrGqaPack] = P;
  w[kHdrKvGranule] = int32_t(a.granule);
  w[kHdrNumHeadGroups] = groups;
  w[kHdrMaxCtas] = l.max_ctas;
  w[kHdrMaxItems] = l.max_items;
  w[kHdrMaxMergeUnits] = l.max_merge_units;
  w[kHdrOffCtaIndptr] = l.off_cta_indptr;
  w[kHdrOffItems] = l.off_items;
  w[kHdrOffMergeIndptr] = l.off_merge_indptr;
  w[kHdrOffMergeUnits] = l.off_merge_units;
  w[kHdrTotalWords] = l.total_words;
  w[kHdrMaxSlots] = l.max_slots;
  w[kHdrSlotRows] = l.slot_rows;
  w[kHdrHeadDim] = c.head_dim;
  w[kHdrBatch] = in.batch;
  w[kHdrTotalQRows] = in.qo_indptr[in.batch];
  w[kHdrGraphMode] = c.graph_mode;
  w[kHdrPartialOOffsetLo] = int32_t(uint32_t(l.partial_o_offset));
  w[kHdrPartialOOffsetHi] = int32_t(uint32_t(uint64_t(l.partial_o_offset) >> 32));
  w[kHdrPartialLseOffsetLo] = int32_t(uint32_t(l.partial_lse_offset));
  w[kHdrPartialLseOffsetHi] =
      int32_t(uint32_t(uint64_t(l.partial_lse_offset) >> 32));
  w[kHdrNumQoHeads] = c.num_qo_heads;
  w[kHdrNumKvHeads] = c.num_kv_heads;
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

Status viewPlan(const void *workspace, size_t bytes, PlanView *view) {
  if (!workspace || !view)
    return invalid(StatusCode::InvalidArgument, "plan buffer or view is null");
  if (bytes < kPlanHeaderWords * 4)
    return invalid(StatusCode::WorkspaceTooSmall, "plan buffer smaller than a header");
  const int32_t *w = static_cast<const int32_t *>(workspace);
  if (w[kHdrMagic] != kPlanMagic || w[kHdrVersion] != kPlanAbiVersion)
    return invalid(StatusCode::InvalidArgument,
                   "buffer holds no plan of ABI version " +
                       std::to_string(kPlanAbiVersion));
  if (size_t(w[kHdrTotalWords]) * 4 > bytes || w[kHdrNumItems] > w[kHdrMaxItems] ||
      w[kHdrNumCtas] > w[kHdrMaxCtas] ||
      w[kHdrNumMergeUnits] > w[kHdrMaxMergeUnits])
    return invalid(StatusCode::InvalidArgument, "plan header is inconsistent");
  view->words = w;
  return Status::success();
}

void planCtaCosts(const PlanConfig &config, const PlanView &view,
                  int64_t *costs) {
  const TileCandidate &t = config.candidates[view.candidate()];
  const int32_t *ind = view.ctaIndptr();
  for (int32_t c = 0; c < view.numCtas(); ++c) {
    int64_t sum = 0;
    for (int32_t i = ind[c]; i < ind[c + 1]; ++i)
      sum += itemCost(t, view.items()[i].kv_end - view.items()[i].kv_begin);
    costs[c] = sum;
  }
}

} // namespace attn::runtime
