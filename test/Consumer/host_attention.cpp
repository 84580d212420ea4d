//===- host_attention.cpp - a host-lowered program vs the reference ------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Calls examples/host-attention.mlir's four functions, compiled by the
// installed attn-opt's attn-to-llvm-pipeline into attention.o (kernels
// embedded, each attention a call of attnRtHostAttention; CMakeLists.txt),
// on paged batches in managed memory (a decode, a causal prefill, a prefill
// with a sliding window and a soft cap given as parameters, one with a
// bit-packed custom mask), and compares o and lse with the
// runtime's float64 CPU reference (attn/Runtime/Reference.h); then calls
// @decode with an output in host malloc memory, which the runtime must
// refuse, and @decode_own_outputs, which allocates its results itself
// (managed memory) and runs on the stream it is given (the per-thread
// default stream). Prints PASS or FAIL per case. Without a usable GPU it still runs
// the compiled calls, on host memory: the runtime then checks their kernels
// and sizes against the embedded manifest and stops at its first driver
// use, so the program prints SKIPPED (exit 0) if that is what failed, FAIL
// otherwise.
//
//===----------------------------------------------------------------------===//

#include "attn-c/Runtime.h"
#include "attn/Runtime/Reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

/// A ranked memref descriptor as MLIR's C interface passes it.
template <int Rank> struct MemRef {
  void *allocated, *aligned;
  int64_t offset;
  int64_t sizes[Rank], strides[Rank];
};

template <int Rank>
MemRef<Rank> view(uint64_t ptr, const int64_t (&sizes)[Rank]) {
  MemRef<Rank> m{
      reinterpret_cast<void *>(ptr), reinterpret_cast<void *>(ptr), 0, {}, {}};
  int64_t stride = 1;
  for (int d = Rank - 1; d >= 0; --d) {
    m.sizes[d] = sizes[d];
    m.strides[d] = stride;
    stride *= sizes[d];
  }
  return m;
}

uint16_t toBF16(float f) { // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
double fromBF16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

constexpr int kHq = 32, kHkv = 8, kD = 128, kPage = 16;

} // namespace

/// What @decode and @prefill return: their outs buffers (the C interface
/// returns them through a pointer in front of the arguments).
struct AttentionResults {
  MemRef<3> o;
  MemRef<2> lse;
};

using Cache = MemRef<4>;
using Index = MemRef<1>;
extern "C" {
void _mlir_ciface_decode(AttentionResults *, MemRef<3> *, Cache *, Cache *,
                         Index *, Index *, Index *, Index *, MemRef<3> *,
                         MemRef<2> *);
void _mlir_ciface_prefill(AttentionResults *, MemRef<3> *, Cache *, Cache *,
                          Index *, Index *, Index *, Index *, MemRef<3> *,
                          MemRef<2> *);
void _mlir_ciface_prefill_gemma(AttentionResults *, MemRef<3> *, Cache *,
                                Cache *, Index *, Index *, Index *, Index *,
                                MemRef<3> *, MemRef<2> *, int32_t window_left,
                                float cap);
void _mlir_ciface_prefill_masked(AttentionResults *, MemRef<3> *, Cache *,
                                 Cache *, Index *, Index *, Index *, Index *,
                                 MemRef<1> *mask, MemRef<3> *, MemRef<2> *);
void _mlir_ciface_decode_own_outputs(AttentionResults *, MemRef<3> *, Cache *,
                                     Cache *, Index *, Index *, Index *,
                                     Index *, uint64_t stream);
}

/// The memrefs of a batch, as the entries take them.
struct Views {
  MemRef<3> q;
  Cache k, v;
  Index qo, kvp, kvi, last;
  MemRef<3> o;
  MemRef<2> lse;
  MemRef<1> mask;
};

namespace {

/// A paged batch in managed memory (or, without a GPU, host memory), its
/// inputs also kept exactly in float64 for the reference.
class PagedBatch {
public:
  /// Request b has qoLens[b] new tokens, the last of its kvLens[b] keys.
  PagedBatch(std::vector<int32_t> qoLens, std::vector<int32_t> kvLens,
             uint32_t seed)
      : qoLens(std::move(qoLens)), kvLens(std::move(kvLens)), rng(seed) {}

