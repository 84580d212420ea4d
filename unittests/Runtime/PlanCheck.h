//===- PlanCheck.h - Structural invariants of a plan ------------*- C++ -*-===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// checkPlan: every invariant a plan must hold against its batch (CTA ranges
// partition the work list, every tile's visible keys covered exactly once,
// slots and merge units consistent), as gtest assertions. Shared by the
// planner tests and the adversarial tests.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_UNITTESTS_RUNTIME_PLANCHECK_H
#define ATTN_UNITTESTS_RUNTIME_PLANCHECK_H

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

namespace attnrt::test {

/// Visible keys of a tile, mirroring the planner's documented clipping.
inline std::pair<int32_t, int32_t> visible(const PlanConfig &c, int32_t qo, int32_t kv,
                                    int32_t t0, int32_t t1) {
  int64_t b = 0, e = kv, base = int64_t(kv) - qo;
  if (c.causal && !c.has_custom_mask)
    e = std::clamp<int64_t>(base + t1 + 1, 0, kv);
  if (c.window_left >= 0)
    b = std::clamp<int64_t>(base + t0 - c.window_left, 0, kv);
  return {int32_t(std::min(b, e)), int32_t(e)};
}

/// Checks every structural invariant of a plan; returns the number of items.
inline void checkPlan(const PlanConfig &c, const Batch &b, const PlanView &v) {
  const int32_t P = v.gqaPack(), Q = v.tileQ();
  const int32_t groups = c.num_qo_heads / P;
  const int32_t granule = v.header(kHdrKvGranule);
  ASSERT_EQ(v.header(kHdrMagic), kPlanMagic);
  ASSERT_LE(v.numCtas(), v.header(kHdrMaxCtas));
  ASSERT_LE(v.numItems(), v.header(kHdrMaxItems));
  // The partial slots the workspace reserves (issue #13: never more).
  ASSERT_LE(v.numSlots(), v.header(kHdrMaxSlots));
  if (c.graph_mode) {
    ASSERT_EQ(v.numCtas(), getCandidateCtas(c, c.candidates[v.candidate()]));
  }
  // The plan carries the index arrays the kernels read: the batch's.
  ASSERT_EQ(v.batch(), b.size());
  for (int32_t r = 0; r <= b.size(); ++r) {
    ASSERT_EQ(v.qoIndptr()[r], b.qo_indptr[r]) << "qo_indptr[" << r << "]";
    ASSERT_EQ(v.kvIndptr()[r], b.kv_indptr[r]) << "kv_indptr[" << r << "]";
  }
  for (int32_t r = 0; r < b.size(); ++r) {
    const int32_t blocks = b.kv_indptr[r + 1] - b.kv_indptr[r];
    const int32_t last = c.indexing == KVIndexing::Paged && blocks > 0
                             ? b.kv_lens[r] - (blocks - 1) * c.block_size
                             : 0;
    ASSERT_EQ(v.kvLastLen()[r], last) << "kv_last_len[" << r << "]";
  }
  // The stored CTA ranges partition the stored items, and the CTAs'
  // ranges, copies applied, every item once.
  const int32_t *ind = v.ctaIndptr();
  ASSERT_GE(v.copies(), 1);
  ASSERT_EQ(v.numItems() % v.copies(), 0);
  ASSERT_EQ(ind[0], 0);
  for (int32_t i = 0; i < v.copyCtas(); ++i)
    ASSERT_LE(ind[i], ind[i + 1]);
  ASSERT_EQ(ind[v.copyCtas()], v.copyItems());
  std::vector<int> runs(v.numItems(), 0);
  for (int32_t c = 0; c < v.numCtas(); ++c) {
    int32_t first, last;
    v.ctaItems(c, &first, &last);
    ASSERT_LE(0, first);
    ASSERT_LE(first, last);
    ASSERT_LE(last, v.numItems());
    for (int32_t i = first; i < last; ++i)
      ++runs[i];
  }
  for (int n : runs)
    ASSERT_EQ(n, 1) << "an item is run by no CTA or by several";
  // Pieces per tile.
  using Key = std::tuple<int32_t, int32_t, int32_t>;
  std::map<Key, std::vector<const WorkItem *>> tiles;
  std::vector<int> slotUse(v.numSlots(), 0);
  std::vector<WorkItem> items(v.numItems());
  for (int32_t i = 0; i < v.numItems(); ++i) {
    const WorkItem &it = items[i] = v.item(i);
    ASSERT_GE(it.request, 0);
    ASSERT_LT(it.request, b.size());
    ASSERT_GE(it.head_group, 0);
    ASSERT_LT(it.head_group, groups);
    int64_t rows =
        int64_t(b.qo_indptr[it.request + 1] - b.qo_indptr[it.request]) * P;
    ASSERT_GE(it.row_begin, 0);
    ASSERT_GT(it.row_count, 0);
    ASSERT_LE(it.row_count, Q);
    ASSERT_LE(int64_t(it.row_begin) + it.row_count, rows);
    ASSERT_EQ(it.row_begin % Q, 0);
    ASSERT_LE(it.kv_begin, it.kv_end);
    if (it.flags & kItemDirect) {
      ASSERT_EQ(it.slot, -1);
      ASSERT_EQ(it.flags & (kItemFirstChunk | kItemLastChunk),
                kItemFirstChunk | kItemLastChunk);
    } else {
      ASSERT_GE(it.slot, 0);
      ASSERT_LT(it.slot, v.numSlots());
      ++slotUse[it.slot];
    }
    tiles[{it.request, it.head_group, it.row_begin}].push_back(&it);
  }
  for (int u : slotUse)
    ASSERT_EQ(u, 1) << "a partial slot is written by more than one item";
  // Every tile present, its chunks tile its visible range exactly once.
  int64_t expectTiles = 0;
  for (int32_t r = 0; r < b.size(); ++r) {
    int32_t qo = b.qo_indptr[r + 1] - b.qo_indptr[r], kv = b.kv_lens[r];
    const int64_t rowsOf = int64_t(qo) * P;
    for (int64_t row = 0; row < rowsOf; row += Q) {
      int32_t rc = int32_t(std::min<int64_t>(Q, rowsOf - row));
      auto [vb, ve] = visible(c, qo, kv, int32_t(row / P),
                              int32_t((row + rc - 1) / P));
      for (int32_t g = 0; g < groups; ++g) {
        ++expectTiles;
        auto found = tiles.find({r, g, int32_t(row)});
        ASSERT_NE(found, tiles.end()) << "tile missing: request " << r;
        auto pieces = found->second;
        std::sort(pieces.begin(), pieces.end(), [](auto *x, auto *y) {
          return x->kv_begin < y->kv_begin;
        });
        int32_t at = vb;
        for (size_t i = 0; i < pieces.size(); ++i) {
          const WorkItem &it = *pieces[i];
          ASSERT_EQ(it.row_count, rc);
          ASSERT_EQ(it.kv_begin, at) << "gap or overlap in request " << r;
          if (i + 1 < pieces.size()) {
            ASSERT_EQ(it.kv_end % granule, 0) << "split off the granule";
          }
          ASSERT_EQ((it.flags & kItemFirstChunk) != 0, i == 0);
          ASSERT_EQ((it.flags & kItemLastChunk) != 0, i + 1 == pieces.size());
          ASSERT_EQ((it.flags & kItemDirect) != 0, pieces.size() == 1);
          at = it.kv_end;
        }
        ASSERT_EQ(at, ve) << "visible range not fully covered, request " << r;
      }
    }
  }
  ASSERT_EQ(int64_t(tiles.size()), expectTiles);
  // Merge units: one per split tile, listing exactly its pieces' slots.
  int64_t splitTiles = 0;
  for (auto &[key, pieces] : tiles)
    splitTiles += pieces.size() > 1;
  ASSERT_EQ(v.numMergeUnits(), splitTiles);
  if (v.numMergeUnits() > 0) // nothing reads (nor uploads) it otherwise
    ASSERT_EQ(v.mergeIndptr()[0], 0);
  for (int32_t u = 0; u < v.numMergeUnits(); ++u) {
    const MergeUnit mu = v.unit(u);
    int32_t s0, s1;
    v.unitSlots(u, &s0, &s1);
    auto &pieces = tiles.at({mu.request, mu.head_group, mu.row_begin});
    ASSERT_EQ(s1 - s0, int32_t(pieces.size()));
    for (const WorkItem *it : pieces) {
      ASSERT_GE(it->slot, s0);
      ASSERT_LT(it->slot, s1);
      ASSERT_EQ(it->row_count, mu.row_count);
    }
  }
}

} // namespace attnrt::test

#endif // ATTN_UNITTESTS_RUNTIME_PLANCHECK_H
