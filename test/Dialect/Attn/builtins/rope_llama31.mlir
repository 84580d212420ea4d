// RUN: attn-opt %s --attn-expand-variants | FileCheck %s
// RUN: attn-opt %s --attn-expand-variants | attn-opt | FileCheck %s
// The built-in @rope_llama31 variant, materialized from the library.

// CHECK-LABEL: attn.variant @rope_llama31(rope_scale : f32, rope_theta : f32, rope_factor : f32, low_freq_factor : f32, high_freq_factor : f32, original_context : f32) {
// CHECK: attn.hook query_transform(
// CHECK: attn.param "rope_factor" : f32
// CHECK: attn.param "low_freq_factor" : f32
// CHECK: attn.param "high_freq_factor" : f32
// CHECK: attn.param "original_context" : f32
// CHECK: arith.constant 6.28318
// The divisions are of parameters alone, before the element's frequency
// (the kernel computes them once); after it, multiplies until the
// position's division by rope_scale.
// CHECK: math.exp2
// CHECK-NOT: arith.divf
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf olt
// CHECK-NOT: arith.divf
// CHECK: arith.sitofp
// CHECK-NEXT: arith.divf
// CHECK: math.cos
// CHECK: attn.hook key_transform(

func.func @uses_rope_llama31(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>, %scale: f32, %theta: f32, %factor: f32, %lo: f32, %hi: f32, %ctx: f32)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@rope_llama31] params(%scale, %theta, %factor, %lo, %hi, %ctx : f32, f32, f32, f32, f32, f32)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
