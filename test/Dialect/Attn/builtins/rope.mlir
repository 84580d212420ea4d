// RUN: attn-opt %s --attn-expand-variants | FileCheck %s
// RUN: attn-opt %s --attn-expand-variants | attn-opt | FileCheck %s
// The built-in @rope variant, materialized from the library.

// CHECK-LABEL: attn.variant @rope(rope_scale : f32, rope_theta : f32) {
// CHECK: attn.hook query_transform(%[[X:.*]]: f32, %[[PAIR:.*]]: f32, %[[DIM:.*]]: i32, %[[POS:.*]]: i32, %{{.*}}: i32)
// CHECK: attn.config head_dim : i32
// CHECK: math.cos
// CHECK: math.sin
// CHECK: arith.negf %[[PAIR]]
// CHECK: attn.yield %{{.*}} : f32
// CHECK: attn.hook key_transform(
// CHECK: math.cos
// CHECK: math.sin
// CHECK: attn.yield %{{.*}} : f32

func.func @uses_rope(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>, %scale: f32, %theta: f32)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@rope] params(%scale, %theta : f32, f32)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
