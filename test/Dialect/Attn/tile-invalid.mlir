// RUN: attn-opt %s -split-input-file -verify-diagnostics
// One negative test per verifier error of the tile-level form, its launch
// contract and mask bands.

// expected-error @+1 {{launch contract for unknown chip sm_75}}
func.func private @f() attributes {attn.launch = #attn.launch<role = merge, chip = "sm_75", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8>}

// -----

// expected-error @+1 {{threads must be a multiple of 32 in [32, 1024], got 100}}
func.func private @f() attributes {attn.launch = #attn.launch<role = merge, chip = "sm_90", threads = 100, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8>}

// -----

// expected-error @+1 {{dynamic shared memory of 240000 bytes is more than sm_90 gives one CTA (232448)}}
func.func private @f() attributes {attn.launch = #attn.launch<role = merge, chip = "sm_90", threads = 256, shared_bytes = 240000, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8>}

// -----

// expected-error @+1 {{3 CTAs of 100000 bytes of shared memory do not fit one SM of sm_90 (233472 bytes)}}
func.func private @f() attributes {attn.launch = #attn.launch<role = merge, chip = "sm_90", threads = 256, shared_bytes = 100000, ctas_per_sm = 3, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8>}

// -----

// expected-error @+1 {{head dim 100 is not supported: kernels take a multiple of 16 in [16, 256]}}
func.func private @f() attributes {attn.launch = #attn.launch<role = merge, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 100, num_qo_heads = 32, num_kv_heads = 8>}

// -----

// expected-error @+1 {{an attention kernel's contract needs its tile and format}}
func.func private @f() attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8>}

// -----

// expected-error @+1 {{threads (128) must be the tile's 3 warps}}
func.func private @f() attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 128, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 16, kv = 16, warps = 3>, format = #attn.bsr<block_cols = 16>>}

// -----

// expected-error @+1 {{sm_80 has no griddepcontrol: pdl must be false}}
func.func private @f() attributes {attn.launch = #attn.launch<role = merge, chip = "sm_80", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, pdl = true>}

// -----

// expected-error @+1 {{a band's lower bound is a constant or a parameter, not both}}
func.func private @f() attributes {b = #attn.band<lower = 4, lower_param = "w">}

// -----

attn.variant @v(w : f32) {
  // expected-error @+1 {{band bound 'w' must name an i32 parameter of the variant}}
  attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) band <lower_param = "w"> {
    %t = arith.constant true
    attn.yield %t : i1
  }
}

// -----

attn.variant @v {
  // expected-error @+1 {{declares a band, but only a logits_mask hook may (the keys it can keep)}}
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) band <upper = 0> {
    attn.yield %s : f32
  }
}

// -----

func.func @f(%item: !attn.item, %q: memref<?xbf16>) {
  // expected-error @+1 {{must be inside an attention kernel (a function with an attn.launch contract of role attention)}}
  %t = attn.tile.load_query %item, %q : memref<?xbf16> -> !attn.query<16x128xbf16>
  return
}

// -----

func.func @f(%item: !attn.item, %q: memref<?xbf16>) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 16, kv = 16, warps = 3>, format = #attn.bsr<block_cols = 16>>} {
  // expected-error @+1 {{the query tile is 64 x 128 but the kernel's tile is 16 x 128}}
  %t = attn.tile.load_query %item, %q : memref<?xbf16> -> !attn.query<64x128xbf16>
  return
}

// -----

func.func @f(%item: !attn.item, %q: memref<?xbf16>) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 16, kv = 16, warps = 3>, format = #attn.bsr<block_cols = 16>>} {
  // expected-error @+1 {{region 'transform' takes the arguments of a query_transform hook ('f32', 'f32', 'i32', 'i32', 'i32')}}
  %t = attn.tile.load_query %item, %q : memref<?xbf16> -> !attn.query<16x128xbf16> transform {
  ^bb0(%x: f32):
    attn.yield %x : f32
  }
  return
}

// -----

func.func @f(%r: !attn.kv_range<16>, %item: !attn.item, %k: memref<?xbf16>) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 16, kv = 16, warps = 3>, format = #attn.bsr<block_cols = 16>>} {
  // expected-error @+1 {{a paged format gathers through kv_indices at a page stride: pages(..., stride ...) is required}}
  %p = attn.tile.kv_prologue %r, %item, %k, %k : memref<?xbf16>, memref<?xbf16>, !attn.kv_range<16> -> !attn.kv_pipe<16x128xbf16>
  return
}

// -----

func.func @f(%r: !attn.kv_range<16>, %item: !attn.item, %k: memref<?xbf16>, %i: memref<?xi32>, %s: i64) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 16, kv = 16, warps = 3>, format = #attn.bsr<block_cols = 16>>} {
  // expected-error @+1 {{a paged format checks its page indices: bounds(num_pages, index_error) is required}}
  %p = attn.tile.kv_prologue %r, %item, %k, %k pages(%i : memref<?xi32>, stride %s) : memref<?xbf16>, memref<?xbf16>, !attn.kv_range<16> -> !attn.kv_pipe<16x128xbf16>
  return
}

