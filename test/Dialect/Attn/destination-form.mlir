// RUN: attn-opt %s -split-input-file | attn-opt -split-input-file | FileCheck %s
// Round trip of the destination form: `outs` on tensors, and the memref
// form (no results) of attn.attention, attn.merge_states, attn.append_kv,
// attn.copy_indices.

// CHECK-LABEL: func.func @attention_memref
// CHECK: attn.attention %{{.*}}, %{{.*}}, %{{.*}} format(#attn.bsr<block_cols = 16>)
// CHECK-SAME: variants [@causal] outs(%{{.*}}, %{{.*}} : memref<?x32x128xbf16>, memref<?x32xf32>)
// CHECK-SAME: : memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>{{$}}
func.func @attention_memref(%q: memref<?x32x128xbf16>, %k: memref<?x16x8x128xbf16>, %v: memref<?x16x8x128xbf16>,
    %qo: memref<?xi32>, %kp: memref<?xi32>, %ki: memref<?xi32>, %kl: memref<?xi32>,
    %o: memref<?x32x128xbf16>, %lse: memref<?x32xf32>) {
  attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
      variants [@causal] outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
      : memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>
  return
}

// -----

// CHECK-LABEL: func.func @attention_tensor_outs
// CHECK: outs(%{{.*}}, %{{.*}} : tensor<?x32x128xbf16>, tensor<?x32xf32>)
// CHECK-SAME: -> tensor<?x32x128xbf16>, tensor<?x32xf32>
func.func @attention_tensor_outs(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>,
    %o0: tensor<?x32x128xbf16>, %l0: tensor<?x32xf32>) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      outs(%o0, %l0 : tensor<?x32x128xbf16>, tensor<?x32xf32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// CHECK-LABEL: func.func @merge_memref
// CHECK: attn.merge_states %{{.*}}, %{{.*}} lse %{{.*}}, %{{.*}} outs(%{{.*}}, %{{.*}} : memref<?x32x128xf32>, memref<?x32xf32>) : memref<?x32x128xf32>, memref<?x32xf32>{{$}}
func.func @merge_memref(%o0: memref<?x32x128xf32>, %o1: memref<?x32x128xf32>, %l0: memref<?x32xf32>, %l1: memref<?x32xf32>,
    %o: memref<?x32x128xf32>, %l: memref<?x32xf32>) {
  attn.merge_states %o0, %o1 lse %l0, %l1 outs(%o, %l : memref<?x32x128xf32>, memref<?x32xf32>)
      : memref<?x32x128xf32>, memref<?x32xf32>
  return
}

// -----

// CHECK-LABEL: func.func @append_memref
// CHECK: attn.append_kv %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} format(#attn.bsr<block_cols = 16>)
// CHECK-SAME: : memref<?x8x128xbf16> into memref<?x16x8x128xbf16>{{$}}
func.func @append_memref(%kn: memref<?x8x128xbf16>, %vn: memref<?x8x128xbf16>,
    %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
    %b: memref<?xi32>, %p: memref<?xi32>, %ip: memref<?xi32>, %ix: memref<?xi32>) {
  attn.append_kv %kn, %vn into %kc, %vc format(#attn.bsr<block_cols = 16>)
      indices(%b, %p, %ip, %ix : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
      : memref<?x8x128xbf16> into memref<?x16x8x128xbf16>
  return
}

// -----

// CHECK-LABEL: func.func @copy_indices_memref
// CHECK: attn.copy_indices %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} : memref<?xi32>, memref<?xi32> into memref<?xi32>, memref<?xi32>{{$}}
func.func @copy_indices_memref(%s0: memref<?xi32>, %s1: memref<?xi32>, %d0: memref<?xi32>, %d1: memref<?xi32>) {
  attn.copy_indices %s0, %s1 into %d0, %d1 : memref<?xi32>, memref<?xi32> into memref<?xi32>, memref<?xi32>
  return
}
