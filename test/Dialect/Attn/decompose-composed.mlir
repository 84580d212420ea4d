// RUN: attn-opt %s -split-input-file --attn-decompose-composed -verify-diagnostics | FileCheck %s

// Shared prefix + per-request suffix: two attentions over the same cache,
// each with its view's index arrays, merged by LSE.
// CHECK-LABEL: func.func @cascade
// CHECK-SAME: (%[[Q:[^:]*]]: tensor<?x32x128xbf16>, %[[K:[^:]*]]: tensor<?x16x8x128xbf16>, %[[V:[^:]*]]: tensor<?x16x8x128xbf16>,
// CHECK-SAME: %[[A0:[^:]*]]: {{.*}}, %[[A1:[^:]*]]: {{.*}}, %[[A2:[^:]*]]: {{.*}}, %[[A3:[^:]*]]: {{.*}}, %[[B0:[^:]*]]: {{.*}}, %[[B1:[^:]*]]: {{.*}}, %[[B2:[^:]*]]: {{.*}}, %[[B3:[^:]*]]: {{.*}}, %[[CAP:[^:]*]]: f32)
// CHECK: %[[O0:.*]], %[[L0:.*]] = attn.attention %[[Q]], %[[K]], %[[V]] format(#attn.bsr<block_rows = 64, block_cols = 16>)
// CHECK-SAME: indices(%[[A0]], %[[A1]], %[[A2]], %[[A3]] :
// CHECK-SAME: variants [@soft_cap] params(%[[CAP]] : f32)
// CHECK: %[[O1:.*]], %[[L1:.*]] = attn.attention %[[Q]], %[[K]], %[[V]] format(#attn.bsr<block_cols = 16>)
// CHECK-SAME: indices(%[[B0]], %[[B1]], %[[B2]], %[[B3]] :
// CHECK-SAME: variants [@soft_cap] params(%[[CAP]] : f32)
// CHECK: %[[O:.*]], %[[L:.*]] = attn.merge_states %[[O0]], %[[O1]] lse %[[L0]], %[[L1]] : tensor<?x32x128xbf16>, tensor<?x32xf32> -> tensor<?x32x128xbf16>
// CHECK: return %[[O]], %[[L]]
func.func @cascade(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %a0: tensor<?xi32>, %a1: tensor<?xi32>, %a2: tensor<?xi32>, %a3: tensor<?xi32>,
    %b0: tensor<?xi32>, %b1: tensor<?xi32>, %b2: tensor<?xi32>, %b3: tensor<?xi32>, %cap: f32)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.composed<[#attn.bsr<block_rows = 64, block_cols = 16>, #attn.bsr<block_rows = 1, block_cols = 16>]>)
      indices(%a0, %a1, %a2, %a3, %b0, %b1, %b2, %b3 : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>,
              tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@soft_cap] params(%cap : f32)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// A plain BSR attention is left alone.
// CHECK-LABEL: func.func @plain
// CHECK: attn.attention
// CHECK-NOT: attn.merge_states
func.func @plain(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @masked(%q: tensor<?x32x128xbf16>, %k: tensor<?x1x8x128xbf16>, %i: tensor<?xi32>, %m: tensor<?xi8>) {
  // expected-error @+1 {{cannot decompose a composed format with a custom mask: the mask spans the whole cache, not one view}}
  %o, %lse = attn.attention %q, %k, %k
      format(#attn.composed<[#attn.bsr<block_rows = 64, block_cols = 1>, #attn.bsr<block_cols = 1>]>)
      indices(%i, %i, %i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      mask(%m : tensor<?xi8>)
      : tensor<?x32x128xbf16>, tensor<?x1x8x128xbf16>, tensor<?x1x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}
