//===- Plan.h - Planner ABI: work list, merge map, workspace ----*- C++ -*-===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// The ABI shared by the planner (CPU, every batch step), the generated kernels
// (which read the plan from device memory) and the CPU reference (which executes
// a plan exactly as the kernels do). No MLIR or LLVM includes: plain structs of
// fixed-width integers, trivially copyable.
//
// A plan is ONE flat int32 array. The caller sizes it with
// planHostWorkspaceBytes(), the planner fills it, one async copy moves it to
// the start of the device workspace, and the kernels read it there. It holds
// copies of the index arrays it was planned from, so the kernels read the
// same qo_indptr, kv_indptr and kv_last_len the planner did, and an eager
// step uploads this one buffer. The device workspace continues with the
// float32 partial-output buffers.
//
// Flat plan layout (int32 words; offsets are in the header and depend ONLY on
// the PlanConfig, never on the batch, so CUDA-graph-captured pointers stay valid):
//
//   header        [kPlanHeaderWords]          see PlanHeaderField
//   qo_indptr     [max_batch + 1]             the inputs' copy (query tokens)
//   kv_indptr     [max_batch + 1]             the inputs' copy (blocks or tokens)
//   kv_last_len   [max_batch]                 paged: tokens in the last block
//                                             (from kv_lens if given); ragged: 0
//   cta_indptr    [max_ctas + 1]              stored CTA c runs items cta_indptr[c] .. cta_indptr[c+1]-1
//   work_items    [max_items][kWorkItemWords] see WorkItem
//   merge_indptr  [max_merge_units + 1]       unit u merges slots merge_indptr[u] .. merge_indptr[u+1]-1
//   merge_units   [max_merge_units][kMergeUnitWords] see MergeUnit
//
// Head-group copies. Without a mask every head group of a request sees the
// same keys, so a plan may hold the work of the first `copies` head-group
// ranges once: the arrays above then hold ONE copy (copy_ctas CTAs, their
// items, merge units and slots, over head groups 0 .. copy_groups-1), and
// copy g of it is the same work moved by g * copy_groups head groups and
// g * copy_slots partial slots. CTA c runs copy g = c / copy_ctas (nothing
// when g >= copies) with the stored CTA c - g * copy_ctas; merge unit u is
// copy u / copy_units of stored unit u % copy_units. The header's counts
// (num_items, num_merge_units, num_slots) are the whole plan's: copies x the
// stored ones. A decode batch over 8 head groups thus uploads an eighth of
// its work list (PlanView::item() and friends apply the mapping).
//
// The host workspace continues with planner scratch that is never uploaded.
// Device workspace (bytes): [flat plan, padded to 256] [partial_o] [partial_lse]
//   partial_o   float32 [partial_rows][head_dim]   = [max_slots][slot_rows][head_dim]
//   partial_lse float32 [partial_rows]             (base-2 log-sum-exp)
// partial_rows is the most any candidate needs (its partial-slot bound times
// its q_rows; the slot bound is kSplitSlotsPerCta x its CTAs, a fixed split's
// its work list, 0 without splitting; PlanConfig::max_partial_rows may cap
// it); a plan's header gives the picked candidate's slot_rows (its q_rows)
// and max_slots (partial_rows / slot_rows), so the buffers never hold a
// 128-row slot per item of a 16-row tile.
//
// Query packing. A plan uses one TileCandidate with q_rows = Q and gqa_pack = P
// (P divides Hq/Hkv). The query heads are split into Hq/P "head groups"; group
// g holds query heads g*P .. g*P+P-1, which share KV head (g*P) / (Hq/Hkv). In a
// request with qo_len tokens a group has qo_len*P "packed rows"; packed row r is
// token r / P (relative to the request's first query row) and query head
// g*P + r % P. A work tile covers up to Q consecutive packed rows of one request
// and one head group, against a range [kv_begin, kv_end) of the request's keys
// (token positions 0 .. kv_len-1 in the request's KV sequence).
//
// Outputs. o is [total_q_rows, Hq, head_dim], lse is [total_q_rows, Hq] (base 2).
// A tile whose KV range was not split writes o/lse directly (flag Direct, slot
// -1). A split tile becomes several work items (chunks), each writing rows
// 0 .. row_count-1 of its own partial slot; a MergeUnit then combines the slots
// merge_indptr[u] .. merge_indptr[u+1]-1 (always consecutive) by LSE into o/lse.
// The chunk flagged FirstChunk adds the per-head attention sink (if any) to its
// softmax denominator, so the merged LSE counts the sink exactly once.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_RUNTIME_PLAN_H
#define ATTN_RUNTIME_PLAN_H

