// RUN: attn-opt %s --attn-prepare-pipeline --attn-outline-kernels | FileCheck %s

// A hook runs for every element, so its divisions by values that are the same
// for all of them (parameters, config values, constants and arithmetic on
// those) become products with the reciprocal, which CSE and LICM then compute
// once per kernel; a division by a per-element value stays a division.
attn.variant @divisions(a : f32, b : f32) {
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    %a = attn.param "a" : f32
    %b = attn.param "b" : f32
    %d = attn.config head_dim : i32
    %df = arith.sitofp %d : i32 to f32
    %ab = arith.mulf %a, %b : f32
    %x = arith.divf %s, %ab : f32
    %y = arith.divf %x, %df fastmath<contract> : f32
    %kf = arith.sitofp %k_pos : i32 to f32
    %z = arith.divf %y, %kf : f32
    %w = arith.divf %a, %b : f32
    %r = arith.addf %z, %w : f32
    attn.yield %r : f32
  }
}

// CHECK-LABEL: gpu.func @attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_divisions(
// CHECK-SAME: %[[A:arg[0-9]+]]: f32 {attn.name = "a", attn.param_type = f32}, %[[B:arg[0-9]+]]: f32 {attn.name = "b", attn.param_type = f32})
// CHECK: logits_transform {
// CHECK-NEXT: ^bb0(%[[S:.*]]: f32, %{{.*}}: i32, %[[K:.*]]: i32, %{{.*}}: i32):
// CHECK: %[[D:.*]] = arith.constant 128 : i32
// CHECK-NEXT: %[[DF:.*]] = arith.sitofp %[[D]] : i32 to f32
// CHECK-NEXT: %[[AB:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[INV:.*]] = arith.divf %[[ONE]], %[[AB]] : f32
// CHECK-NEXT: %[[X:.*]] = arith.mulf %[[S]], %[[INV]] : f32
// CHECK-NEXT: %[[ONE2:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[INV2:.*]] = arith.divf %[[ONE2]], %[[DF]] fastmath<contract> : f32
// CHECK-NEXT: %[[Y:.*]] = arith.mulf %[[X]], %[[INV2]] fastmath<contract> : f32
// CHECK-NEXT: %[[KF:.*]] = arith.sitofp %[[K]] : i32 to f32
// CHECK-NEXT: %[[Z:.*]] = arith.divf %[[Y]], %[[KF]] : f32
// CHECK-NEXT: %[[W:.*]] = arith.divf %[[A]], %[[B]] : f32
// CHECK-NEXT: arith.addf %[[Z]], %[[W]] : f32
func.func @decode(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>, %a: f32, %b: f32) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@divisions] params(%a, %b : f32, f32)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
