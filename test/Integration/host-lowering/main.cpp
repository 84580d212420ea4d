//===- main.cpp - a host-lowered decode, checked against the reference ----===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Calls examples/host-decode.mlir's @decode, compiled by
// attn-to-llvm-pipeline into decode.o (kernels embedded, the attention a
// call of attnRtHostAttention), on a paged batch in managed memory, and
// compares o and lse with the runtime's float64 CPU reference
// (attn/Runtime/Reference.h). Prints PASS or FAIL with the max errors.
// Without a usable GPU it still runs the compiled function, on host memory:
// the runtime then checks the generated call's kernels and sizes against
// the embedded manifest and stops at its first driver use, so the program
// prints SKIPPED (exit 0) if that is what failed, FAIL otherwise. build.sh
// builds it.
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

/// What @decode returns: its outs buffers (the C interface returns them
/// through a pointer in front of the arguments).
struct DecodeResults {
  MemRef<3> o;
  MemRef<2> lse;
};

extern "C" void _mlir_ciface_decode(DecodeResults *results, MemRef<3> *q,
                                    MemRef<4> *k, MemRef<4> *v,
                                    MemRef<1> *qoIndptr, MemRef<1> *kvIndptr,
                                    MemRef<1> *kvIndices, MemRef<1> *kvLastLen,
                                    MemRef<3> *o, MemRef<2> *lse);

