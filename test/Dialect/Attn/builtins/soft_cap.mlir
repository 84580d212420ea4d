// RUN: attn-opt %s --attn-expand-variants | FileCheck %s
// RUN: attn-opt %s --attn-expand-variants | attn-opt | FileCheck %s
// The built-in @soft_cap variant, materialized from the library.

// CHECK-LABEL: attn.variant @soft_cap(cap : f32) {
// CHECK-NEXT: attn.hook logits_transform(%[[S:.*]]: f32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32)
// CHECK-NEXT: %[[CAP:.*]] = attn.param "cap" : f32
// CHECK-NEXT: %[[X:.*]] = arith.divf %[[S]], %[[CAP]] : f32
// CHECK-NEXT: %[[T:.*]] = math.tanh %[[X]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.mulf %[[CAP]], %[[T]] : f32
// CHECK-NEXT: attn.yield %[[R]] : f32

func.func @uses_soft_cap(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>, %cap: f32)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@soft_cap] params(%cap : f32)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
