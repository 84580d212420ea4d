//===- RuntimeFuzz.cpp - Bytes into the manifest parser and the planner ---===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// One fuzz target over the runtime's untrusted inputs (issue #15). The first
// byte picks what the rest becomes:
//   0  manifest JSON text -> parseManifest (and the candidates and row grids
//      of what parses)
//   1  PlanConfig + PlanInputs -> computePlanLayout, plan, viewPlan
//   2  a flat plan buffer -> viewPlan, and a walk of what it accepts
// Every input must give a Status; a plan() that says Ok must pass viewPlan,
// and a buffer viewPlan accepts must be walkable inside its bytes (ASan
// checks the walk in the sanitizer build). A violation aborts.
//
// g++ has no libFuzzer, so main() runs a fixed, seeded number of inputs
// (random bytes and mutations of valid seeds: the documented manifest with
// two row kernels, valid configs and batches, a real plan) as a ctest. Built
// with clang and -DATTN_LIBFUZZER (target AttnRuntimeLibFuzzer), the same
// function is libFuzzer's LLVMFuzzerTestOneInput.
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/Launcher.h"
#include "attn/Runtime/Manifest.h"
#include "attn/Runtime/Plan.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace attnrt;

namespace {

[[noreturn]] void violation(const char *what, const std::string &detail) {
  std::fprintf(stderr, "fuzz: invariant violated: %s: %s\n", what,
               detail.c_str());
  std::abort();
}

/// Reads the fuzz bytes as fields; zeros once they run out.
struct Bytes {
  const uint8_t *p;
  size_t n, at = 0;
  uint8_t u8() { return at < n ? p[at++] : 0; }
  int32_t raw32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= uint32_t(u8()) << (8 * i);
    return int32_t(v);
  }
  /// A field value: mostly in [lo, hi] (the valid range), sometimes an
  /// edge, sometimes anything.
  int32_t field(int32_t lo, int32_t hi) {
    const uint8_t k = u8();
    if (k < 200)
      return lo + int32_t(k % (hi - lo + 1));
    static const int32_t edges[] = {-1, 0, 1, 2, 16, 17, 128, 1 << 16, 1 << 28,
                                    1 << 30, INT32_MAX, INT32_MIN, INT32_MAX - 1};
    if (k < 245)
      return edges[k % (sizeof(edges) / sizeof(edges[0]))];
    return raw32();
  }
  /// 1, 2, 4 or 8 mostly; an edge or anything sometimes.
  int32_t pow2() {
    const int32_t k = field(0, 3);
    return k >= 0 && k <= 3 ? 1 << k : k;
  }
};

struct Counts {
  long manifests = 0, manifestsOk = 0, plans = 0, plansOk = 0, views = 0,
       viewsOk = 0;
} counts;

void fuzzManifest(const uint8_t *p, size_t n) {
  ++counts.manifests;
  Manifest m;
  Status s = parseManifest(std::string_view(reinterpret_cast<const char *>(p), n), &m);
  if (s.ok()) {
    ++counts.manifestsOk;
    for (const KernelManifest &k : m.kernels) {
      TileCandidate t = k.candidate();
      if (k.role == KernelRole::Attention && (t.q_rows <= 0 || t.gqa_pack <= 0))
        violation("manifest", "accepted a kernel with a bad tile: " + k.name);
      if (k.name.empty() || k.name.find('\0') != std::string::npos)
        violation("manifest", "accepted a bad kernel name");
      if (isRowKernel(k.role)) {
        const int32_t i = k.argIndex(plan_args::kNumRows);
        if (k.rows_per_cta < 1 || i < 0 || k.args[i].kind != ArgKind::I32)
          violation("manifest", "accepted a row kernel without rows_per_cta "
                                "or an i32 num_rows: " + k.name);
        const int64_t g = rowGrid(k, 2147483647, 1 << 20);
        if (g < 1 || g > 2147483647)
          violation("manifest", "a row grid out of range: " + k.name);
      }
    }
  } else if (s.message().empty()) {
    violation("manifest", "an error without a message");
  }
}