  /// Allocates and fills everything; false with `error` set on failure.
  /// `noGpu` becomes the reason if the GPU is missing (then host memory).
  bool build(std::string &error, std::string &noGpu) {
    batch = int32_t(kvLens.size());
    qoIndptr.assign(batch + 1, 0);
    kvIndptr.assign(batch + 1, 0);
    lastLen.assign(batch, 0);
    for (int32_t b = 0; b < batch; ++b) {
      qoIndptr[b + 1] = qoIndptr[b] + qoLens[b];
      int32_t pages = (kvLens[b] + kPage - 1) / kPage;
      kvIndptr[b + 1] = kvIndptr[b] + pages;
      lastLen[b] = kvLens[b] - (pages - 1) * kPage;
    }
    rows = qoIndptr[batch];
    const int32_t usedPages = kvIndptr[batch];
    numPages = usedPages + 7;
    std::vector<int32_t> perm(numPages);
    for (int32_t i = 0; i < numPages; ++i)
      perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    indices.assign(perm.begin(), perm.begin() + usedPages);

    qElems = int64_t(rows) * kHq * kD;
    const int64_t cacheElems = int64_t(numPages) * kPage * kHkv * kD;
    struct Alloc {
      uint64_t *ptr;
      size_t bytes;
    } allocs[] = {{&dq, size_t(qElems) * 2},      {&dk, size_t(cacheElems) * 2},
                  {&dv, size_t(cacheElems) * 2},  {&dqo, size_t(batch + 1) * 4},
                  {&dkvp, size_t(batch + 1) * 4}, {&dkvi, size_t(usedPages) * 4},
                  {&dlast, size_t(batch) * 4},    {&dout, size_t(qElems) * 2},
                  {&dlse, size_t(rows) * kHq * 4}};
    for (Alloc &a : allocs) {
      attnRtStatus s = hostOnly ? ATTN_RT_CUDA_UNAVAILABLE
                                : attnRtDeviceAllocManaged(a.bytes, a.ptr);
      if (s == ATTN_RT_CUDA_UNAVAILABLE) {
        if (!hostOnly)
          noGpu = attnRtLastError();
        hostOnly = true;
        *a.ptr = reinterpret_cast<uint64_t>(std::calloc(a.bytes, 1));
      } else if (s != ATTN_RT_OK) {
        error = std::string("attnRtDeviceAllocManaged: ") + attnRtLastError();
        return false;
      }
      owned.push_back(*a.ptr);
    }
    fill(dq, qElems, q);
    fill(dk, cacheElems, k);
    fill(dv, cacheElems, v);
    std::memcpy(ptr(dqo), qoIndptr.data(), (batch + 1) * 4);
    std::memcpy(ptr(dkvp), kvIndptr.data(), (batch + 1) * 4);
    std::memcpy(ptr(dkvi), indices.data(), usedPages * 4);
    std::memcpy(ptr(dlast), lastLen.data(), batch * 4);
    return true;
  }

  ~PagedBatch() {
    for (uint64_t p : owned) {
      if (hostOnly)
        std::free(ptr(p));
      else
        attnRtDeviceFree(p);
    }
  }

  /// A random custom mask, bit-packed little-endian, each request from a
  /// new byte (kept on the host too, for the reference).
  bool buildMask(std::string &error) {
    std::bernoulli_distribution keep(0.7);
    int64_t bytes = 0;
    std::vector<int64_t> starts;
    for (int32_t b = 0; b < batch; ++b) {
      starts.push_back(bytes);
      bytes += (int64_t(qoLens[b]) * kvLens[b] + 7) / 8;
    }
    mask.assign(size_t(bytes), 0);
    for (int32_t b = 0; b < batch; ++b)
      for (int64_t bit = 0; bit < int64_t(qoLens[b]) * kvLens[b]; ++bit)
        if (keep(rng))
          mask[size_t(starts[b] + bit / 8)] |= uint8_t(1u << (bit % 8));
    if (hostOnly) {
      dmask = reinterpret_cast<uint64_t>(std::calloc(mask.size() + 1, 1));
    } else if (attnRtDeviceAllocManaged(mask.size(), &dmask) != ATTN_RT_OK) {
      error = std::string("attnRtDeviceAllocManaged: ") + attnRtLastError();
      return false;
    }
    owned.push_back(dmask);
    std::memcpy(ptr(dmask), mask.data(), mask.size());
    return true;
  }

  /// Calls `entry(views)` on the batch, o written to `out` (default: the
  /// batch's own output buffer); the runtime's status afterwards.
  template <typename Entry>
  attnRtStatus call(Entry entry, const char **message, uint64_t out = 0,
                    uint64_t stream = 0) {
    Views w{view(dq, {rows, kHq, kD}),
            view(dk, {numPages, kPage, kHkv, kD}),
            view(dv, {numPages, kPage, kHkv, kD}),
            view(dqo, {batch + 1}),
            view(dkvp, {batch + 1}),
            view(dkvi, {kvIndptr[batch]}),
            view(dlast, {batch}),
            view(out ? out : dout, {rows, kHq, kD}),
            view(dlse, {rows, kHq}),
            view(dmask, {int64_t(mask.size())})};
    entry(w);
    attnRtStreamSynchronize(stream);
    return attnRtHostTakeStatus(message);
  }