#include "attn/Runtime/Status.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace attnrt {

/// Version of the flat plan layout below; bumped on any change.
constexpr int32_t kPlanAbiVersion = 3;
/// First header word of every plan ("ATNP" little-endian).
constexpr int32_t kPlanMagic = 0x504E5441;
constexpr int32_t kPlanHeaderWords = 48;
constexpr int32_t kWorkItemWords = 8;
constexpr int32_t kMergeUnitWords = 4;
constexpr int32_t kMaxTileCandidates = 8;
/// Alignment of the partial buffers inside the device workspace.
constexpr size_t kDeviceAlign = 256;
/// Partial slots the workspace holds per CTA of a candidate's grid (the
/// balancing planner's split pieces). Splitting only pays while the tiles do
/// not fill the grid, and each CTA boundary cuts at most one tile: a plan has
/// at most CTAs - 1 split tiles and CTAs - 1 pieces beyond their first, so
/// 2 x CTAs, whatever the batch's query rows (the planner checks it, keeping
/// a tile whole rather than pass it).
constexpr int64_t kSplitSlotsPerCta = 2;

/// How the KV indptr is counted.
enum class KVIndexing : int32_t {
  Paged = 0,  ///< kv_indptr counts blocks of block_size tokens (+ last-block lengths)
  Ragged = 1, ///< kv_indptr counts tokens (contiguous KV per request)
};

/// Memory layout of one KV block (or of ragged KV).
enum class KVLayout : int32_t {
  NHD = 0, ///< [block][token][kv_head][dim]
  HND = 1, ///< [block][kv_head][token][dim]
};

/// Header words of a flat plan.
enum PlanHeaderField : int32_t {
  kHdrMagic = 0,
  kHdrVersion = 1,
  kHdrNumCtas = 2,       ///< persistent grid size to launch (fixed in graph mode)
  kHdrNumItems = 3,      ///< work items of all copies
  kHdrNumMergeUnits = 4, ///< merge units of all copies
  kHdrNumSlots = 5,      ///< partial slots used by all copies
  kHdrCandidate = 6,     ///< index of the chosen TileCandidate
  kHdrTileQ = 7,         ///< packed rows per tile (Q)
  kHdrGqaPack = 8,       ///< query heads packed per head group (P)
  kHdrKvGranule = 9,     ///< chunk boundaries are multiples of this many tokens
  kHdrNumHeadGroups = 10,
  kHdrMaxCtas = 11,
  kHdrMaxItems = 12,
  kHdrMaxMergeUnits = 13,
  kHdrOffCtaIndptr = 14, ///< word offsets of the arrays in the flat plan
  kHdrOffItems = 15,
  kHdrOffMergeIndptr = 16,
  kHdrOffMergeUnits = 17,
  kHdrTotalWords = 18,   ///< words of the flat plan (the upload copies planUploadSpans)
  kHdrMaxSlots = 19,
  kHdrSlotRows = 20,     ///< row stride of a partial slot (max q_rows over candidates)
  kHdrHeadDim = 21,
  kHdrBatch = 22,
  kHdrTotalQRows = 23,
  kHdrGraphMode = 24,
  kHdrPartialOOffsetLo = 25, ///< byte offset of partial_o in the device workspace
  kHdrPartialOOffsetHi = 26,
  kHdrPartialLseOffsetLo = 27,
  kHdrPartialLseOffsetHi = 28,
  kHdrNumQoHeads = 29,
  kHdrNumKvHeads = 30,
  kHdrOffQoIndptr = 31,  ///< word offsets of the index arrays' copies
  kHdrOffKvIndptr = 32,
  kHdrOffKvLastLen = 33,
  kHdrMaxBatch = 34,     ///< entries the index arrays are laid out for
  kHdrCopies = 35,       ///< head-group copies of the stored work (>= 1)
  kHdrCopyCtas = 36,     ///< CTAs of one copy (>= 1; cta_indptr's entries - 1)
  kHdrCopyGroups = 37,   ///< head groups of one copy
  kHdrCopyUnits = 38,    ///< merge units of one copy (the stored ones)
  kHdrCopySlots = 39,    ///< partial slots of one copy
  kHdrReserved = 40,     ///< .. kPlanHeaderWords - 1: zero
};