/// Walks every array of an accepted plan, as a consumer would: the stored
/// arrays, then the whole plan with its head-group copies applied.
void walk(const PlanView &v) {
  const int32_t *ci = v.ctaIndptr();
  int64_t sum = 0;
  for (int32_t c = 0; c < v.copyCtas(); ++c)
    if (ci[c + 1] < ci[c] || ci[c + 1] > v.copyItems())
      violation("viewPlan", "accepted a bad cta_indptr");
  for (int32_t c = 0; c < v.numCtas(); ++c) {
    int32_t first, last;
    v.ctaItems(c, &first, &last);
    if (first < 0 || last < first || last > v.numItems())
      violation("viewPlan", "accepted CTA ranges outside the items");
    for (int32_t i = first; i < last; ++i) {
      const WorkItem it = v.item(i);
      if (it.slot >= v.numSlots() || it.request >= v.header(kHdrBatch) ||
          it.head_group >= v.header(kHdrNumHeadGroups))
        violation("viewPlan", "accepted an item out of range");
      sum += it.kv_end - it.kv_begin;
    }
  }
  for (int32_t u = 0; u < v.numMergeUnits(); ++u) {
    int32_t s0, s1;
    v.unitSlots(u, &s0, &s1);
    if (s1 > v.numSlots() || v.unit(u).head_group >= v.header(kHdrNumHeadGroups))
      violation("viewPlan", "accepted a merge unit out of range");
    sum += v.unit(u).row_count + s1 - s0;
  }
  if (sum < 0)
    violation("viewPlan", "negative key ranges");
  if (v.deviceBytes() < v.partialLseOffset())
    violation("viewPlan", "device bytes wrapped: " +
                              std::to_string(v.deviceBytes()) + " < " +
                              std::to_string(v.partialLseOffset()));
}

