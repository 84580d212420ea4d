// RUN: attn-opt %s -split-input-file -verify-diagnostics
// One negative test per verifier error of the attn dialect.

//===----------------------------------------------------------------------===//
// Formats, tiles, params
//===----------------------------------------------------------------------===//

// expected-error @+1 {{block_rows must be at least 1 (or ? when it varies), got 0}}
func.func private @f() attributes {f = #attn.bsr<block_rows = 0, block_cols = 16>}

// -----

// expected-error @+1 {{block_cols (the page size) must be in [1, 65536], got 70000}}
func.func private @f() attributes {f = #attn.bsr<block_cols = 70000>}

// -----

// expected-error @+1 {{block_cols (the page size) must be in [1, 65536], got 0}}
func.func private @f() attributes {f = #attn.bsr<block_cols = 0>}

// -----

// expected-error @+1 {{a ragged format indexes tokens: block_cols must be 1, got 16}}
func.func private @f() attributes {f = #attn.bsr<block_cols = 16, indexing = ragged>}

// -----

// expected-error @+1 {{strided = true is for ragged formats: a paged cache's pages are found by a page stride at launch and are dense inside}}
func.func private @f() attributes {f = #attn.bsr<block_cols = 16, strided = true>}

// -----

// expected-error @+1 {{a composed format needs at least two views, got 1}}
func.func private @f() attributes {f = #attn.composed<[#attn.bsr<block_cols = 16>]>}

// -----

// expected-error @+1 {{view 1 has block_cols 32 but view 0 has 16; the views of one cache share block_cols}}
func.func private @f() attributes {f = #attn.composed<[#attn.bsr<block_rows = 64, block_cols = 16>, #attn.bsr<block_cols = 32>]>}

// -----

// expected-error @+1 {{view 1 has layout HND but view 0 has NHD; the views of one cache share a layout}}
func.func private @f() attributes {f = #attn.composed<[#attn.bsr<block_rows = 64, block_cols = 16>, #attn.bsr<block_cols = 16, layout = HND>]>}

// -----

// expected-error @+1 {{view 1 is ragged but view 0 is paged; the views of one cache share their indexing}}
func.func private @f() attributes {f = #attn.composed<[#attn.bsr<block_rows = 64, block_cols = 1>, #attn.bsr<block_cols = 1, indexing = ragged>]>}

// -----

// expected-error @+1 {{query tile q must be 16, 64, 128 or 192, got 32}}
func.func private @f() attributes {t = #attn.tile<q = 32, kv = 64, warps = 4>}

// -----

// expected-error @+1 {{KV tile kv must be a multiple of 16 in [16, 256], got 40}}
func.func private @f() attributes {t = #attn.tile<q = 16, kv = 40, warps = 4>}

// -----

// expected-error @+1 {{a 128-row tile gives each warp 16 rows: warps must be 8, got 4}}
func.func private @f() attributes {t = #attn.tile<q = 128, kv = 64, warps = 4>}

// -----

// expected-error @+1 {{ctas_per_sm must be in [1, 32], got 0}}
func.func private @f() attributes {t = #attn.tile<q = 16, kv = 16, warps = 3, ctas_per_sm = 0>}

// -----

// expected-error @+1 {{warps must be in [1, 16], got 17}}
func.func private @f() attributes {t = #attn.tile<q = 16, kv = 64, warps = 17>}

// -----

// expected-error @+1 {{stages must be in [1, 8], got 0}}
func.func private @f() attributes {t = #attn.tile<q = 16, kv = 64, warps = 4, stages = 0>}

// -----

// expected-error @+1 {{gqa_pack must be in [1, 16] (the tile's rows), got 0}}
func.func private @f() attributes {t = #attn.tile<q = 16, kv = 64, warps = 4, gqa_pack = 0>}

// -----

// expected-error @+1 {{gqa_pack must be in [1, 16] (the tile's rows), got 32}}
func.func private @f() attributes {t = #attn.tile<q = 16, kv = 64, warps = 4, gqa_pack = 32>}

// -----

// expected-error @+1 {{parameter 'w' has type 'f64'; parameters are f32, i32, i1 or memref<?xf32>}}
func.func private @f() attributes {p = #attn.param<"w" : f64>}

// -----

//===----------------------------------------------------------------------===//
// Variants and hooks
//===----------------------------------------------------------------------===//

// expected-error @+1 {{parameter 'cap' has type 'vector<4xf32>'; parameters are f32, i32, i1 or memref<?xf32>}}
attn.variant @v(cap : vector<4xf32>) {
}

// -----

// expected-error @+1 {{'attn.variant' op declares parameter 'cap' twice}}
attn.variant @v(cap : f32, cap : f32) {
}

// -----

attn.variant @v {
  // expected-error @+1 {{is not a hook; a variant body holds only attn.hook ops}}
  %c = arith.constant 0 : i32
}

// -----

attn.variant @v {
  attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) {
    %t = arith.constant true
    attn.yield %t : i1
  }
  // expected-error @+1 {{defines a second 'logits_mask' hook in variant @v}}
  attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) {
    %t = arith.constant true
    attn.yield %t : i1
  }
}

// -----

attn.variant @v {
  // expected-error @+1 {{unknown hook kind 'score_mod'; expected query_transform, key_transform, logits_transform, logits_mask, output_transform or sink}}
  attn.hook score_mod(%s : f32) {
    attn.yield %s : f32
  }
}

// -----

attn.variant @v {
  // expected-error @+1 {{'logits_transform' hook takes 4 arguments (s : 'f32', q_pos : 'i32', k_pos : 'i32', head : 'i32'), got 1}}
  attn.hook logits_transform(%s : f32) {
    attn.yield %s : f32
  }
}

// -----

attn.variant @v {
  // expected-error @+1 {{'logits_mask' hook argument #2 (head) must be 'i32', got 'index'}}
  attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : index) {
    %t = arith.constant true
    attn.yield %t : i1
  }
}

// -----

attn.variant @v {
  attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) {
    // expected-error @+1 {{'logits_mask' hook must yield 'i1', got 'i32'}}
    attn.yield %q_pos : i32
  }
}

// -----

attn.variant @v(table : memref<?xf32>) {
  attn.hook sink(%head : i32) {
    %table = attn.param "table" : memref<?xf32>
    %i = arith.index_cast %head : i32 to index
    %c = arith.constant 1.0 : f32
    // expected-error @+1 {{writes, allocates or frees memory; a hook may only compute values and read parameters}}
    memref.store %c, %table[%i] : memref<?xf32>
    attn.yield %c : f32
  }
}

// -----

attn.variant @v {
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    // expected-error @+1 {{reads parameter 'cap' that variant @v does not declare}}
    %cap = attn.param "cap" : f32
    attn.yield %cap : f32
  }
}

// -----

attn.variant @v(cap : f32) {
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    // expected-error @+1 {{reads parameter 'cap' as 'i32' but it is declared 'f32'}}
    %cap = attn.param "cap" : i32
    attn.yield %s : f32
  }
}

// -----

func.func @f() -> f32 {
  // expected-error @+1 {{reads a variant parameter outside a variant}}
  %cap = attn.param "cap" : f32
  return %cap : f32
}

// -----

//===----------------------------------------------------------------------===//
// attn.attention
//===----------------------------------------------------------------------===//

func.func @f(%q: tensor<?x32x72xbf16>, %k: tensor<?x16x8x72xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{head dim 72 is not supported: kernels take a multiple of 16 in [16, 256]}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x72xbf16>, tensor<?x16x8x72xbf16>, tensor<?x16x8x72xbf16> -> tensor<?x32x72xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x272xbf16>, %k: tensor<?x16x8x272xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{head dim 272 is not supported: kernels take a multiple of 16 in [16, 256]}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x272xbf16>, tensor<?x16x8x272xbf16>, tensor<?x16x8x272xbf16> -> tensor<?x32x272xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x4096xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{query must be [rows, qo_heads, head_dim], got rank 2}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x4096xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x4096xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x?x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{query needs static head count and head dim}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x?x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x?x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x4x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{key cache 'tensor<?x16x8x128xbf16>' and value cache 'tensor<?x16x4x128xbf16>' must have the same type}}
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x4x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{KV cache element type 'f16' differs from the query's 'bf16'}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xf16>, tensor<?x16x8x128xf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{key cache has rank 3 but a paged NHD cache has rank 4 ([pages, block_cols, heads, dim])}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x64xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{key cache has head dim 64 but the query has 128}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x64xbf16>, tensor<?x16x8x64xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x?x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{key cache needs a static number of KV heads}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x?x128xbf16>, tensor<?x16x?x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x32x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{key cache holds blocks of 32 tokens but the format's block_cols is 16}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x32x8x128xbf16>, tensor<?x32x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x5x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{query heads (32) must be a multiple of KV heads (5)}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x5x128xbf16>, tensor<?x16x5x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{the format takes 4 index arrays (qo_indptr, kv_indptr, kv_indices, kv_last_len), got 3}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{the format takes 8 index arrays (view0.qo_indptr, view0.kv_indptr, view0.kv_indices, view0.kv_last_len, view1.qo_indptr, view1.kv_indptr, view1.kv_indices, view1.kv_last_len), got 4}}
  %o, %lse = attn.attention %q, %k, %k
      format(#attn.composed<[#attn.bsr<block_rows = 64, block_cols = 16>, #attn.bsr<block_cols = 16>]>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{output type 'tensor<?x32x128xf16>' must equal the query type 'tensor<?x32x128xbf16>'}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{lse must be [rows, qo_heads] = [?, 32] of f32, got 'tensor<?x8xf32>'}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x8xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x1x8x128xbf16>, %i: tensor<?xi32>, %m: tensor<4x4xi1>) {
  // expected-error @+1 {{mask must be a flat array of i1, or of i8 bit-packed; got 'tensor<4x4xi1>'}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 1>)
      indices(%i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>) mask(%m : tensor<4x4xi1>)
      : tensor<?x32x128xbf16>, tensor<?x1x8x128xbf16>, tensor<?x1x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x1x8x128xbf16>, %i: tensor<?xi32>, %m: tensor<?xi8>) {
  // expected-error @+1 {{a custom mask replaces causal masking; drop the 'causal' variant or the mask}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 1>)
      indices(%i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>) mask(%m : tensor<?xi8>) variants [@causal]
      : tensor<?x32x128xbf16>, tensor<?x1x8x128xbf16>, tensor<?x1x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{packs 8 query heads per tile but the GQA group is 4 (32 / 8)}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      {tile = #attn.tile<q = 16, kv = 64, warps = 4, gqa_pack = 8>}
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{lists variant @causal twice}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>) variants [@causal, @causal]
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{uses unknown variant @casual; define it with attn.variant or use a built-in (causal, sliding_window, soft_cap, logits_scale, alibi, rope, rope_llama31, sinks)}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>) variants [@casual]
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

attn.variant @my_sink {
  attn.hook sink(%head : i32) {
    %c = arith.constant 0.0 : f32
    attn.yield %c : f32
  }
}
func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>, %t: memref<?xf32>) {
  // expected-error @+1 {{variants @sinks and @my_sink both define a sink; at most one may}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@sinks, @my_sink] params(%t : memref<?xf32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{the variants take 2 parameters (window_left : 'i32', cap : 'f32'), got 0}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@causal, @sliding_window, @soft_cap]
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @f(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>, %w: f32) {
  // expected-error @+1 {{parameter #0 ('window_left') must be 'i32', got 'f32'}}
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@sliding_window] params(%w : f32)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// attn.merge_states
//===----------------------------------------------------------------------===//

func.func @f(%o: tensor<?x32x128xf32>, %l: tensor<?x32xf32>) {
  // expected-error @+1 {{merges at least two states, got 1}}
  %m, %ml = attn.merge_states %o lse %l : tensor<?x32x128xf32>, tensor<?x32xf32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @f(%o: tensor<?x32x128xf32>, %l: tensor<?x32xf32>) {
  // expected-error @+1 {{has 2 outputs but 3 LSEs}}
  %m, %ml = attn.merge_states %o, %o lse %l, %l, %l : tensor<?x32x128xf32>, tensor<?x32xf32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @f(%a: tensor<?x32x128xf32>, %b: tensor<?x32x128xbf16>, %l: tensor<?x32xf32>) {
  // expected-error @+1 {{partial outputs must share one type, got 'tensor<?x32x128xf32>' and 'tensor<?x32x128xbf16>'}}
  %m:2 = "attn.merge_states"(%a, %b, %l, %l) {operandSegmentSizes = array<i32: 2, 2, 0, 0>}
      : (tensor<?x32x128xf32>, tensor<?x32x128xbf16>, tensor<?x32xf32>, tensor<?x32xf32>) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>)
  return
}

// -----

func.func @f(%o: tensor<?x32x128xf32>, %a: tensor<?x32xf32>, %b: tensor<4x32xf32>) {
  // expected-error @+1 {{LSEs must share one type, got 'tensor<?x32xf32>' and 'tensor<4x32xf32>'}}
  %m:2 = "attn.merge_states"(%o, %o, %a, %b) {operandSegmentSizes = array<i32: 2, 2, 0, 0>}
      : (tensor<?x32x128xf32>, tensor<?x32x128xf32>, tensor<?x32xf32>, tensor<4x32xf32>) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>)
  return
}

// -----

func.func @f(%o: tensor<?x4096xf32>, %l: tensor<?x32xf32>) {
  // expected-error @+1 {{states are [rows, heads, dim] outputs with [rows, heads] LSEs, got 'tensor<?x4096xf32>' and 'tensor<?x32xf32>'}}
  %m, %ml = attn.merge_states %o, %o lse %l, %l : tensor<?x4096xf32>, tensor<?x32xf32> -> tensor<?x4096xbf16>
  return
}

// -----

func.func @f(%o: tensor<4x32x128xf32>, %l: tensor<4x32xf32>, %m: tensor<5xi8>) {
  // expected-error @+1 {{mask 'tensor<5xi8>' must have one byte per row of 'tensor<4x32x128xf32>'}}
  %r, %rl = attn.merge_states %o, %o lse %l, %l mask %m : tensor<4x32x128xf32>, tensor<4x32xf32>, tensor<5xi8> -> tensor<4x32x128xf32>
  return
}

// -----

func.func @f(%o: tensor<?x32x128xf32>, %l: tensor<?x8xf32>) {
  // expected-error @+1 {{output 'tensor<?x32x128xf32>' and LSE 'tensor<?x8xf32>' disagree on [rows, heads]}}
  %m, %ml = attn.merge_states %o, %o lse %l, %l : tensor<?x32x128xf32>, tensor<?x8xf32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @f(%o: tensor<?x32x128xf32>, %l: tensor<?x32xf32>) {
  // expected-error @+1 {{merged output 'tensor<?x32x64xbf16>' must have the shape of the partial outputs 'tensor<?x32x128xf32>'}}
  %m, %ml = attn.merge_states %o, %o lse %l, %l : tensor<?x32x128xf32>, tensor<?x32xf32> -> tensor<?x32x64xbf16>
  return
}

// -----

func.func @f(%o: tensor<?x32x128xf32>, %l: tensor<?x32xf32>) {
  // expected-error @+1 {{merged LSE must have type 'tensor<?x32xf32>'}}
  %m:2 = "attn.merge_states"(%o, %o, %l, %l) {operandSegmentSizes = array<i32: 2, 2, 0, 0>}
      : (tensor<?x32x128xf32>, tensor<?x32x128xf32>, tensor<?x32xf32>, tensor<?x32xf32>) -> (tensor<?x32x128xbf16>, tensor<8x32xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// attn.append_kv
//===----------------------------------------------------------------------===//

func.func @f(%k: tensor<?x8x128xbf16>, %c: tensor<?x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{appends into pages; the format must be paged}}
  %k1, %v1 = attn.append_kv %k, %k into %c, %c format(#attn.bsr<block_cols = 1, indexing = ragged>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x8x128xbf16> into tensor<?x8x128xbf16>
  return
}

// -----

func.func @f(%k: tensor<?x1024xbf16>, %c: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{new keys must be [tokens, kv_heads, head_dim] with a static head dim, got 'tensor<?x1024xbf16>'}}
  %k1, %v1 = attn.append_kv %k, %k into %c, %c format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x1024xbf16> into tensor<?x16x8x128xbf16>
  return
}

// -----

func.func @f(%k: tensor<?x8x128xf16>, %c: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{new keys are 'f16' but the cache holds 'bf16'}}
  %k1, %v1 = attn.append_kv %k, %k into %c, %c format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x8x128xf16> into tensor<?x16x8x128xbf16>
  return
}

// -----

func.func @f(%k: tensor<?x8x128xbf16>, %c: tensor<?x16x8x64xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{key cache has head dim 64 but the query has 128}}
  %k1, %v1 = attn.append_kv %k, %k into %c, %c format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x8x128xbf16> into tensor<?x16x8x64xbf16>
  return
}

// -----

func.func @f(%k: tensor<?x4x128xbf16>, %c: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{new keys have 4 heads but the cache has 8}}
  %k1, %v1 = attn.append_kv %k, %k into %c, %c format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x4x128xbf16> into tensor<?x16x8x128xbf16>
  return
}

// -----

func.func @f(%k: tensor<?x8x128xbf16>, %c: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  // expected-error @+1 {{takes 4 index arrays (batch_indices, positions, kv_indptr, kv_indices), got 3}}
  %k1, %v1 = attn.append_kv %k, %k into %c, %c format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x8x128xbf16> into tensor<?x16x8x128xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// attn.copy_indices
//===----------------------------------------------------------------------===//

func.func @f(%i: tensor<?xi32>) {
  // expected-error @+1 {{copies 1 to 8 arrays in one kernel, got 9}}
  %c:9 = attn.copy_indices %i, %i, %i, %i, %i, %i, %i, %i, %i into %i, %i, %i, %i, %i, %i, %i, %i, %i
      : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>
      into tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>
  return
}

// -----

func.func @f(%s: tensor<8xi32>, %d: tensor<4xi32>) {
  // expected-error @+1 {{source #0 holds 8 indices but its destination only 4}}
  %c = attn.copy_indices %s into %d : tensor<8xi32> into tensor<4xi32>
  return
}

// -----

func.func @f(%s: memref<?xi32>, %d: tensor<?xi32>) {
  // expected-error @+1 {{an operand is a tensor but the first source is a memref}}
  attn.copy_indices %s into %d : memref<?xi32> into tensor<?xi32>
  return
}

// -----

func.func @f(%s: tensor<?xi64>, %d: tensor<?xi64>) {
  // expected-error @+1 {{operand #0 must be variadic of 1-D tensor or memref of i32}}
  %c = attn.copy_indices %s into %d : tensor<?xi64> into tensor<?xi64>
  return
}

// -----

//===----------------------------------------------------------------------===//
// attn.copy_by_table
//===----------------------------------------------------------------------===//

func.func @f(%t: memref<?xi64>) {
  // expected-error @+1 {{reads 1 to 16 table rows in one kernel, got 17}}
  attn.copy_by_table %t {rows = 17} : memref<?xi64>
  return
}

// -----

func.func @f(%t: memref<?xi64>) {
  // expected-error @+1 {{reads 1 to 16 table rows in one kernel, got 0}}
  attn.copy_by_table %t {rows = 0} : memref<?xi64>
  return
}

// -----

func.func @f(%t: memref<8xi64>) {
  // expected-error @+1 {{reads 3 rows of 3 words from a table of 8}}
  attn.copy_by_table %t {rows = 3} : memref<8xi64>
  return
}

// -----

func.func @f(%t: memref<?xi32>) {
  // expected-error @+1 {{operand #0 must be 1D memref of 64-bit signless integer values}}
  attn.copy_by_table %t {rows = 1} : memref<?xi32>
  return
}
