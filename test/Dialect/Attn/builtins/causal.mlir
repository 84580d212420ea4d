// RUN: attn-opt %s --attn-expand-variants | FileCheck %s
// RUN: attn-opt %s --attn-expand-variants | attn-opt | FileCheck %s
// The built-in @causal variant, materialized from the library.

// CHECK-LABEL: attn.variant @causal {
// CHECK-NEXT: attn.hook logits_mask(%[[Q:.*]]: i32, %[[K:.*]]: i32, %{{.*}}: i32)
// CHECK-NEXT: %[[KEEP:.*]] = arith.cmpi sle, %[[K]], %[[Q]] : i32
// CHECK-NEXT: attn.yield %[[KEEP]] : i1
// CHECK-NOT: attn.hook
// CHECK: func.func @uses_causal

func.func @uses_causal(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@causal]
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