/// WorkItem::flags bits.
enum WorkItemFlags : int32_t {
  kItemFirstChunk = 1, ///< first chunk of its tile: adds the sink term
  kItemLastChunk = 2,  ///< last chunk of its tile
  kItemDirect = 4,     ///< tile not split: write o/lse directly, slot == -1
};

/// One unit of persistent-CTA work: packed rows [row_begin, row_begin+row_count)
/// of (request, head_group) against keys [kv_begin, kv_end) of the request.
/// kv_begin == kv_end is legal (rows then get output 0, LSE -inf, or the sink).
struct WorkItem {
  int32_t request;
  int32_t head_group;
  int32_t row_begin; ///< packed row, relative to the request (token*P + head%P)
  int32_t row_count; ///< 1 .. Q
  int32_t kv_begin;  ///< key token positions within the request
  int32_t kv_end;
  int32_t slot;      ///< partial slot, or -1 when kItemDirect
  int32_t flags;     ///< WorkItemFlags
};
static_assert(sizeof(WorkItem) == kWorkItemWords * 4, "WorkItem is ABI");
static_assert(std::is_trivially_copyable_v<WorkItem>);

/// One split tile to merge: slots merge_indptr[u] .. merge_indptr[u+1]-1 each
/// hold rows 0..row_count-1 of this tile; the merge writes o/lse.
struct MergeUnit {
  int32_t request;
  int32_t head_group;
  int32_t row_begin;
  int32_t row_count;
};
static_assert(sizeof(MergeUnit) == kMergeUnitWords * 4, "MergeUnit is ABI");

/// A query tile the compiler produced, with its cost model. The cost of a work
/// item over n keys is cost_per_item + n * cost_per_kv_token (any unit, same
/// for all candidates). The manifest's "tile" and "cost" objects fill this.
struct TileCandidate {
  int32_t q_rows;            ///< packed rows per tile (Q), >= 1
  int32_t kv_tile;           ///< keys per inner iteration; chunks align to it
  int32_t gqa_pack;          ///< query heads packed per KV head (P), divides Hq/Hkv
  int32_t cost_per_item;     ///< fixed cost of one work item (>= 0)
  int32_t cost_per_kv_token; ///< cost of one key for a whole tile (>= 1)
  int32_t ctas_per_sm;       ///< CTAs its kernel keeps per SM; 0: the config's
  int32_t min_chunk_tokens;  ///< shortest KV chunk when splitting; 0: the config's
};

/// Everything that stays fixed across batch steps. The workspace layout is a
/// function of this struct alone.
struct PlanConfig {
  int32_t num_qo_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  KVIndexing indexing = KVIndexing::Paged;
  int32_t block_size = 16;   ///< tokens per KV block (paged); ignored for ragged
  int32_t causal = 0;        ///< bottom-right aligned causal mask (docs/Semantics.md)
  int32_t window_left = -1;  ///< sliding window; < 0: none
  int32_t has_custom_mask = 0; ///< custom mask replaces causal (window still ANDed)
  int32_t num_sms = 0;
  int32_t ctas_per_sm = 1;   ///< CTAs per SM of candidates that name none
  int32_t graph_mode = 0;    ///< 1: fixed grid and kernel across plans
  int32_t graph_candidate = 0; ///< graph mode: the candidate always used
  int32_t max_batch = 0;     ///< maximum requests per plan (both modes)
  int32_t max_total_q_rows = 0; ///< maximum query tokens per plan (both modes)
  int32_t min_chunk_tokens = 0; ///< shortest KV chunk of candidates naming none; 0: 2 granules
  int32_t disable_split = 0; ///< 1: never split KV (no merge needed)
  int32_t num_candidates = 0;
  TileCandidate candidates[kMaxTileCandidates] = {};
  /// > 0: batch-invariant split. Every tile's keys are cut at the multiples
  /// of this many tokens (rounded up to the candidate's KV granule), whatever
  /// the rest of the batch, and merged in key order; nothing else is split.
  /// disable_split wins when both are set. 0: the balancing planner's cuts.
  int32_t fixed_split_tokens = 0;
  /// fixed_split_tokens only: the most keys a plan's query tiles of one head
  /// group see in total (decode: the batch's KV tokens); it bounds the extra
  /// chunks the work list and the partial buffers are sized for.
  int64_t max_kv_tokens = 0;
  /// > 0: at most this many rows of partial buffers (e.g. what the caller's
  /// buffer holds), below the grid's bound (kSplitSlotsPerCta x CTAs x
  /// q_rows of the neediest candidate). The balancing planner then splits
  /// fewer tiles (never fails for it); a fixed split whose exact chunks need
  /// more slots is GraphMaximaExceeded. 0: the bound itself.
  int64_t max_partial_rows = 0;
};
static_assert(std::is_trivially_copyable_v<PlanConfig>);

