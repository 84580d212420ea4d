//===- Reference.cpp - Float64 CPU reference attention --------------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Direct float64 attention per docs/Semantics.md, row by row, and a plan executor
// that runs the planner's work list the way the kernels will (chunk partials,
// then the LSE merge). Written for clarity, not speed: CI runs it on 2 cores,
// so the tests keep head_dim and lengths small where values matter.
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/Reference.h"

#include <cmath>
#include <limits>
#include <string>

namespace attnrt {

static constexpr double kLn2 = 0.69314718055994530942;
static constexpr double kInf = std::numeric_limits<double>::infinity();

double alibiSlope(int32_t h, int32_t numHeads) {
  int32_t n = 1;
  while (n * 2 <= numHeads)
    n *= 2;
  if (h < n)
    return std::exp2(-8.0 * (h + 1) / n);
  int32_t k = h - n;
  return std::exp2(-4.0 * (2 * k + 1) / n);
}

static int32_t qoLen(const AttentionProblem &p, int32_t b) {
  return p.qo_indptr[b + 1] - p.qo_indptr[b];
}

static int32_t kvLen(const KVView &kv, int32_t b) {
  return requestKVLength(kv.indexing, kv.block_size, kv.indptr, kv.last_len, b);
}

Status checkProblem(const AttentionProblem &p) {
  auto bad = [](StatusCode c, std::string m) { return Status(c, std::move(m)); };
  if (p.batch < 0 || !p.qo_indptr || !p.kv.indptr)
    return bad(StatusCode::InvalidArgument,
               "problem needs batch >= 0, qo_indptr and kv.indptr");
  if ((p.qo_indptr[p.batch] > 0 && !p.q) ||
      (p.kv.indptr[p.batch] > 0 && (!p.kv.k || !p.kv.v)))
    return bad(StatusCode::InvalidArgument, "problem needs q, kv.k and kv.v");
  if (p.num_qo_heads <= 0 || p.num_kv_heads <= 0 ||
      p.num_qo_heads % p.num_kv_heads != 0)
    return bad(StatusCode::HeadCountMismatch,
               "num_qo_heads " + std::to_string(p.num_qo_heads) +
                   " is not a positive multiple of num_kv_heads " +
                   std::to_string(p.num_kv_heads));
  if (p.head_dim <= 0 || (p.variant.rope != RopeMode::None && p.head_dim % 2))
    return bad(StatusCode::InvalidArgument,
               "head_dim must be positive (and even with RoPE)");
  if (p.qo_indptr[0] != 0 || p.kv.indptr[0] != 0)
    return bad(StatusCode::NonMonotoneIndptr, "indptr arrays must start at 0");
  for (int32_t b = 0; b < p.batch; ++b) {
    if (p.qo_indptr[b + 1] < p.qo_indptr[b])
      return bad(StatusCode::NonMonotoneIndptr,
                 "qo_indptr is not monotone at request " + std::to_string(b));
    if (p.kv.indptr[b + 1] < p.kv.indptr[b])
      return bad(StatusCode::NonMonotoneIndptr,
                 "kv indptr is not monotone at request " + std::to_string(b));
  }
  if (p.kv.indexing == KVIndexing::Paged) {
    if (p.kv.block_size <= 0 || !p.kv.indices || !p.kv.last_len)
      return bad(StatusCode::InvalidArgument,
                 "paged KV needs block_size > 0, indices and last_len");
    for (int32_t b = 0; b < p.batch; ++b) {
      int32_t n = p.kv.indptr[b + 1] - p.kv.indptr[b];
      if (n > 0 && (p.kv.last_len[b] < 1 || p.kv.last_len[b] > p.kv.block_size))
        return bad(StatusCode::LastBlockLenOutOfRange,
                   "last_len[" + std::to_string(b) + "] = " +
                       std::to_string(p.kv.last_len[b]) + " is outside [1, " +
                       std::to_string(p.kv.block_size) + "]");
    }
    for (int32_t i = 0; i < p.kv.indptr[p.batch]; ++i)
      if (p.kv.indices[i] < 0 || p.kv.indices[i] >= p.kv.num_blocks)
        return bad(StatusCode::BlockIndexOutOfRange,
                   "indices[" + std::to_string(i) + "] = " +
                       std::to_string(p.kv.indices[i]) + " is outside [0, " +
                       std::to_string(p.kv.num_blocks) + ")");
  }
  return Status::success();
}

/// Pointer to key/value vector of token kpos (request b, KV head kvh).
static size_t kvOffset(const AttentionProblem &p, int32_t b, int32_t kpos,
                       int32_t kvh) {
  const KVView &kv = p.kv;
  size_t D = p.head_dim, H = p.num_kv_heads;
  if (kv.indexing == KVIndexing::Ragged)
    return ((size_t(kv.indptr[b]) + kpos) * H + kvh) * D;
  size_t bs = kv.block_size;
  size_t block = kv.indices[kv.indptr[b] + kpos / kv.block_size];
  size_t off = kpos % kv.block_size;
  if (kv.layout == KVLayout::NHD)
    return ((block * bs + off) * H + kvh) * D;
  return ((block * H + kvh) * bs + off) * D;
}

/// Inverse frequency of rotary pair i (RoPE incl. Llama-3.1 scaling, docs/Semantics.md).
static double ropeInvFreq(const Variant &v, int32_t i, int32_t headDim) {
  double inv = std::pow(v.rope_theta, -2.0 * i / headDim);
  if (v.rope != RopeMode::Llama31)
    return inv;
  const double pi = 3.14159265358979323846;
  double wavelen = 2 * pi / inv;
  double lowWave = v.llama31_original_context / v.llama31_low_freq_factor;
  double highWave = v.llama31_original_context / v.llama31_high_freq_factor;
  if (wavelen < highWave)
    return inv;
  if (wavelen > lowWave)
    return inv / v.llama31_factor;
  double smooth = (v.llama31_original_context / wavelen - v.llama31_low_freq_factor) /
                  (v.llama31_high_freq_factor - v.llama31_low_freq_factor);
  return (1 - smooth) * inv / v.llama31_factor + smooth * inv;
}

/// Rotate-half (NeoX) RoPE of x at position pos into out.
static void applyRope(const Variant &v, const double *x, int32_t D, double pos,
                      double *out) {
  int32_t half = D / 2;
  for (int32_t i = 0; i < half; ++i) {
    double a = pos / v.rope_scale * ropeInvFreq(v, i, D);
    double c = std::cos(a), s = std::sin(a);
    out[i] = x[i] * c - x[i + half] * s;
    out[i + half] = x[i + half] * c + x[i] * s;
  }
}

/// Whether the custom mask lets row t of request b see key kpos.
static bool customMaskBit(const AttentionProblem &p, int32_t b, int32_t t,
                          int32_t kpos) {
  size_t offset = 0;
  for (int32_t j = 0; j < b; ++j) {
    size_t n = size_t(qoLen(p, j)) * kvLen(p.kv, j);
    offset += p.variant.mask_bit_packed ? (n + 7) / 8 : n;
  }
  size_t idx = size_t(t) * kvLen(p.kv, b) + kpos;
  if (!p.variant.mask_bit_packed)
    return p.variant.custom_mask[offset + idx] != 0;
  return (p.variant.custom_mask[offset + idx / 8] >> (idx % 8)) & 1;
}

void referenceRow(const AttentionProblem &p, int32_t b, int32_t t, int32_t h,
                  int32_t kvBegin, int32_t kvEnd, bool addSink, double *o,
                  double *lse) {
  const Variant &v = p.variant;
  const int32_t D = p.head_dim;
  const int32_t qo = qoLen(p, b), kv = kvLen(p.kv, b);
  const int64_t pos = int64_t(kv) - qo + t;
  const int32_t kvh = h / (p.num_qo_heads / p.num_kv_heads);
  const double scale = v.sm_scale != 0 ? v.sm_scale : 1.0 / std::sqrt(double(D));
  const double slope =
      v.alibi ? (v.alibi_slopes ? v.alibi_slopes[h] : alibiSlope(h, p.num_qo_heads))
              : 0.0;

  thread_local std::vector<double> qv, kr, logits;
  qv.assign(p.q + (size_t(p.qo_indptr[b] + t) * p.num_qo_heads + h) * D,
            p.q + (size_t(p.qo_indptr[b] + t) * p.num_qo_heads + h + 1) * D);
  kr.resize(D);
  if (v.rope != RopeMode::None) {
    std::vector<double> tmp(qv);
    applyRope(v, tmp.data(), D, double(pos), qv.data());
  }
  logits.assign(size_t(std::max(kvEnd - kvBegin, 0)), -kInf);
  double m = -kInf;
  for (int32_t k = kvBegin; k < kvEnd; ++k) {
    bool keep;
    if (v.custom_mask)
      keep = customMaskBit(p, b, t, k);
    else
      keep = !v.causal || k <= pos;
    if (v.window_left >= 0)
      keep = keep && k >= pos - v.window_left;
    if (!keep)
      continue;
    const double *kp = p.kv.k + kvOffset(p, b, k, kvh);
    if (v.rope != RopeMode::None) {
      applyRope(v, kp, D, double(k), kr.data());
      kp = kr.data();
    }
    double s = 0;
    for (int32_t d = 0; d < D; ++d)
      s += qv[d] * kp[d];
    s *= scale;
    s += slope * double(k - pos);
    if (v.logits_soft_cap > 0)
      s = v.logits_soft_cap * std::tanh(s / v.logits_soft_cap);
    logits[k - kvBegin] = s;
    m = std::max(m, s);
  }
  const bool sink = addSink && v.sinks;
  if (sink)
    m = std::max(m, v.sinks[h]);
  for (int32_t d = 0; d < D; ++d)
    o[d] = 0;
  if (m == -kInf) {
    *lse = -kInf;
    return;
  }
  double denom = sink ? std::exp(v.sinks[h] - m) : 0.0;
  for (int32_t k = kvBegin; k < kvEnd; ++k) {
    double s = logits[k - kvBegin];
    if (s == -kInf)
      continue;
    double e = std::exp(s - m);
    denom += e;
    const double *vp = p.kv.v + kvOffset(p, b, k, kvh);
    for (int32_t d = 0; d < D; ++d)
      o[d] += e * vp[d];
  }
  for (int32_t d = 0; d < D; ++d)
    o[d] /= denom;
  *lse = (m + std::log(denom)) / kLn2;
}

Status referenceAttention(const AttentionProblem &p, double *o, double *lse) {
  if (Status s = checkProblem(p); !s.ok())
    return s;
  const int32_t H = p.num_qo_heads, D = p.head_dim;
  for (int32_t b = 0; b < p.batch; ++b)
    for (int32_t t = 0; t < qoLen(p, b); ++t)
      for (int32_t h = 0; h < H; ++h) {
        size_t row = size_t(p.qo_indptr[b] + t) * H + h;
        referenceRow(p, b, t, h, 0, kvLen(p.kv, b), true, o + row * D, lse + row);
      }
  return Status::success();
}

void referenceMergeStates(int32_t n, int32_t headDim, const double *const *os,
                          const double *lses, double *o, double *lse) {
  double m = -kInf;
  for (int32_t i = 0; i < n; ++i)
    m = std::max(m, lses[i]);
  for (int32_t d = 0; d < headDim; ++d)
    o[d] = 0;
  if (m == -kInf) {
    *lse = -kInf;
    return;
  }
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (lses[i] == -kInf)
      continue;
    double w = std::exp2(lses[i] - m);
    sum += w;
    for (int32_t d = 0; d < headDim; ++d)
      o[d] += w * os[i][d];
  }
  for (int32_t d = 0; d < headDim; ++d)
    o[d] /= sum;
  *lse = m + std::log2(sum);
}

