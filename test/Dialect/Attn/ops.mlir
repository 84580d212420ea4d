// RUN: attn-opt %s -split-input-file | attn-opt -split-input-file | FileCheck %s
// Round trip of attn.attention, attn.merge_states, attn.append_kv, attn.copy_indices and
// attn.copy_by_table over
// every KV format.

attn.variant @window(window_left : i32) {
  attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) {
    %w = attn.param "window_left" : i32
    %lo = arith.subi %q_pos, %w : i32
    %keep = arith.cmpi sge, %k_pos, %lo : i32
    attn.yield %keep : i1
  }
}

// CHECK-LABEL: func.func @paged_decode
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} format(#attn.bsr<block_cols = 16>)
// CHECK-SAME: indices(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
// CHECK-SAME: sm_scale(%{{.*}}) variants [@causal, @window] params(%{{.*}} : i32)
// CHECK-SAME: -> tensor<?x32x128xbf16>, tensor<?x32xf32>
func.func @paged_decode(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>, %scale: f32, %w: i32)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      sm_scale(%scale) variants [@causal, @window] params(%w : i32)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// CHECK-LABEL: func.func @paged_hnd_tile
// CHECK: format(#attn.bsr<block_rows = 128, block_cols = 64, layout = HND>)
// CHECK-SAME: {tile = #attn.tile<q = 128, kv = 64, warps = 8>}
// CHECK-SAME: tensor<?x8x64x256xf16>
func.func @paged_hnd_tile(%q: tensor<?x8x256xf16>, %k: tensor<?x8x64x256xf16>, %v: tensor<?x8x64x256xf16>,
    %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>)
    -> (tensor<?x8x256xf16>, tensor<?x8xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = 128, block_cols = 64, layout = HND>)
      indices(%qo, %kp, %ki, %kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      {tile = #attn.tile<q = 128, kv = 64, warps = 8>}
      : tensor<?x8x256xf16>, tensor<?x8x64x256xf16>, tensor<?x8x64x256xf16>
      -> tensor<?x8x256xf16>, tensor<?x8xf32>
  return %o, %lse : tensor<?x8x256xf16>, tensor<?x8xf32>
}

// -----

// CHECK-LABEL: func.func @ragged_prefill
// CHECK: format(#attn.bsr<block_rows = 1024, block_cols = 1, indexing = ragged>)
// CHECK-SAME: indices(%{{.*}}, %{{.*}} : tensor<17xi32>, tensor<17xi32>)
// CHECK-SAME: tensor<?x8x64xbf16>
func.func @ragged_prefill(%q: tensor<?x32x64xbf16>, %k: tensor<?x8x64xbf16>, %v: tensor<?x8x64xbf16>,
    %qo: tensor<17xi32>, %kp: tensor<17xi32>) -> (tensor<?x32x64xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1024, block_cols = 1, indexing = ragged>)
      indices(%qo, %kp : tensor<17xi32>, tensor<17xi32>) variants [@causal]
      : tensor<?x32x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>
      -> tensor<?x32x64xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x64xbf16>, tensor<?x32xf32>
}

// -----

// A speculative token tree: column-vector BSR with a bit-packed custom mask.
// CHECK-LABEL: func.func @tree_verify
// CHECK: format(#attn.bsr<block_rows = 8, block_cols = 1>)
// CHECK-SAME: indices(%{{.*}}, %{{.*}}, %{{.*}} : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
// CHECK-SAME: mask(%{{.*}} : tensor<?xi8>)
func.func @tree_verify(%q: tensor<?x32x128xbf16>, %k: tensor<?x1x8x128xbf16>, %v: tensor<?x1x8x128xbf16>,
    %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %mask: tensor<?xi8>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = 8, block_cols = 1>)
      indices(%qo, %kp, %ki : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>) mask(%mask : tensor<?xi8>)
      : tensor<?x32x128xbf16>, tensor<?x1x8x128xbf16>, tensor<?x1x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// CHECK-LABEL: func.func @cascade
// CHECK: format(#attn.composed<[#attn.bsr<block_rows = 64, block_cols = 16>, #attn.bsr<block_cols = 16>]>)
// CHECK-SAME: indices(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} :
func.func @cascade(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %a0: tensor<?xi32>, %a1: tensor<?xi32>, %a2: tensor<?xi32>, %a3: tensor<?xi32>,
    %b0: tensor<?xi32>, %b1: tensor<?xi32>, %b2: tensor<?xi32>, %b3: tensor<?xi32>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.composed<[#attn.bsr<block_rows = 64, block_cols = 16>, #attn.bsr<block_rows = 1, block_cols = 16>]>)
      indices(%a0, %a1, %a2, %a3, %b0, %b1, %b2, %b3 : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>,
              tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// CHECK-LABEL: func.func @merge
// CHECK: attn.merge_states %{{.*}}, %{{.*}}, %{{.*}} lse %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x32x128xf32>, tensor<?x32xf32> -> tensor<?x32x128xbf16>
func.func @merge(%o0: tensor<?x32x128xf32>, %o1: tensor<?x32x128xf32>, %o2: tensor<?x32x128xf32>,
    %l0: tensor<?x32xf32>, %l1: tensor<?x32xf32>, %l2: tensor<?x32xf32>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.merge_states %o0, %o1, %o2 lse %l0, %l1, %l2
      : tensor<?x32x128xf32>, tensor<?x32xf32> -> tensor<?x32x128xbf16>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// CHECK-LABEL: func.func @merge_masked
// CHECK: attn.merge_states %{{.*}}, %{{.*}} lse %{{.*}}, %{{.*}} mask %{{.*}} : tensor<?x8x64xbf16>, tensor<?x8xf32>, tensor<?xi8> -> tensor<?x8x64xbf16>
func.func @merge_masked(%o0: tensor<?x8x64xbf16>, %o1: tensor<?x8x64xbf16>,
    %l0: tensor<?x8xf32>, %l1: tensor<?x8xf32>, %m: tensor<?xi8>)
    -> (tensor<?x8x64xbf16>, tensor<?x8xf32>) {
  %o, %lse = attn.merge_states %o0, %o1 lse %l0, %l1 mask %m
      : tensor<?x8x64xbf16>, tensor<?x8xf32>, tensor<?xi8> -> tensor<?x8x64xbf16>
  return %o, %lse : tensor<?x8x64xbf16>, tensor<?x8xf32>
}

// -----

// CHECK-LABEL: func.func @append
// CHECK: attn.append_kv %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} format(#attn.bsr<block_cols = 16>)
// CHECK-SAME: : tensor<?x8x128xbf16> into tensor<?x16x8x128xbf16>
func.func @append(%k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>,
    %kc: tensor<?x16x8x128xbf16>, %vc: tensor<?x16x8x128xbf16>,
    %b: tensor<?xi32>, %p: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>)
    -> (tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>) {
  %k1, %v1 = attn.append_kv %k, %v into %kc, %vc format(#attn.bsr<block_cols = 16>)
      indices(%b, %p, %kp, %ki : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x8x128xbf16> into tensor<?x16x8x128xbf16>
  return %k1, %v1 : tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
}

// -----

// CHECK-LABEL: func.func @copy_indices
// CHECK: %{{.*}}:2 = attn.copy_indices %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} : tensor<?xi32>, tensor<7xi32> into tensor<?xi32>, tensor<9xi32>
func.func @copy_indices(%a: tensor<?xi32>, %b: tensor<7xi32>, %da: tensor<?xi32>, %db: tensor<9xi32>)
    -> (tensor<?xi32>, tensor<9xi32>) {
  %c:2 = attn.copy_indices %a, %b into %da, %db : tensor<?xi32>, tensor<7xi32> into tensor<?xi32>, tensor<9xi32>
  return %c#0, %c#1 : tensor<?xi32>, tensor<9xi32>
}

// -----

// CHECK-LABEL: func.func @copy_by_table
// CHECK: attn.copy_by_table %{{.*}} {rows = 10 : i64} : memref<?xi64>
func.func @copy_by_table(%t: memref<?xi64>) {
  attn.copy_by_table %t {rows = 10} : memref<?xi64>
  return
}