  /// Compares the output (default: the batch's own o and lse buffers) with
  /// the float64 reference; prints PASS or FAIL.
  bool check(const char *what, attnrt::Variant variant, const void *out = nullptr,
             const void *outLse = nullptr) {
    attnrt::AttentionProblem p;
    p.batch = batch;
    p.qo_indptr = qoIndptr.data();
    p.num_qo_heads = kHq;
    p.num_kv_heads = kHkv;
    p.head_dim = kD;
    p.q = q.data();
    p.kv.indexing = attnrt::KVIndexing::Paged;
    p.kv.layout = attnrt::KVLayout::NHD;
    p.kv.block_size = kPage;
    p.kv.indptr = kvIndptr.data();
    p.kv.indices = indices.data();
    p.kv.last_len = lastLen.data();
    p.kv.num_blocks = numPages;
    p.kv.k = k.data();
    p.kv.v = v.data();
    p.variant = variant;
    if (!mask.empty()) {
      p.variant.custom_mask = mask.data();
      p.variant.mask_bit_packed = 1;
    }
    std::vector<double> refO(qElems), refLse(size_t(rows) * kHq);
    if (attnrt::Status s =
            attnrt::referenceAttention(p, refO.data(), refLse.data());
        !s.ok()) {
      std::printf("FAIL: %s: reference: %s\n", what, s.message().c_str());
      return false;
    }
    double maxO = 0, maxLse = 0;
    auto *o = static_cast<const uint16_t *>(out ? out : ptr(dout));
    auto *lse = static_cast<const float *>(outLse ? outLse : ptr(dlse));
    for (int64_t i = 0; i < qElems; ++i)
      maxO = std::fmax(maxO, std::fabs(fromBF16(o[i]) - refO[i]));
    for (size_t i = 0; i < refLse.size(); ++i)
      maxLse = std::fmax(maxLse, std::fabs(double(lse[i]) - refLse[i]));
    // bf16 output: half an ulp of |o| < 1 is 2^-9; the kernel's f32
    // accumulation and bf16 P add about as much.
    bool pass = maxO <= 2e-2 && maxLse <= 1e-3 && std::isfinite(maxO) &&
                std::isfinite(maxLse);
    std::printf("%s: %s, %d requests, %d query rows (GQA %d/%d, head_dim %d, "
                "bf16): max |o - ref| = %.3g, max |lse - ref| = %.3g\n",
                pass ? "PASS" : "FAIL", what, batch, rows, kHq, kHkv, kD, maxO,
                maxLse);
    return pass;
  }

  bool hostOnly = false;

private:
  static void *ptr(uint64_t p) { return reinterpret_cast<void *>(p); }
  void fill(uint64_t p, int64_t n, std::vector<double> &exact) {
    std::normal_distribution<float> normal(0.f, 1.f);
    auto *h = reinterpret_cast<uint16_t *>(p);
    exact.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      h[i] = toBF16(normal(rng));
      exact[i] = fromBF16(h[i]);
    }
  }

  std::vector<int32_t> qoLens, kvLens, qoIndptr, kvIndptr, lastLen, indices;
  std::mt19937 rng;
  int32_t batch = 0, rows = 0, numPages = 0;
  int64_t qElems = 0;
  uint64_t dq = 0, dk = 0, dv = 0, dqo = 0, dkvp = 0, dkvi = 0, dlast = 0,
           dout = 0, dlse = 0, dmask = 0;
  std::vector<uint64_t> owned;
  std::vector<uint8_t> mask;
  std::vector<double> q, k, v;
};

} // namespace