void fuzzPlan(Bytes &b) {
  ++counts.plans;
  PlanConfig c;
  c.num_kv_heads = b.field(1, 8);
  c.num_qo_heads = int32_t(uint32_t(c.num_kv_heads) * uint32_t(b.pow2()));
  c.head_dim = b.field(1, 255);
  c.indexing = KVIndexing(b.field(0, 1));
  c.block_size = b.field(1, 32);
  c.causal = b.field(0, 1);
  c.window_left = b.field(-1, 200);
  c.has_custom_mask = b.field(0, 1);
  c.num_sms = b.field(1, 64);
  c.ctas_per_sm = b.field(1, 3);
  c.graph_mode = b.field(0, 1);
  c.graph_candidate = b.field(0, 2);
  c.max_batch = b.field(0, 32);
  c.max_total_q_rows = b.field(0, 1000);
  c.min_chunk_tokens = b.field(0, 255);
  c.disable_split = b.field(0, 1);
  c.max_partial_rows = b.field(0, 1) ? b.field(0, 4000) : 0;
  c.num_candidates = b.field(1, 3);
  for (int i = 0; i < kMaxTileCandidates; ++i) {
    TileCandidate &t = c.candidates[i];
    t.q_rows = b.field(1, 128);
    t.kv_tile = b.field(1, 128);
    t.gqa_pack = b.pow2();
    t.cost_per_item = b.field(0, 64);
    t.cost_per_kv_token = b.field(1, 4);
    t.ctas_per_sm = b.field(0, 2);
    t.min_chunk_tokens = b.field(0, 128);
  }
  PlanLayout l;
  Status ls = computePlanLayout(c, &l);
  if (!ls.ok()) {
    if (ls.message().empty())
      violation("computePlanLayout", "an error without a message");
    if (planHostWorkspaceBytes(c) != 0)
      violation("planHostWorkspaceBytes", "nonzero for a refused config");
    return;
  }
  if (l.device_bytes < l.partial_lse_offset || l.partial_lse_offset < l.partial_o_offset ||
      l.partial_o_offset < size_t(l.total_words) * 4 || l.host_bytes < size_t(l.total_words) * 4)
    violation("computePlanLayout", "a layout whose parts overlap or wrap");
  // The batch: arrays of `n` requests; `batch` may claim more only beyond
  // max_batch (refused before anything is read).
  const int32_t n = std::min<int32_t>(b.u8() % 40, std::max(c.max_batch, 0));
  std::vector<int32_t> qo(n + 1), kv(n + 1), last(std::max(n, 1)), lens(std::max(n, 1));
  for (int32_t i = 0; i <= n; ++i) {
    // Mostly increasing, by the bytes.
    const uint8_t k = b.u8();
    // (uint32 sums: an edge value wraps instead of overflowing.)
    qo[i] = i == 0 ? (k < 250 ? 0 : b.field(0, 4))
                   : int32_t(uint32_t(qo[i - 1]) +
                             uint32_t(k < 240 ? k % 9 : b.field(0, 100)));
    const uint8_t j = b.u8();
    kv[i] = i == 0 ? (j < 250 ? 0 : b.field(0, 4))
                   : int32_t(uint32_t(kv[i - 1]) +
                             uint32_t(j < 240 ? j % 80 : b.field(0, 100)));
  }
  for (int32_t i = 0; i < n; ++i) {
    last[i] = b.field(1, std::max(c.block_size, 1));
    lens[i] = int32_t(uint32_t(b.field(0, 255)) * 8u);
  }
  PlanInputs in;
  in.batch = b.u8() < 245 ? n : b.field(0, 4);
  if (in.batch > n && in.batch <= c.max_batch)
    in.batch = n; // the arrays hold n requests
  in.qo_indptr = qo.data();
  in.kv_indptr = kv.data();
  const uint8_t which = b.u8();
  in.kv_last_len = which % 4 != 0 ? last.data() : nullptr;
  in.kv_lens = which % 3 == 0 ? lens.data() : nullptr;
  std::vector<int32_t> idx;
  if (which % 2 == 0 && n >= 0 && kv[n] >= 0 && kv[n] <= (1 << 16)) {
    idx.resize(kv[n]);
    in.num_cache_blocks = b.field(0, 255);
    for (int32_t &x : idx)
      x = b.u8() < 250 ? int32_t(b.u8()) % std::max(in.num_cache_blocks, 1)
                       : b.field(0, 4);
    in.kv_indices = idx.data();
  }
  if (l.host_bytes > (size_t(16) << 20))
    return; // a valid config of a large plan; the random batch adds nothing
  std::vector<int32_t> ws(l.host_bytes / 4 + 1, -7);
  const size_t bytes = b.u8() < 250 ? l.host_bytes : size_t(b.u8()) * 4;
  Status s = plan(c, in, ws.data(), std::min(bytes, ws.size() * 4));
  if (!s.ok()) {
    if (s.message().empty())
      violation("plan", "an error without a message");
    return;
  }
  ++counts.plansOk;
  PlanView v;
  Status vs = viewPlan(ws.data(), l.host_bytes, &v);
  if (!vs.ok())
    violation("plan", "Ok, but viewPlan refuses it: " + vs.message());
  if (v.deviceBytes() > l.device_bytes)
    violation("plan", "a plan reaching past planDeviceWorkspaceBytes");
  walk(v);
}

