// RUN: attn-opt %s --attn-expand-variants | FileCheck %s
// RUN: attn-opt %s --attn-expand-variants | attn-opt | FileCheck %s
// The built-in @alibi variant, materialized from the library.

// CHECK-LABEL: attn.variant @alibi {
// CHECK-NEXT: attn.hook logits_transform(%[[S:.*]]: f32, %[[Q:.*]]: i32, %[[K:.*]]: i32, %[[H:.*]]: i32)
// CHECK: attn.config num_qo_heads : i32
// CHECK: math.ctlz
// CHECK: %[[SLOPE:.*]] = math.exp2 %{{.*}} : f32
// CHECK-NEXT: %[[DIST:.*]] = arith.subi %[[K]], %[[Q]] : i32
// CHECK-NEXT: %[[DISTF:.*]] = arith.sitofp %[[DIST]] : i32 to f32
// CHECK-NEXT: %[[BIAS:.*]] = arith.mulf %[[SLOPE]], %[[DISTF]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[S]], %[[BIAS]] : f32
// CHECK-NEXT: attn.yield %[[R]] : f32

func.func @uses_alibi(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@alibi]
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
