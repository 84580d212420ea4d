// RUN: attn-opt %s --attn-expand-variants | FileCheck %s
// RUN: attn-opt %s --attn-expand-variants | attn-opt | FileCheck %s
// The built-in @sinks variant, materialized from the library.

// CHECK-LABEL: attn.variant @sinks(sinks : memref<?xf32>) {
// CHECK-NEXT: attn.hook sink(%[[H:.*]]: i32)
// CHECK-NEXT: %[[T:.*]] = attn.param "sinks" : memref<?xf32>
// CHECK-NEXT: %[[I:.*]] = arith.index_cast %[[H]] : i32 to index
// CHECK-NEXT: %[[V:.*]] = memref.load %[[T]][%[[I]]] : memref<?xf32>
// CHECK-NEXT: attn.yield %[[V]] : f32

func.func @uses_sinks(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>, %t: memref<?xf32>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@sinks] params(%t : memref<?xf32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
