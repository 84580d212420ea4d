// RUN: attn-opt %s -split-input-file | attn-opt -split-input-file | FileCheck %s
// Round trip of the KV-format and tile attributes; defaults are elided.

// CHECK-LABEL: func.func private @paged
// CHECK-SAME: #attn.bsr<block_cols = 16>
func.func private @paged() attributes {format = #attn.bsr<block_rows = 1, block_cols = 16, layout = NHD, indexing = paged>}

// -----

// CHECK-LABEL: func.func private @paged_hnd
// CHECK-SAME: #attn.bsr<block_rows = 4, block_cols = 64, layout = HND>
func.func private @paged_hnd() attributes {format = #attn.bsr<block_rows = 4, block_cols = 64, layout = HND>}

// -----

// CHECK-LABEL: func.func private @tree
// CHECK-SAME: #attn.bsr<block_rows = 8, block_cols = 1>
func.func private @tree() attributes {format = #attn.bsr<block_rows = 8, block_cols = 1>}

// -----

// CHECK-LABEL: func.func private @ragged
// CHECK-SAME: #attn.bsr<block_rows = 512, block_cols = 1, indexing = ragged>
func.func private @ragged() attributes {format = #attn.bsr<block_rows = 512, block_cols = 1, indexing = ragged>}

// -----

// Ragged K/V rows at strides given at launch (a fused QKV projection's slices).
// CHECK-LABEL: func.func private @strided
// CHECK-SAME: #attn.bsr<block_rows = ?, block_cols = 1, indexing = ragged, strided = true>
func.func private @strided() attributes {format = #attn.bsr<block_rows = ?, block_cols = 1, indexing = ragged, strided = true>}

// -----

// CHECK-LABEL: func.func private @cascade
// CHECK-SAME: #attn.composed<[#attn.bsr<block_rows = 64, block_cols = 16>, #attn.bsr<block_cols = 16>]>
func.func private @cascade() attributes {format = #attn.composed<[#attn.bsr<block_rows = 64, block_cols = 16>, #attn.bsr<block_rows = 1, block_cols = 16>]>}

// -----

// CHECK-LABEL: func.func private @tiles
// CHECK-SAME: decode = #attn.tile<q = 16, kv = 64, warps = 4, gqa_pack = 8>
// CHECK-SAME: prefill = #attn.tile<q = 128, kv = 64, warps = 8, stages = 3>
func.func private @tiles() attributes {
  decode = #attn.tile<q = 16, kv = 64, warps = 4, stages = 2, gqa_pack = 8>,
  prefill = #attn.tile<q = 128, kv = 64, warps = 8, stages = 3>}

// -----

// CHECK-LABEL: func.func private @params
// CHECK-SAME: #attn.param<"window_left" : i32>
// CHECK-SAME: #attn.param<"sinks" : memref<?xf32>>
func.func private @params() attributes {p = [#attn.param<"window_left" : i32>, #attn.param<"sinks" : memref<?xf32>>]}
