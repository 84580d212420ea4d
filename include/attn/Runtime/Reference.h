//===- Reference.h - Float64 CPU reference attention ------------*- C++ -*-===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// The CPU reference that CI (no GPU) checks plans and semantics against. It
// computes attention in float64 on host buffers exactly per docs/Semantics.md:
// bottom-right causal alignment, sliding window, soft-cap on the scaled (and
// ALiBi-biased) logits, ALiBi with the paper's slopes, on-the-fly rotate-half
// RoPE (incl. Llama-3.1 scaling), sinks in the denominator, boolean or
// bit-packed custom masks, base-2 LSE, and output 0 / LSE -inf for a row that
// sees no key. It also executes a plan's work list chunk by chunk and merges
// the partial states by LSE, exactly as the kernels will.
//
// Tensors (all row-major, float64):
//   q, o     [total_q_rows, num_qo_heads, head_dim]   (rows packed over requests)
//   lse      [total_q_rows, num_qo_heads]
//   paged K/V NHD [num_blocks, block_size, num_kv_heads, head_dim]
//             HND [num_blocks, num_kv_heads, block_size, head_dim]
//   ragged K/V    [total_kv_tokens, num_kv_heads, head_dim] (kv_indptr in tokens)
// A column-vector token tree is the paged form with block_size 1, explicit
// indices and a custom mask.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_RUNTIME_REFERENCE_H
#define ATTN_RUNTIME_REFERENCE_H

#include "attn/Runtime/Plan.h"
#include "attn/Runtime/Status.h"

#include <cstdint>
#include <vector>

namespace attnrt {

enum class RopeMode : int32_t { None = 0, Standard = 1, Llama31 = 2 };

/// Built-in variant parameters (docs/Semantics.md). Defaults are plain softmax
/// attention with sm_scale 1/sqrt(head_dim).
struct Variant {
  int32_t causal = 0;
  int32_t window_left = -1;       ///< < 0: no window
  double sm_scale = 0.0;          ///< 0: 1/sqrt(head_dim)
  double logits_soft_cap = 0.0;   ///< <= 0: none
  int32_t alibi = 0;
  const double *alibi_slopes = nullptr; ///< [num_qo_heads]; null: the paper's slopes
  RopeMode rope = RopeMode::None;
  double rope_theta = 1e4;
  double rope_scale = 1.0;        ///< positions are divided by this
  double llama31_factor = 8.0;
  double llama31_low_freq_factor = 1.0;
  double llama31_high_freq_factor = 4.0;
  double llama31_original_context = 8192.0;
  const double *sinks = nullptr;  ///< [num_qo_heads], scaled-logit units
  const uint8_t *custom_mask = nullptr; ///< replaces causal when set
  int32_t mask_bit_packed = 0;    ///< 1: little-endian bits, per-request byte aligned
};

/// One KV cache view in a BSR format.
struct KVView {
  KVIndexing indexing = KVIndexing::Paged;
  KVLayout layout = KVLayout::NHD;
  int32_t block_size = 16;
  const int32_t *indptr = nullptr;   ///< [batch+1] blocks (paged) or tokens (ragged)
  const int32_t *indices = nullptr;  ///< paged: [indptr[batch]] block ids
  const int32_t *last_len = nullptr; ///< paged: [batch]
  int32_t num_blocks = 0;            ///< paged: blocks in k/v
  const double *k = nullptr;
  const double *v = nullptr;
};

/// One attention problem: queries, a KV view, a variant, heads.
struct AttentionProblem {
  int32_t batch = 0;
  const int32_t *qo_indptr = nullptr;
  int32_t num_qo_heads = 0, num_kv_heads = 0, head_dim = 0;
  const double *q = nullptr;
  KVView kv;
  Variant variant;
};

/// The ALiBi slope of head h among num_heads (the paper's rule, docs/Semantics.md).
double alibiSlope(int32_t h, int32_t numHeads);

/// Validates the problem (same checks as the planner, plus pointers).
Status checkProblem(const AttentionProblem &p);

/// Direct attention: o [total_q_rows*Hq*D], lse [total_q_rows*Hq].
Status referenceAttention(const AttentionProblem &p, double *o, double *lse);

/// Attention of one query row (request b, token t of the request, query head h)
/// restricted to keys [kvBegin, kvEnd); adds the sink when addSink. Writes
/// head_dim outputs and the base-2 LSE of the restricted softmax.
void referenceRow(const AttentionProblem &p, int32_t b, int32_t t, int32_t h,
                  int32_t kvBegin, int32_t kvEnd, bool addSink, double *o,
                  double *lse);

/// Merges n partial states (o_i [D], lse_i) by LSE into o, lse (docs/Semantics.md: all -inf
/// gives 0 and -inf).
void referenceMergeStates(int32_t n, int32_t headDim, const double *const *os,
                          const double *lses, double *o, double *lse);

/// Cascade / composed format: attention over each view, merged by LSE.
Status referenceComposed(const std::vector<AttentionProblem> &views, double *o,
                         double *lse);

/// Executes a plan exactly as the kernels will: every CTA's work items into o/lse
/// directly or into float64 partial slots, then the merge units.
Status referenceExecutePlan(const AttentionProblem &p, const PlanView &plan,
                            double *o, double *lse);

} // namespace attnrt

#endif // ATTN_RUNTIME_REFERENCE_H