// -----

func.func @f(%r: !attn.kv_range<16>, %item: !attn.item, %k: memref<?xbf16>, %i: memref<?xi32>, %n: i32, %s: i64) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 16, kv = 16, warps = 3>, format = #attn.bsr<block_cols = 16>>} {
  // expected-error @+1 {{the pipeline's tile is 64 x 128 but the kernel's tile is 16 x 128}}
  %p = attn.tile.kv_prologue %r, %item, %k, %k pages(%i : memref<?xi32>, stride %s) bounds(%n, %i : memref<?xi32>) : memref<?xbf16>, memref<?xbf16>, !attn.kv_range<16> -> !attn.kv_pipe<64x128xbf16>
  return
}

// -----

func.func @f(%q: !attn.query<16x128xbf16>, %kv: !attn.kv_tile<16x64xbf16>) {
  // expected-error @+1 {{query dim 128 and key dim 64 differ}}
  %s = attn.tile.qk %q, %kv : !attn.query<16x128xbf16>, !attn.kv_tile<16x64xbf16> -> !attn.scores<16x16>
  return
}

// -----

func.func @f(%st: !attn.softmax<16x128>, %s: !attn.scores<16x16>, %item: !attn.item, %kv: !attn.kv_tile<16x128xbf16>, %scale: f32, %m: memref<?xi8>, %mi: memref<?xi32>) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 16, kv = 16, warps = 3>, format = #attn.bsr<block_cols = 16>>} {
  // expected-error @+1 {{the kernel's contract has no custom mask}}
  %st1, %p = attn.tile.online_softmax %st, %s, %item, %kv scale(%scale) custom_mask(%m, %mi : memref<?xi8>, memref<?xi32>) : !attn.softmax<16x128>, !attn.scores<16x16>, !attn.kv_tile<16x128xbf16> -> !attn.probs<16x16xbf16>
  return
}

// -----

func.func @f(%st: !attn.softmax<16x128>, %s: !attn.scores<16x16>, %item: !attn.item, %kv: !attn.kv_tile<16x128xbf16>, %scale: f32) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 16, kv = 16, warps = 3>, format = #attn.bsr<block_cols = 16>>} {
  // expected-error @+1 {{region 'logits_mask' must end with attn.yield of 'i1'}}
  %st1, %p = attn.tile.online_softmax %st, %s, %item, %kv scale(%scale) : !attn.softmax<16x128>, !attn.scores<16x16>, !attn.kv_tile<16x128xbf16> -> !attn.probs<16x16xbf16> logits_mask {
  ^bb0(%qp: i32, %kp: i32, %h: i32):
    attn.yield %qp : i32
  }
  return
}

// -----

func.func @f(%p: memref<?xi32>, %o: memref<?xf32>, %s: i32, %out: memref<?xbf16>) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 16, kv = 16, warps = 3>, format = #attn.bsr<block_cols = 16>>} {
  // expected-error @+1 {{must be inside a merge kernel (a function with an attn.launch contract of role merge)}}
  attn.tile.merge %p, %p, %p, %o, %o, %s, %out, %o, %p : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xf32>, memref<?xf32>, memref<?xbf16>, memref<?xf32>, memref<?xi32>
  return
}

// -----

func.func @f(%c: memref<?xi32>, %w: memref<?xi32>) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 16, kv = 16, warps = 3>, format = #attn.bsr<block_cols = 16>>} {
  // expected-error @+1 {{a paged format needs kv_last_len}}
  attn.tile.work_loop %c, %c, %w requests(%c, %c : memref<?xi32>, memref<?xi32>) : memref<?xi32>, memref<?xi32>, memref<?xi32> {
  ^bb0(%item: !attn.item):
  }
  return
}

// -----

// Row kernels (merge_states, append_kv): heads are arguments, a row is
// spread over head_dim / 8 threads, append_kv needs its page size.