Status referenceComposed(const std::vector<AttentionProblem> &views, double *o,
                         double *lse) {
  if (views.empty())
    return Status(StatusCode::InvalidArgument, "composed format has no views");
  const AttentionProblem &p0 = views[0];
  for (const AttentionProblem &v : views) {
    if (v.batch != p0.batch || v.num_qo_heads != p0.num_qo_heads ||
        v.head_dim != p0.head_dim)
      return Status(StatusCode::InvalidArgument,
                    "composed views disagree on batch, heads or head_dim");
    for (int32_t b = 0; b <= p0.batch; ++b)
      if (v.qo_indptr[b] != p0.qo_indptr[b])
        return Status(StatusCode::InvalidArgument,
                      "composed views disagree on qo_indptr");
  }
  size_t rows = size_t(p0.qo_indptr[p0.batch]) * p0.num_qo_heads;
  size_t D = p0.head_dim;
  std::vector<std::vector<double>> os(views.size()), ls(views.size());
  for (size_t i = 0; i < views.size(); ++i) {
    os[i].resize(rows * D);
    ls[i].resize(rows);
    if (Status s = referenceAttention(views[i], os[i].data(), ls[i].data()); !s.ok())
      return s;
  }
  std::vector<const double *> ptrs(views.size());
  std::vector<double> l(views.size());
  for (size_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < views.size(); ++i) {
      ptrs[i] = os[i].data() + r * D;
      l[i] = ls[i][r];
    }
    referenceMergeStates(int32_t(views.size()), int32_t(D), ptrs.data(), l.data(),
                         o + r * D, lse + r);
  }
  return Status::success();
}