/// Per-step inputs, host copies. kv_last_len or kv_lens describes paged lengths.
struct PlanInputs {
  int32_t batch = 0;
  const int32_t *qo_indptr = nullptr;   ///< [batch+1] query tokens, starts at 0
  const int32_t *kv_indptr = nullptr;   ///< [batch+1] blocks (paged) or tokens (ragged)
  const int32_t *kv_last_len = nullptr; ///< [batch] paged: tokens in the last block
  const int32_t *kv_lens = nullptr;     ///< [batch] optional: KV lengths in tokens
  const int32_t *kv_indices = nullptr;  ///< optional [kv_indptr[batch]]: validated if given
  int32_t num_cache_blocks = 0;         ///< blocks in the cache (checks kv_indices)
};

/// Request `b`'s KV length in tokens: its indptr span (ragged), or whole
/// blocks plus its last block's fill (paged). The one definition the
/// planner, the reference and the host calls read lengths by.
inline int32_t requestKVLength(KVIndexing indexing, int32_t blockSize,
                               const int32_t *indptr, const int32_t *lastLen,
                               int32_t b) {
  int32_t n = indptr[b + 1] - indptr[b];
  if (indexing == KVIndexing::Ragged)
    return n;
  return n == 0 ? 0 : (n - 1) * blockSize + lastLen[b];
}

/// Word offsets and sizes implied by a PlanConfig.
struct PlanLayout {
  int32_t max_ctas = 0, max_items = 0, max_merge_units = 0;
  int64_t partial_rows = 0;      ///< rows of the partial buffers
  /// The slots of candidate `t`: its rows per slot and how many fit.
  int32_t getSlotRows(const TileCandidate &t) const { return t.q_rows; }
  int32_t getMaxSlots(const TileCandidate &t) const {
    return int32_t(partial_rows / t.q_rows);
  }
  int32_t off_qo_indptr = 0, off_kv_indptr = 0, off_kv_last_len = 0;
  int32_t off_cta_indptr = 0, off_items = 0, off_merge_indptr = 0,
          off_merge_units = 0, total_words = 0;
  /// Host-only planner scratch after the flat plan (never uploaded): the
  /// longest-first assignment's row tiles, tile owners and CTA keys.
  int32_t off_scratch = 0, max_row_tiles = 0;
  size_t host_bytes = 0;         ///< flat plan + scratch bytes
  size_t partial_o_offset = 0;   ///< in the device workspace
  size_t partial_lse_offset = 0;
  size_t device_bytes = 0;       ///< whole device workspace
};

/// The persistent grid of candidate `t`'s kernel: num_sms times its CTAs per
/// SM (the config's when the candidate names none).
int64_t getCandidateCtas(const PlanConfig &config, const TileCandidate &t);

/// Chunk boundaries of candidate `t` fall on multiples of this many keys:
/// its kv_tile, rounded up to whole blocks when paged.
int64_t getKvGranule(const PlanConfig &config, const TileCandidate &t);
/// The chunk length of a fixed split under candidate `t`: the config's
/// fixed_split_tokens rounded up to a multiple of its KV granule.
int64_t getFixedSplitTokens(const PlanConfig &config, const TileCandidate &t);