void fuzzView(const uint8_t *p, size_t n) {
  ++counts.views;
  std::vector<int32_t> w(n / 4 + 1, 0);
  std::memcpy(w.data(), p, n);
  // Half the time, a plan header so the checks past the magic run.
  if (n >= 8 && (p[0] & 1)) {
    w[kHdrMagic] = kPlanMagic;
    w[kHdrVersion] = kPlanAbiVersion;
  }
  PlanView v;
  if (viewPlan(w.data(), n / 4 * 4, &v).ok()) {
    ++counts.viewsOk;
    walk(v);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  switch (data[0] % 3) {
  case 0:
    fuzzManifest(data + 1, size - 1);
    break;
  case 1: {
    Bytes b{data + 1, size - 1};
    fuzzPlan(b);
    break;
  }
  case 2:
    fuzzView(data + 1, size - 1);
    break;
  }
  return 0;
}

#ifndef ATTN_LIBFUZZER

namespace {

/// The documented manifest (docs/Manifest.md) and two row kernels, the seed
/// of the mutations.
const char kSeedManifest[] = R"json({"attn_manifest_version": 1, "compiler_version": "attn 0.1.0", "arch": "sm_90a",
"kernels": [{"name": "attn_decode_q16_kv64_p4", "role": "attention", "threads": 128, "shared_bytes": 65536,
"tile": {"q": 16, "kv": 64, "warps": 4, "stages": 2, "gqa_pack": 4},
"format": {"block_rows": 1, "block_cols": 16, "layout": "NHD", "indexing": "paged"},
"dtype": "bf16", "head_dim": 128, "num_qo_heads": 32, "num_kv_heads": 8,
"cost": {"per_item": 256, "per_kv_token": 1}, "variant_params": [{"name": "window_left", "type": "i32"}],
"args": [{"name": "plan", "kind": "ptr"}, {"name": "cta_indptr", "kind": "ptr"}, {"name": "work_items", "kind": "ptr"},
{"name": "partial_o", "kind": "ptr"}, {"name": "partial_lse", "kind": "ptr"}, {"name": "slot_rows", "kind": "i32"},
{"name": "q", "kind": "ptr"}, {"name": "sm_scale", "kind": "f32"}, {"name": "window_left", "kind": "i32"}]},
{"name": "attn_merge_d128", "role": "merge", "threads": 128, "shared_bytes": 0, "dtype": "bf16",
"head_dim": 128, "num_qo_heads": 32, "num_kv_heads": 8, "merge_ctas": "unit_rows", "merge_rows_per_cta": 4, "pdl": 1,
"args": [{"name": "plan", "kind": "ptr"}, {"name": "merge_indptr", "kind": "ptr"}, {"name": "merge_units", "kind": "ptr"},
{"name": "partial_o", "kind": "ptr"}, {"name": "partial_lse", "kind": "ptr"}, {"name": "o", "kind": "ptr"}]},
{"name": "attn_merge_states_bf16_d128_n2", "role": "merge_states", "threads": 256, "shared_bytes": 0,
"ctas_per_sm": 8, "rows_per_cta": 16, "dtype": "bf16", "head_dim": 128, "num_qo_heads": 0, "num_kv_heads": 0,
"args": [{"name": "num_rows", "kind": "i32"}, {"name": "heads", "kind": "i32"}, {"name": "v0", "kind": "ptr"}]},
{"name": "attn_append_kv_bf16_d128_p16", "role": "append_kv", "threads": 128, "shared_bytes": 0, "rows_per_cta": 4,
"format": {"block_rows": 0, "block_cols": 16, "layout": "NHD", "indexing": "paged"}, "dtype": "bf16",
"head_dim": 128, "num_qo_heads": 0, "num_kv_heads": 0,
"args": [{"name": "num_rows", "kind": "i32"}, {"name": "k", "kind": "ptr"}]}]})json";

/// Tokens that mutate JSON into near-misses of valid manifests.
const char *const kTokens[] = {"{", "}", "[", "]", ",", ":", "\"", "\\u0000",
                               "\\", "null", "true", "-1", "0", "1e999", "2147483648",
                               "-2147483649", "4.5", "\"ptr\"", "\"merge\"", "[[[[[[[[",
                               "\"merge_states\"", "\"append_kv\"", "\"i32\""};

std::vector<uint8_t> mutateText(std::mt19937 &rng, std::string s) {
  const int edits = 1 + rng() % 6;
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = rng() % s.size();
    switch (rng() % 5) {
    case 0: s[at] = char(rng()); break;
    case 1: s.erase(at, 1 + rng() % 16); break;
    case 2: s.insert(at, kTokens[rng() % (sizeof(kTokens) / sizeof(kTokens[0]))]); break;
    case 3: { // duplicate a span
      const size_t len = std::min<size_t>(s.size() - at, 1 + rng() % 64);
      s.insert(rng() % s.size(), s.substr(at, len));
      break;
    }
    case 4: // replace a number with an edge
      if (s[at] >= '0' && s[at] <= '9')
        s.replace(at, 1, kTokens[12 + rng() % 5]);
      break;
    }
  }
  std::vector<uint8_t> out{0};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