int main() {
  std::string error, noGpu;
  // Four requests of one new token each, over pages in shuffled order.
  PagedBatch decode({1, 1, 1, 1}, {37, 300, 16, 1029}, 14);
  // Prefill chunks: a whole prompt (qo = kv), chunks over longer caches
  // (qo < kv), one a partial page, one a single token.
  const std::vector<int32_t> qoLens = {300, 128, 77, 1, 256};
  const std::vector<int32_t> kvLens = {300, 700, 1029, 16, 256};
  PagedBatch prefill(qoLens, kvLens, 15), gemma(qoLens, kvLens, 16),
      masked(qoLens, kvLens, 17);
  for (PagedBatch *b : {&decode, &prefill, &gemma, &masked})
    if (!b->build(error, noGpu)) {
      std::printf("FAIL: %s\n", error.c_str());
      return 1;
    }
  if (!masked.buildMask(error)) {
    std::printf("FAIL: %s\n", error.c_str());
    return 1;
  }

  // Gemma-2's variants: causal, a 200-key window, logits capped at 30.
  const int32_t window = 200;
  const float cap = 30.f;
  attnrt::Variant causal, gemmaVariant, none;
  causal.causal = 1;
  gemmaVariant.causal = 1;
  gemmaVariant.window_left = window;
  gemmaVariant.logits_soft_cap = cap;
  auto run = [](auto entry) {
    return [entry](Views &w) {
      AttentionResults r;
      entry(&r, &w.q, &w.k, &w.v, &w.qo, &w.kvp, &w.kvi, &w.last, &w.o, &w.lse);
    };
  };
  struct Case {
    const char *what;
    PagedBatch &batch;
    std::function<void(Views &)> entry;
    attnrt::Variant variant;
  } cases[] = {
      {"paged decode", decode, run(_mlir_ciface_decode), causal},
      {"paged causal prefill", prefill, run(_mlir_ciface_prefill), causal},
      {"paged prefill, causal + sliding window (a parameter) + soft cap", gemma,
       [&](Views &w) {
         AttentionResults r;
         _mlir_ciface_prefill_gemma(&r, &w.q, &w.k, &w.v, &w.qo, &w.kvp,
                                    &w.kvi, &w.last, &w.o, &w.lse, window, cap);
       },
       gemmaVariant},
      {"paged prefill, custom mask (bit-packed)", masked,
       [&](Views &w) {
         AttentionResults r;
         _mlir_ciface_prefill_masked(&r, &w.q, &w.k, &w.v, &w.qo, &w.kvp,
                                     &w.kvi, &w.last, &w.mask, &w.o, &w.lse);
       },
       none},
  };
  const char *message = nullptr;
  bool ok = true;
  // @decode_own_outputs' results, allocated by the compiled function.
  AttentionResults own{};
  // CU_STREAM_PER_THREAD: a stream handle other than 0 that needs no driver
  // call to make.
  const uint64_t perThreadStream = 2;
  auto ownOutputs = [&](Views &w) {
    _mlir_ciface_decode_own_outputs(&own, &w.q, &w.k, &w.v, &w.qo, &w.kvp,
                                    &w.kvi, &w.last, perThreadStream);
  };
  for (Case &c : cases) {
    attnRtStatus status = c.batch.call(c.entry, &message);
    if (c.batch.hostOnly) {
      if (status != ATTN_RT_CUDA_UNAVAILABLE) {
        std::printf("FAIL: %s: without a GPU the call should stop at the "
                    "driver, got %s: %s\n",
                    c.what, attnRtStatusName(status), message);
        ok = false;
      }
    } else if (status != ATTN_RT_OK) {
      std::printf("FAIL: %s: %s: %s\n", c.what, attnRtStatusName(status),
                  message);
      ok = false;
    } else {
      ok &= c.batch.check(c.what, c.variant);
    }
  }
  attnRtStatus ownStatus =
      decode.call(ownOutputs, &message, /*out=*/0, perThreadStream);
  const char *ownWhat = "paged decode into buffers the function allocates, on "
                        "the per-thread stream";
  if (decode.hostOnly) {
    // Without a GPU the function's own allocation is what fails.
    if (ownStatus != ATTN_RT_CUDA_UNAVAILABLE) {
      std::printf("FAIL: %s: without a GPU its allocation should fail, got "
                  "%s: %s\n",
                  ownWhat, attnRtStatusName(ownStatus), message);
      ok = false;
    }
  } else if (ownStatus != ATTN_RT_OK) {
    std::printf("FAIL: %s: %s: %s\n", ownWhat, attnRtStatusName(ownStatus),
                message);
    ok = false;
  } else {
    ok &= decode.check(ownWhat, causal, own.o.aligned, own.lse.aligned);
    attnRtDeviceFree(reinterpret_cast<uint64_t>(own.o.allocated));
    attnRtDeviceFree(reinterpret_cast<uint64_t>(own.lse.allocated));
  }
  if (decode.hostOnly) {
    if (ok)
      std::printf("SKIPPED: no usable GPU (%s); the compiled calls passed the "
                  "runtime's checks against the embedded manifest\n",
                  noGpu.c_str());
    return ok ? 0 : 1;
  }

  // An output in host malloc memory (what bufferization allocates for a
  // result without outs) is refused before any launch, naming the buffer.
  std::vector<uint16_t> hostOut(size_t(4) * kHq * kD);
  attnRtStatus status = decode.call(cases[0].entry, &message,
                                    reinterpret_cast<uint64_t>(hostOut.data()));
  bool refused = status == ATTN_RT_INVALID_ARGUMENT && message &&
                 std::strstr(message, "o is not memory the GPU can address");
  std::printf("%s: an output in host memory is refused (%s: %s)\n",
              refused ? "PASS" : "FAIL", attnRtStatusName(status),
              message ? message : "");
  ok &= refused;
  return ok ? 0 : 1;
}