/// Validates the config and computes the layout.
Status computePlanLayout(const PlanConfig &config, PlanLayout *layout);

/// Bytes of host workspace plan() needs (the flat plan and the planner's
/// scratch). 0 on a bad config.
size_t planHostWorkspaceBytes(const PlanConfig &config);
/// Bytes of device workspace run() needs (flat plan + partial buffers).
size_t planDeviceWorkspaceBytes(const PlanConfig &config);

/// Plans one batch step into `workspace` (host, 4-byte aligned, at least
/// planHostWorkspaceBytes). Validates every input first; deterministic; does
/// not allocate.
Status plan(const PlanConfig &config, const PlanInputs &inputs, void *workspace,
            size_t workspaceBytes);

/// Read-only view of a flat plan (host or a host copy of the device one).
struct PlanView {
  const int32_t *words = nullptr;

  int32_t header(PlanHeaderField f) const { return words[f]; }
  int32_t numCtas() const { return words[kHdrNumCtas]; }
  int32_t numItems() const { return words[kHdrNumItems]; }
  int32_t numMergeUnits() const { return words[kHdrNumMergeUnits]; }
  int32_t numSlots() const { return words[kHdrNumSlots]; }
  int32_t tileQ() const { return words[kHdrTileQ]; }
  int32_t gqaPack() const { return words[kHdrGqaPack]; }
  int32_t slotRows() const { return words[kHdrSlotRows]; }
  int32_t candidate() const { return words[kHdrCandidate]; }
  int32_t batch() const { return words[kHdrBatch]; }
  /// The index arrays the plan was made from (batch + 1, batch + 1, batch).
  const int32_t *qoIndptr() const { return words + words[kHdrOffQoIndptr]; }
  const int32_t *kvIndptr() const { return words + words[kHdrOffKvIndptr]; }
  const int32_t *kvLastLen() const { return words + words[kHdrOffKvLastLen]; }
  /// The stored arrays: one head-group copy's (see "Head-group copies").
  const int32_t *ctaIndptr() const { return words + words[kHdrOffCtaIndptr]; }
  const WorkItem *items() const {
    return reinterpret_cast<const WorkItem *>(words + words[kHdrOffItems]);
  }
  const int32_t *mergeIndptr() const { return words + words[kHdrOffMergeIndptr]; }
  const MergeUnit *mergeUnits() const {
    return reinterpret_cast<const MergeUnit *>(words + words[kHdrOffMergeUnits]);
  }
  int32_t copies() const { return words[kHdrCopies]; }
  int32_t copyCtas() const { return words[kHdrCopyCtas]; }
  int32_t copyItems() const { return numItems() / copies(); }
  int32_t copyUnits() const { return words[kHdrCopyUnits]; }

  /// The whole plan, copies applied, as the kernels run it. CTA c's items
  /// are [*first, *last) of item(); merge unit u merges slots [*first,
  /// *last).
  void ctaItems(int32_t c, int32_t *first, int32_t *last) const {
    const int32_t g = c / copyCtas(), stored = c - g * copyCtas();
    const int32_t base = g * copyItems();
    *first = *last = 0;
    if (g < copies())
      *first = base + ctaIndptr()[stored], *last = base + ctaIndptr()[stored + 1];
  }
  WorkItem item(int32_t i) const {
    const int32_t n = copyItems(), g = i / n;
    WorkItem it = items()[i - g * n];
    it.head_group += g * words[kHdrCopyGroups];
    if (it.slot >= 0)
      it.slot += g * words[kHdrCopySlots];
    return it;
  }
  MergeUnit unit(int32_t u) const {
    const int32_t g = u / copyUnits();
    MergeUnit m = mergeUnits()[u - g * copyUnits()];
    m.head_group += g * words[kHdrCopyGroups];
    return m;
  }
  void unitSlots(int32_t u, int32_t *first, int32_t *last) const {
    const int32_t g = u / copyUnits(), k = u - g * copyUnits();
    *first = mergeIndptr()[k] + g * words[kHdrCopySlots];
    *last = mergeIndptr()[k + 1] + g * words[kHdrCopySlots];
  }
  size_t bytes() const { return size_t(words[kHdrTotalWords]) * 4; }
  size_t partialOOffset() const;
  size_t partialLseOffset() const;
  /// Device workspace bytes the plan's arrays reach (the end of the
  /// partial_lse rows of max_slots slots): run() refuses a smaller device
  /// workspace. At most planDeviceWorkspaceBytes of the plan's config.
  size_t deviceBytes() const;
};