/// A real plan's words as fuzz bytes (mode 2) with a few words mutated.
std::vector<uint8_t> mutatedPlan(std::mt19937 &rng) {
  static std::vector<int32_t> seed = [] {
    PlanConfig c;
    c.num_qo_heads = 8, c.num_kv_heads = 2, c.head_dim = 64, c.num_sms = 16;
    c.max_batch = 12, c.max_total_q_rows = 32, c.num_candidates = 1;
    c.candidates[0] = {16, 64, 4, 32, 1, 0, 0};
    std::vector<int32_t> qo{0}, kv{0}, last;
    for (int r = 0; r < 12; ++r) {
      qo.push_back(qo.back() + (r == 7 ? 5 : 1));
      const int tokens = r == 3 ? 9000 : r == 7 ? 4000 : 300;
      kv.push_back(kv.back() + (tokens + 15) / 16);
      last.push_back(tokens - (tokens + 15) / 16 * 16 + 16);
    }
    PlanInputs in;
    in.batch = 12, in.qo_indptr = qo.data(), in.kv_indptr = kv.data();
    in.kv_last_len = last.data();
    std::vector<int32_t> ws(planHostWorkspaceBytes(c) / 4 + 1);
    if (!plan(c, in, ws.data(), ws.size() * 4).ok())
      violation("seed", "the seed plan failed");
    ws.resize(ws[kHdrTotalWords]);
    return ws;
  }();
  std::vector<int32_t> w = seed;
  const int edits = 1 + rng() % 3;
  for (int e = 0; e < edits; ++e) {
    const size_t at = rng() % 4 ? rng() % kPlanHeaderWords : rng() % w.size();
    const int32_t vals[] = {-1, 0, 1, int32_t(uint32_t(w[at]) + 1),
                            int32_t(uint32_t(w[at]) - 1), INT32_MAX, INT32_MIN,
                            int32_t(rng())};
    w[at] = vals[rng() % 8];
  }
  if (rng() % 8 == 0)
    w.resize(rng() % w.size());
  std::vector<uint8_t> out(1 + w.size() * 4);
  out[0] = 2;
  std::memcpy(out.data() + 1, w.data(), w.size() * 4);
  // Keep the magic (bit 0 of the next byte is the first plan byte's).
  return out;
}

std::vector<uint8_t> randomBytes(std::mt19937 &rng, uint8_t mode) {
  std::vector<uint8_t> out(1 + rng() % 512);
  for (uint8_t &x : out)
    x = uint8_t(rng());
  out[0] = mode;
  return out;
}

} // namespace

int main(int argc, char **argv) {
  long iterations = 30000;
  uint32_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iterations"))
      iterations = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seed"))
      seed = uint32_t(std::strtoul(argv[i + 1], nullptr, 10));
    else {
      std::fprintf(stderr, "usage: %s [--iterations N] [--seed S]\n", argv[0]);
      return 2;
    }
  }
  std::mt19937 rng(seed);
  for (long i = 0; i < iterations; ++i) {
    std::vector<uint8_t> in;
    switch (i % 5) {
    case 0: in = mutateText(rng, kSeedManifest); break;
    case 1: in = randomBytes(rng, 1); break;
    case 2: in = mutatedPlan(rng); break;
    case 3: in = randomBytes(rng, uint8_t(rng() % 3)); break;
    case 4: in = randomBytes(rng, 1); break;
    }
    LLVMFuzzerTestOneInput(in.data(), in.size());
  }
  std::printf("fuzz: %ld inputs (seed %u): %ld manifests (%ld parsed), %ld "
              "plan configs+batches (%ld planned), %ld plan buffers (%ld "
              "accepted); 0 violations\n",
              iterations, seed, counts.manifests, counts.manifestsOk,
              counts.plans, counts.plansOk, counts.views, counts.viewsOk);
  return 0;
}

#endif // ATTN_LIBFUZZER
