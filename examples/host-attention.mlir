// A host program with attention in it, for attn-to-llvm-pipeline: a paged
// decode, a causal paged prefill, a prefill with Gemma-2's variants (a
// sliding window and a soft cap, both runtime parameters) and one with a
// bit-packed custom mask, over Llama-3-8B's heads (32 query / 8 KV, head_dim
// 128, bf16, 16-token pages), in the destination form, so that
// bufferization writes o and lse into the caller's (device) buffers; and a
// decode that allocates its own results and runs on the caller's stream.
// `llvm.emit_c_interface` gives C the entries `_mlir_ciface_<name>`, each
// taking one memref descriptor per memref argument and scalars by value
// (test/Consumer/host_attention.cpp calls them).
//
//   build/bin/attn-opt examples/host-attention.mlir \
//       --attn-to-llvm-pipeline="chip=sm_90a" | mlir-translate --mlir-to-llvmir

!q = tensor<?x32x128xbf16>
!cache = tensor<?x16x8x128xbf16>
!lse = tensor<?x32xf32>
!idx = tensor<?xi32>

// One new token per request: the decode tile.
func.func @decode(%q: !q, %k: !cache, %v: !cache, %qo_indptr: !idx,
                  %kv_indptr: !idx, %kv_indices: !idx, %kv_last_len: !idx,
                  %o_init: !q, %lse_init: !lse) -> (!q, !lse)
    attributes {llvm.emit_c_interface} {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 1, block_cols = 16, layout = NHD>)
      indices(%qo_indptr, %kv_indptr, %kv_indices, %kv_last_len : !idx, !idx, !idx, !idx)
      variants [@causal]
      outs(%o_init, %lse_init : !q, !lse)
      : !q, !cache, !cache -> !q, !lse
  return %o, %lse : !q, !lse
}

// Chunks of a few hundred new tokens per request over longer caches (causal,
// the queries the last rows of each request's keys): a prefill tile.
func.func @prefill(%q: !q, %k: !cache, %v: !cache, %qo_indptr: !idx,
                   %kv_indptr: !idx, %kv_indices: !idx, %kv_last_len: !idx,
                   %o_init: !q, %lse_init: !lse) -> (!q, !lse)
    attributes {llvm.emit_c_interface} {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 256, block_cols = 16, layout = NHD>)
      indices(%qo_indptr, %kv_indptr, %kv_indices, %kv_last_len : !idx, !idx, !idx, !idx)
      variants [@causal]
      outs(%o_init, %lse_init : !q, !lse)
      : !q, !cache, !cache -> !q, !lse
  return %o, %lse : !q, !lse
}

// Gemma-2's variants: causal, a sliding window and a soft cap, both runtime
// parameters (the window bounds the planner's work too).
func.func @prefill_gemma(%q: !q, %k: !cache, %v: !cache, %qo_indptr: !idx,
                         %kv_indptr: !idx, %kv_indices: !idx, %kv_last_len: !idx,
                         %o_init: !q, %lse_init: !lse, %window: i32, %cap: f32)
    -> (!q, !lse) attributes {llvm.emit_c_interface} {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 256, block_cols = 16, layout = NHD>)
      indices(%qo_indptr, %kv_indptr, %kv_indices, %kv_last_len : !idx, !idx, !idx, !idx)
      variants [@causal, @sliding_window, @soft_cap] params(%window, %cap : i32, f32)
      outs(%o_init, %lse_init : !q, !lse)
      : !q, !cache, !cache -> !q, !lse
  return %o, %lse : !q, !lse
}

// A custom mask, qo_len x kv_len bits per request, little-endian, each
// request from a new byte.
func.func @prefill_masked(%q: !q, %k: !cache, %v: !cache, %qo_indptr: !idx,
                          %kv_indptr: !idx, %kv_indices: !idx, %kv_last_len: !idx,
                          %mask: tensor<?xi8>, %o_init: !q, %lse_init: !lse)
    -> (!q, !lse) attributes {llvm.emit_c_interface} {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 256, block_cols = 16, layout = NHD>)
      indices(%qo_indptr, %kv_indptr, %kv_indices, %kv_last_len : !idx, !idx, !idx, !idx)
      mask(%mask : tensor<?xi8>)
      outs(%o_init, %lse_init : !q, !lse)
      : !q, !cache, !cache -> !q, !lse
  return %o, %lse : !q, !lse
}

// No outs: the function allocates its results itself (bufferization's
// allocations, which attn-lower-host-calls makes managed memory that the
// kernels and the host both reach), and its calls run on the caller's
// stream (the argument marked attn.stream, a CUstream). The caller reads the
// results after synchronizing that stream and frees them with
// attnRtDeviceFree.
func.func @decode_own_outputs(%q: !q, %k: !cache, %v: !cache, %qo_indptr: !idx,
                              %kv_indptr: !idx, %kv_indices: !idx, %kv_last_len: !idx,
                              %stream: i64 {attn.stream}) -> (!q, !lse)
    attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %rows = tensor.dim %q, %c0 : !q
  %o_init = tensor.empty(%rows) : !q
  %lse_init = tensor.empty(%rows) : !lse
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 1, block_cols = 16, layout = NHD>)
      indices(%qo_indptr, %kv_indptr, %kv_indices, %kv_last_len : !idx, !idx, !idx, !idx)
      variants [@causal]
      outs(%o_init, %lse_init : !q, !lse)
      : !q, !cache, !cache -> !q, !lse
  return %o, %lse : !q, !lse
}