/// A byte range of a flat plan: what one upload copy moves.
struct PlanSpan {
  size_t offset = 0, bytes = 0;
};
/// Gaps between the parts a plan uses shorter than this are copied rather
/// than split into another copy: a copy call costs the host ~2 us, about what
/// 32 KiB take over PCIe.
constexpr size_t kPlanUploadGapBytes = 32 * 1024;
/// Most spans planUploadSpans fills.
constexpr int32_t kMaxPlanSpans = 6;
/// The parts of a flat plan the kernels read, in order: the header with the
/// batch's qo_indptr, its kv_indptr, its kv_last_len, cta_indptr and the
/// work items up to num_items, merge_indptr and the merge units up to
/// num_merge_units (neither without merge units: nothing reads them then).
/// The layout is laid out for the config's maxima (captured pointers never
/// move), so a batch's plan is usually a small part of total_words; the
/// upload copies these spans only. Spans closer than kPlanUploadGapBytes are
/// joined (one span, unless the maxima leave large gaps). Returns how many
/// of `spans` it filled (1 to kMaxPlanSpans).
int32_t planUploadSpans(const PlanView &plan, PlanSpan spans[kMaxPlanSpans]);

/// Checks that `bytes` of `workspace` hold a plan of this ABI version before
/// anything reads it: magic and version; every count within its maximum and
/// every maximum within the planner's limits; the arrays in order inside
/// total_words (<= bytes / 4); the partial buffers aligned after the plan;
/// qo_indptr from 0 to total_q_rows and kv_indptr from 0, both monotone,
/// kv_last_len non-negative; the copies' fields consistent with the counts
/// (each count the stored one times copies, copies x copy_groups head
/// groups at most, copies x copy_ctas CTAs at most); the stored arrays:
/// cta_indptr from 0 to num_items / copies and monotone; merge_indptr from
/// 0 to copy_slots and increasing (no slots and merge_indptr unread
/// without merge units); each stored merge unit's and work item's request,
/// head group and rows inside the header's batch, copy_groups and tile, its
/// keys ordered, its slot below copy_slots (or -1 for a direct item). A corrupt or
/// foreign buffer gets InvalidArgument naming the first bad field.
Status viewPlan(const void *workspace, size_t bytes, PlanView *view);

/// Cost of one work item under a candidate (the planner's model).
inline int64_t itemCost(const TileCandidate &c, int64_t kvTokens) {
  return int64_t(c.cost_per_item) + kvTokens * int64_t(c.cost_per_kv_token);
}

/// The candidate a batch of `batch` requests with `totalQRows` query tokens
/// runs: the one with the fewest rows (q_rows) that still holds the average
/// packed query length (tokens per request times the candidate's gqa_pack),
/// the tallest when none does; the first among equals. The query tile
/// follows the batch's average query length, so decode and speculative
/// verification do not pay for a prefill tile. The compiler picks a tile for
/// a known query length with the same rule (attn-select-tile).
inline int32_t selectTileCandidate(const TileCandidate *candidates,
                                   int32_t count, int64_t totalQRows,
                                   int64_t batch) {
  int32_t best = -1, tallest = 0;
  for (int32_t i = 0; i < count; ++i) {
    const TileCandidate &t = candidates[i];
    if (t.q_rows > candidates[tallest].q_rows)
      tallest = i;
    int64_t packed =
        batch > 0 ? (totalQRows * t.gqa_pack + batch - 1) / batch : 0;
    if (packed <= t.q_rows &&
        (best < 0 || t.q_rows < candidates[best].q_rows))
      best = i;
  }
  return best >= 0 ? best : tallest;
}

/// Per-CTA cost of a plan under its candidate, for balance checks and reports.
/// `costs` has room for numCtas() entries.
void planCtaCosts(const PlanConfig &config, const PlanView &view,
                  int64_t *costs);

} // namespace attnrt

#endif // ATTN_RUNTIME_PLAN_H
