// RUN: attn-opt %s --attn-expand-variants | FileCheck %s
// RUN: attn-opt %s --attn-expand-variants | attn-opt | FileCheck %s
// The built-in @sliding_window variant, materialized from the library.

// CHECK-LABEL: attn.variant @sliding_window(window_left : i32) {
// CHECK-NEXT: attn.hook logits_mask(%[[Q:.*]]: i32, %[[K:.*]]: i32, %{{.*}}: i32)
// CHECK-NEXT: %[[W:.*]] = attn.param "window_left" : i32
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[NONE:.*]] = arith.cmpi slt, %[[W]], %[[ZERO]] : i32
// CHECK-NEXT: %[[LO:.*]] = arith.subi %[[Q]], %[[W]] : i32
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi sge, %[[K]], %[[LO]] : i32
// CHECK-NEXT: %[[KEEP:.*]] = arith.ori %[[NONE]], %[[IN]] : i1
// CHECK-NEXT: attn.yield %[[KEEP]] : i1

func.func @uses_sliding_window(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>, %w: i32)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@sliding_window] params(%w : i32)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