int main() {
  // Four requests of one new token each, over pages in shuffled order.
  const std::vector<int32_t> kvLens = {37, 300, 16, 1029};
  const int32_t batch = int32_t(kvLens.size());
  std::vector<int32_t> qoIndptr(batch + 1), kvIndptr(batch + 1), lastLen(batch);
  for (int32_t b = 0; b < batch; ++b) {
    qoIndptr[b + 1] = b + 1;
    int32_t pages = (kvLens[b] + kPage - 1) / kPage;
    kvIndptr[b + 1] = kvIndptr[b] + pages;
    lastLen[b] = kvLens[b] - (pages - 1) * kPage;
  }
  const int32_t usedPages = kvIndptr[batch], numPages = usedPages + 7;
  std::vector<int32_t> indices(usedPages);
  std::mt19937 rng(14);
  std::vector<int32_t> perm(numPages);
  for (int32_t i = 0; i < numPages; ++i)
    perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int32_t i = 0; i < usedPages; ++i)
    indices[i] = perm[i];

  const int64_t qElems = int64_t(batch) * kHq * kD;
  const int64_t cacheElems = int64_t(numPages) * kPage * kHkv * kD;
  uint64_t dq = 0, dk = 0, dv = 0, dqo = 0, dkvp = 0, dkvi = 0, dlast = 0,
           dout = 0, dlse = 0;
  struct Alloc {
    uint64_t *ptr;
    size_t bytes;
  } allocs[] = {{&dq, size_t(qElems) * 2},       {&dk, size_t(cacheElems) * 2},
                {&dv, size_t(cacheElems) * 2},   {&dqo, size_t(batch + 1) * 4},
                {&dkvp, size_t(batch + 1) * 4},  {&dkvi, size_t(usedPages) * 4},
                {&dlast, size_t(batch) * 4},     {&dout, size_t(qElems) * 2},
                {&dlse, size_t(batch) * kHq * 4}};
  bool hostOnly = false;
  std::string noGpu;
  for (Alloc &a : allocs) {
    attnRtStatus s = hostOnly ? ATTN_RT_CUDA_UNAVAILABLE
                              : attnRtDeviceAllocManaged(a.bytes, a.ptr);
    if (s == ATTN_RT_CUDA_UNAVAILABLE) {
      if (!hostOnly)
        noGpu = attnRtLastError();
      hostOnly = true;
      *a.ptr = reinterpret_cast<uint64_t>(std::calloc(a.bytes, 1));
    } else if (s != ATTN_RT_OK) {
      std::printf("FAIL: attnRtDeviceAllocManaged: %s\n", attnRtLastError());
      return 1;
    }
  }

  // Inputs in bf16 on the managed buffers, their exact values in float64.
  std::normal_distribution<float> normal(0.f, 1.f);
  auto fill = [&](uint64_t ptr, int64_t n, std::vector<double> &exact) {
    auto *h = reinterpret_cast<uint16_t *>(ptr);
    exact.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      h[i] = toBF16(normal(rng));
      exact[i] = fromBF16(h[i]);
    }
  };
  std::vector<double> q, k, v;
  fill(dq, qElems, q);
  fill(dk, cacheElems, k);
  fill(dv, cacheElems, v);
  std::memcpy(reinterpret_cast<void *>(dqo), qoIndptr.data(), (batch + 1) * 4);
  std::memcpy(reinterpret_cast<void *>(dkvp), kvIndptr.data(), (batch + 1) * 4);
  std::memcpy(reinterpret_cast<void *>(dkvi), indices.data(), usedPages * 4);
  std::memcpy(reinterpret_cast<void *>(dlast), lastLen.data(), batch * 4);

  auto mq = view(dq, {batch, kHq, kD});
  auto mk = view(dk, {numPages, kPage, kHkv, kD});
  auto mv = view(dv, {numPages, kPage, kHkv, kD});
  auto mqo = view(dqo, {batch + 1});
  auto mkvp = view(dkvp, {batch + 1});
  auto mkvi = view(dkvi, {usedPages});
  auto mlast = view(dlast, {batch});
  auto mo = view(dout, {batch, kHq, kD});
  auto mlse = view(dlse, {batch, kHq});
  DecodeResults results;
  _mlir_ciface_decode(&results, &mq, &mk, &mv, &mqo, &mkvp, &mkvi, &mlast, &mo,
                      &mlse);
  attnRtStreamSynchronize(0);
  const char *message = nullptr;
  attnRtStatus status = attnRtHostTakeStatus(&message);
  if (hostOnly) {
    if (status != ATTN_RT_CUDA_UNAVAILABLE) {
      std::printf("FAIL: without a GPU the call should stop at the driver, "
                  "got %s: %s\n",
                  attnRtStatusName(status), message);
      return 1;
    }
    std::printf("SKIPPED: no usable GPU (%s); the compiled call passed the "
                "runtime's checks against the embedded manifest\n",
                noGpu.c_str());
    return 0;
  }
  if (attnRtStatus s = status; s != ATTN_RT_OK) {
    std::printf("FAIL: %s: %s\n", attnRtStatusName(s), message);
    return 1;
  }

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
  p.variant.causal = 1;
  std::vector<double> refO(qElems), refLse(size_t(batch) * kHq);
  if (attnrt::Status s =
          attnrt::referenceAttention(p, refO.data(), refLse.data());
      !s.ok()) {
    std::printf("FAIL: reference: %s\n", s.message().c_str());
    return 1;
  }
  double maxO = 0, maxLse = 0;
  auto *o = reinterpret_cast<const uint16_t *>(dout);
  auto *lse = reinterpret_cast<const float *>(dlse);
  for (int64_t i = 0; i < qElems; ++i)
    maxO = std::fmax(maxO, std::fabs(fromBF16(o[i]) - refO[i]));
  for (size_t i = 0; i < refLse.size(); ++i)
    maxLse = std::fmax(maxLse, std::fabs(double(lse[i]) - refLse[i]));
  // bf16 output: half an ulp of |o| < 1 is 2^-9; the kernel's f32
  // accumulation and bf16 P add about as much.
  bool pass = maxO <= 2e-2 && maxLse <= 1e-3 && std::isfinite(maxO) &&
              std::isfinite(maxLse);
  std::printf("%s: paged decode, %d requests (GQA %d/%d, head_dim %d, bf16): "
              "max |o - ref| = %.3g, max |lse - ref| = %.3g\n",
              pass ? "PASS" : "FAIL", batch, kHq, kHkv, kD, maxO, maxLse);
  for (Alloc &a : allocs)
    attnRtDeviceFree(*a.ptr);
  return pass ? 0 : 1;
}
