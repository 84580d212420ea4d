// RUN: attn-opt %s -split-input-file --attn-expand-variants -verify-diagnostics | FileCheck %s

// Built-ins are copied once each, in first-use order; a module's own
// definition of a name wins over the built-in.

// CHECK-LABEL: module
// CHECK: attn.variant @soft_cap(cap : f32)
// CHECK: attn.variant @causal {
// CHECK-NEXT: attn.hook logits_mask
// CHECK-NEXT: arith.constant true
// CHECK-NOT: attn.variant @causal
// CHECK-NOT: attn.variant @soft_cap
// CHECK: func.func @two
attn.variant @causal {
  attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) {
    %t = arith.constant true
    attn.yield %t : i1
  }
}
func.func @two(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>, %cap: f32) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@soft_cap, @causal] params(%cap : f32)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  %o2, %lse2 = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@soft_cap] params(%cap : f32)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

// No variants, nothing to add.
// CHECK-LABEL: module
// CHECK-NOT: attn.variant
// CHECK: func.func @plain
func.func @plain(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}