// expected-error @+1 {{a row kernel's head counts are arguments: num_qo_heads and num_kv_heads must be 0}}
func.func private @f() attributes {attn.launch = #attn.launch<role = merge_states, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, merge_rows = 16>}

// -----

// expected-error @+1 {{a row kernel spreads a row's 128 elements over head_dim / 8 threads: merge_rows (24, the rows of a CTA step) must be a positive multiple of threads / (head_dim / 8) = 16}}
func.func private @f() attributes {attn.launch = #attn.launch<role = merge_states, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 0, num_kv_heads = 0, merge_rows = 24>}

// -----

// expected-error @+1 {{an append_kv kernel's contract needs its paged format}}
func.func private @f() attributes {attn.launch = #attn.launch<role = append_kv, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 0, num_kv_heads = 0, merge_rows = 16>}

// -----

// expected-error @+1 {{dtype must be bf16 or f16}}
func.func private @f() attributes {attn.launch = #attn.launch<role = append_kv, chip = "sm_90", threads = 256, dtype = f32, head_dim = 128, num_qo_heads = 0, num_kv_heads = 0, format = #attn.bsr<block_cols = 16>, merge_rows = 16>}

// -----

func.func @f(%n: i32, %v: memref<?xbf16>, %s: memref<?xf32>, %st: i64) attributes {attn.launch = #attn.launch<role = merge, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8>} {
  // expected-error @+1 {{must be inside a merge_states kernel (a function with an attn.launch contract of role merge_states)}}
  attn.tile.merge_states %n, %n states(%v, %v : memref<?xbf16>, memref<?xbf16>) stride %st lses(%s, %s : memref<?xf32>, memref<?xf32>) stride %st into %v : memref<?xbf16> stride %st, %s : memref<?xf32> stride %st
  return
}

// -----

func.func @f(%n: i32, %v: memref<?xbf16>, %s: memref<?xf32>, %st: i64) attributes {attn.launch = #attn.launch<role = merge_states, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 0, num_kv_heads = 0, merge_rows = 16>} {
  // expected-error @+1 {{needs one LSE per state and at least one state, got 2 states and 1 LSEs}}
  attn.tile.merge_states %n, %n states(%v, %v : memref<?xbf16>, memref<?xbf16>) stride %st lses(%s : memref<?xf32>) stride %st into %v : memref<?xbf16> stride %st, %s : memref<?xf32> stride %st
  return
}

// -----

func.func @f(%n: i32, %v: memref<?xf16>, %o: memref<?xbf16>, %s: memref<?xf32>, %st: i64) attributes {attn.launch = #attn.launch<role = merge_states, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 0, num_kv_heads = 0, merge_rows = 16>} {
  // expected-error @+1 {{a state must hold 'bf16' elements (the contract's dtype), not 'f16'}}
  attn.tile.merge_states %n, %n states(%v : memref<?xf16>) stride %st lses(%s : memref<?xf32>) stride %st into %o : memref<?xbf16> stride %st, %s : memref<?xf32> stride %st
  return
}

// -----

func.func @f(%n: i32, %k: memref<?xbf16>, %c: memref<?xf16>, %i: memref<?xi32>, %st: i64) attributes {attn.launch = #attn.launch<role = append_kv, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 0, num_kv_heads = 0, format = #attn.bsr<block_cols = 16>, merge_rows = 16>} {
  // expected-error @+1 {{key_cache must hold 'bf16' elements (the contract's dtype), not 'f16'}}
  attn.tile.append_kv %n, %n, %n, %n tokens(%k, %k : memref<?xbf16>, memref<?xbf16>) stride(%st, %st) at(%i, %i, %i, %i : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>) into(%c, %c : memref<?xf16>, memref<?xf16>) stride(%st, %st, %st) dropped %i : memref<?xi32>
  return
}

// -----

// copy_indices: rows are words.

// expected-error @+1 {{a copy_indices kernel copies words: dtype i32 and head_dim 1}}
func.func private @f() attributes {attn.launch = #attn.launch<role = copy_indices, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 0, num_kv_heads = 0, merge_rows = 256>}

// -----

// expected-error @+1 {{merge_rows (128, the words of a CTA step) must be a positive multiple of threads (256)}}
func.func private @f() attributes {attn.launch = #attn.launch<role = copy_indices, chip = "sm_90", threads = 256, dtype = i32, head_dim = 1, num_qo_heads = 0, num_kv_heads = 0, merge_rows = 128>}

// -----

// expected-error @+1 {{a copy_indices kernel has no heads, tile, format or pdl}}
func.func private @f() attributes {attn.launch = #attn.launch<role = copy_indices, chip = "sm_90", threads = 256, dtype = i32, head_dim = 1, num_qo_heads = 0, num_kv_heads = 0, format = #attn.bsr<block_cols = 16>, merge_rows = 256>}

// -----

func.func @f(%n: i32, %i: memref<?xi32>) attributes {attn.launch = #attn.launch<role = append_kv, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 0, num_kv_heads = 0, format = #attn.bsr<block_cols = 16>, merge_rows = 16>} {
  // expected-error @+1 {{must be inside a copy_indices kernel (a function with an attn.launch contract of role copy_indices)}}
  attn.tile.copy_indices %n counts(%n : i32) from(%i : memref<?xi32>) into(%i : memref<?xi32>)
  return
}

// -----

func.func @f(%n: i32, %i: memref<?xi32>) attributes {attn.launch = #attn.launch<role = copy_indices, chip = "sm_90", threads = 256, dtype = i32, head_dim = 1, num_qo_heads = 0, num_kv_heads = 0, merge_rows = 256>} {
  // expected-error @+1 {{copies 1 to 8 arrays, got 9}}
  attn.tile.copy_indices %n counts(%n, %n, %n, %n, %n, %n, %n, %n, %n : i32, i32, i32, i32, i32, i32, i32, i32, i32) from(%i, %i, %i, %i, %i, %i, %i, %i, %i : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>) into(%i, %i, %i, %i, %i, %i, %i, %i, %i : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
  return
}

// -----

func.func @f(%r: !attn.kv_range<64>, %item: !attn.item, %k: memref<?xbf16>) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 128, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 64, kv = 64, warps = 4>, format = #attn.bsr<block_rows = ?, block_cols = 1, indexing = ragged, strided = true>>} {
  // expected-error @+1 {{a strided format addresses each key's row by its strides: rows(stride token, head) is required}}
  %p = attn.tile.kv_prologue %r, %item, %k, %k : memref<?xbf16>, memref<?xbf16>, !attn.kv_range<64> -> !attn.kv_pipe<64x128xbf16>
  return
}

// -----

func.func @f(%r: !attn.kv_range<64>, %item: !attn.item, %k: memref<?xbf16>, %s: i64) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 128, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 64, kv = 64, warps = 4>, format = #attn.bsr<block_rows = ?, block_cols = 1, indexing = ragged>>} {
  // expected-error @+1 {{only a strided format (strided = true) takes rows(stride ...): dense rows have constant strides}}
  %p = attn.tile.kv_prologue %r, %item, %k, %k rows(stride %s, %s) : memref<?xbf16>, memref<?xbf16>, !attn.kv_range<64> -> !attn.kv_pipe<64x128xbf16>
  return
}

// -----

func.func @f(%r: !attn.kv_range<128>, %item: !attn.item, %k: memref<?xbf16>) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90a", threads = 384, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 128, kv = 128, warps = 8, kv_tma = true>, format = #attn.bsr<block_rows = ?, block_cols = 1, indexing = ragged>>} {
  // expected-error @+1 {{the kernel's tile loads K/V by TMA (kv_tma): maps(k_map, v_map) is required}}
  %p = attn.tile.kv_prologue %r, %item, %k, %k : memref<?xbf16>, memref<?xbf16>, !attn.kv_range<128> -> !attn.kv_pipe<128x128xbf16>
  return
}

// -----

func.func @f(%r: !attn.kv_range<128>, %item: !attn.item, %k: memref<?xbf16>, %m: !llvm.ptr) attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90a", threads = 384, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = #attn.tile<q = 128, kv = 128, warps = 8>, format = #attn.bsr<block_rows = ?, block_cols = 1, indexing = ragged>>} {
  // expected-error @+1 {{maps(...) is for tiles that load K/V by TMA (kv_tma)}}
  %p = attn.tile.kv_prologue %r, %item, %k, %k maps(%m, %m : !llvm.ptr, !llvm.ptr) : memref<?xbf16>, memref<?xbf16>, !attn.kv_range<128> -> !attn.kv_pipe<128x128xbf16>
  return
}

// -----

func.func @f(%n: i32, %t: memref<?xi64>) attributes {attn.launch = #attn.launch<role = append_kv, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 0, num_kv_heads = 0, format = #attn.bsr<block_cols = 16>, merge_rows = 16>} {
  // expected-error @+1 {{must be inside a copy_indices kernel (a function with an attn.launch contract of role copy_indices)}}
  attn.tile.copy_by_table %n table(%t : memref<?xi64>) {rows = 2}
  return
}

// -----

func.func @f(%n: i32, %t: memref<?xi64>) attributes {attn.launch = #attn.launch<role = copy_indices, chip = "sm_90", threads = 256, shared_bytes = 48, dtype = i32, head_dim = 1, num_qo_heads = 0, num_kv_heads = 0, merge_rows = 256>} {
  // expected-error @+1 {{reads 1 to 16 table rows, got 17}}
  attn.tile.copy_by_table %n table(%t : memref<?xi64>) {rows = 17}
  return
}
