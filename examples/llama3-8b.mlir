// Llama-3-8B attention as a serving engine runs it: 32 query heads sharing 8
// KV heads (GQA group 4), head_dim 128, bf16, KV cache in 16-token pages
// (NHD, the vLLM/FlashInfer page table unchanged), causal.
//
//   make demo    compiles this file and shows what attn chose;
//   build/bin/attn-compile examples/llama3-8b.mlir --chip=sm_90 --emit=cubin \
//       --output-dir=out/llama3-8b
//                writes attn_kernels.{ptx,cubin,json} there (from the repository
//                root; add -o FILE for the prepared IR).
//
// @prefill: a batch of prompts (about 2048 rows per request) over their
// pages. @decode: one new token per request. @shared_prefix_decode: 64
// requests sharing a system prompt stored once (cascade attention over a
// composed format).

!q = tensor<?x32x128xbf16>
!cache = tensor<?x16x8x128xbf16>
!lse = tensor<?x32xf32>
!idx = tensor<?xi32>

func.func @prefill(%q: !q, %k: !cache, %v: !cache, %qo_indptr: !idx,
                   %kv_indptr: !idx, %kv_indices: !idx, %kv_last_len: !idx)
    -> (!q, !lse) {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 2048, block_cols = 16, layout = NHD>)
      indices(%qo_indptr, %kv_indptr, %kv_indices, %kv_last_len : !idx, !idx, !idx, !idx)
      variants [@causal]
      : !q, !cache, !cache -> !q, !lse
  return %o, %lse : !q, !lse
}

func.func @decode(%q: !q, %k: !cache, %v: !cache, %qo_indptr: !idx,
                  %kv_indptr: !idx, %kv_indices: !idx, %kv_last_len: !idx)
    -> (!q, !lse) {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 1, block_cols = 16, layout = NHD>)
      indices(%qo_indptr, %kv_indptr, %kv_indices, %kv_last_len : !idx, !idx, !idx, !idx)
      variants [@causal]
      : !q, !cache, !cache -> !q, !lse
  return %o, %lse : !q, !lse
}

func.func @shared_prefix_decode(%q: !q, %k: !cache, %v: !cache,
    %p_qo: !idx, %p_kv_indptr: !idx, %p_kv_indices: !idx, %p_kv_last_len: !idx,
    %s_qo: !idx, %s_kv_indptr: !idx, %s_kv_indices: !idx, %s_kv_last_len: !idx)
    -> (!q, !lse) {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.composed<[#attn.bsr<block_rows = 64, block_cols = 16>,
                             #attn.bsr<block_rows = 1, block_cols = 16>]>)
      indices(%p_qo, %p_kv_indptr, %p_kv_indices, %p_kv_last_len,
              %s_qo, %s_kv_indptr, %s_kv_indices, %s_kv_last_len
              : !idx, !idx, !idx, !idx, !idx, !idx, !idx, !idx)
      : !q, !cache, !cache -> !q, !lse
  return %o, %lse : !q, !lse
}