Status referenceExecutePlan(const AttentionProblem &p, const PlanView &plan,
                            double *o, double *lse) {
  if (Status s = checkProblem(p); !s.ok())
    return s;
  const int32_t H = p.num_qo_heads, D = p.head_dim;
  const int32_t P = plan.gqaPack(), SR = plan.slotRows();
  if (plan.header(kHdrHeadDim) != D || plan.header(kHdrNumQoHeads) != H ||
      plan.header(kHdrBatch) != p.batch)
    return Status(StatusCode::ManifestMismatch,
                  "plan was made for other heads, head_dim or batch");
  std::vector<double> partialO(size_t(plan.numSlots()) * SR * D);
  std::vector<double> partialLse(size_t(plan.numSlots()) * SR);
  for (int32_t c = 0; c < plan.numCtas(); ++c) {
    int32_t first, last;
    plan.ctaItems(c, &first, &last);
    for (int32_t i = first; i < last; ++i) {
      const WorkItem it = plan.item(i);
      for (int32_t r = 0; r < it.row_count; ++r) {
        int32_t pr = it.row_begin + r;
        int32_t t = pr / P, h = it.head_group * P + pr % P;
        double *orow, *lrow;
        if (it.flags & kItemDirect) {
          size_t row = size_t(p.qo_indptr[it.request] + t) * H + h;
          orow = o + row * D;
          lrow = lse + row;
        } else {
          size_t row = size_t(it.slot) * SR + r;
          orow = partialO.data() + row * D;
          lrow = partialLse.data() + row;
        }
        referenceRow(p, it.request, t, h, it.kv_begin, it.kv_end,
                     (it.flags & kItemFirstChunk) != 0, orow, lrow);
      }
    }
  }
  std::vector<const double *> ptrs;
  std::vector<double> ls;
  for (int32_t u = 0; u < plan.numMergeUnits(); ++u) {
    const MergeUnit mu = plan.unit(u);
    int32_t s0, s1;
    plan.unitSlots(u, &s0, &s1);
    for (int32_t r = 0; r < mu.row_count; ++r) {
      ptrs.clear();
      ls.clear();
      for (int32_t s = s0; s < s1; ++s) {
        ptrs.push_back(partialO.data() + (size_t(s) * SR + r) * D);
        ls.push_back(partialLse[size_t(s) * SR + r]);
      }
      int32_t pr = mu.row_begin + r;
      int32_t t = pr / P, h = mu.head_group * P + pr % P;
      size_t row = size_t(p.qo_indptr[mu.request] + t) * H + h;
      referenceMergeStates(s1 - s0, D, ptrs.data(), ls.data(), o + row * D,
                           lse + row);
    }
  }
  return Status::success();
}

} // namespace attnrt
