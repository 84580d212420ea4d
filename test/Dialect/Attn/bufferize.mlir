// RUN: attn-opt %s -split-input-file -one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s
// One-shot bufferization of the attn ops: the value form without `outs`
// gets fresh destinations; `outs` and append_kv's caches are written in
// place.

// CHECK-LABEL: func.func @attention_allocates
// CHECK-SAME: (%[[Q:.*]]: memref<?x32x128xbf16>, %[[K:.*]]: memref<?x16x8x128xbf16>, %[[V:.*]]: memref<?x16x8x128xbf16>
// CHECK: %[[ROWS:.*]] = memref.dim %[[Q]], %{{.*}} : memref<?x32x128xbf16>
// CHECK: %[[O:.*]] = memref.alloc(%[[ROWS]]) {{.*}}: memref<?x32x128xbf16>
// CHECK: %[[ROWS2:.*]] = memref.dim %[[Q]], %{{.*}} : memref<?x32x128xbf16>
// CHECK: %[[LSE:.*]] = memref.alloc(%[[ROWS2]]) {{.*}}: memref<?x32xf32>
// CHECK: attn.attention %[[Q]], %[[K]], %[[V]] format(#attn.bsr<block_cols = 16>)
// CHECK-SAME: indices(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
// CHECK-SAME: variants [@causal] outs(%[[O]], %[[LSE]] : memref<?x32x128xbf16>, memref<?x32xf32>)
// CHECK-SAME: {attn.kernels = [@attn_kernels::@k], tile = #attn.tile<q = 16, kv = 16, warps = 3, gqa_pack = 4, ctas_per_sm = 4>}
// CHECK-SAME: : memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>{{$}}
// CHECK: return %[[O]], %[[LSE]] : memref<?x32x128xbf16>, memref<?x32xf32>
func.func @attention_allocates(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@causal]
      {attn.kernels = [@attn_kernels::@k], tile = #attn.tile<q = 16, kv = 16, warps = 3, gqa_pack = 4, ctas_per_sm = 4>}
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// CHECK-LABEL: func.func @attention_in_place
// CHECK-SAME: %[[O:[^:]*]]: memref<4x32x128xbf16>, %[[LSE:[^:]*]]: memref<4x32xf32>)
// CHECK-NOT: memref.alloc
// CHECK: attn.attention {{.*}} sm_scale(%{{.*}}) outs(%[[O]], %[[LSE]] : memref<4x32x128xbf16>, memref<4x32xf32>)
// CHECK-NOT: memref.alloc
// CHECK: return %[[O]], %[[LSE]]
func.func @attention_in_place(%q: tensor<4x32x128xbf16>, %k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>,
    %qo: tensor<3xi32>, %kp: tensor<3xi32>, %scale: f32,
    %o_init: tensor<4x32x128xbf16>, %lse_init: tensor<4x32xf32>)
    -> (tensor<4x32x128xbf16>, tensor<4x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = 2, block_cols = 1, indexing = ragged>)
      indices(%qo, %kp : tensor<3xi32>, tensor<3xi32>) sm_scale(%scale)
      outs(%o_init, %lse_init : tensor<4x32x128xbf16>, tensor<4x32xf32>)
      : tensor<4x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>
      -> tensor<4x32x128xbf16>, tensor<4x32xf32>
  return %o, %lse : tensor<4x32x128xbf16>, tensor<4x32xf32>
}

// -----

// CHECK-LABEL: func.func @merge_allocates
// CHECK-SAME: (%[[O0:.*]]: memref<?x32x128xf32>, %[[O1:.*]]: memref<?x32x128xf32>, %[[L0:.*]]: memref<?x32xf32>, %[[L1:.*]]: memref<?x32xf32>)
// CHECK: %[[O:.*]] = memref.alloc(%{{.*}}) {{.*}}: memref<?x32x128xf32>
// CHECK: %[[L:.*]] = memref.alloc(%{{.*}}) {{.*}}: memref<?x32xf32>
// CHECK: attn.merge_states %[[O0]], %[[O1]] lse %[[L0]], %[[L1]] outs(%[[O]], %[[L]] : memref<?x32x128xf32>, memref<?x32xf32>) : memref<?x32x128xf32>, memref<?x32xf32>{{$}}
func.func @merge_allocates(%o0: tensor<?x32x128xf32>, %o1: tensor<?x32x128xf32>, %l0: tensor<?x32xf32>, %l1: tensor<?x32xf32>)
    -> (tensor<?x32x128xf32>, tensor<?x32xf32>) {
  %o, %lse = attn.merge_states %o0, %o1 lse %l0, %l1 : tensor<?x32x128xf32>, tensor<?x32xf32> -> tensor<?x32x128xf32>
  return %o, %lse : tensor<?x32x128xf32>, tensor<?x32xf32>
}

// -----

// CHECK-LABEL: func.func @merge_in_place
// CHECK-NOT: memref.alloc
// CHECK: attn.merge_states %{{.*}}, %{{.*}} lse %{{.*}}, %{{.*}} mask %{{.*}} outs(%arg5, %arg6 : memref<?x8x64xbf16>, memref<?x8xf32>)
// CHECK-SAME: : memref<?x8x64xbf16>, memref<?x8xf32>, memref<?xi8>{{$}}
func.func @merge_in_place(%o0: tensor<?x8x64xbf16>, %o1: tensor<?x8x64xbf16>, %l0: tensor<?x8xf32>, %l1: tensor<?x8xf32>,
    %m: tensor<?xi8>, %o_init: tensor<?x8x64xbf16>, %l_init: tensor<?x8xf32>)
    -> (tensor<?x8x64xbf16>, tensor<?x8xf32>) {
  %o, %lse = attn.merge_states %o0, %o1 lse %l0, %l1 mask %m
      outs(%o_init, %l_init : tensor<?x8x64xbf16>, tensor<?x8xf32>)
      : tensor<?x8x64xbf16>, tensor<?x8xf32>, tensor<?xi8> -> tensor<?x8x64xbf16>
  return %o, %lse : tensor<?x8x64xbf16>, tensor<?x8xf32>
}

// -----

// CHECK-LABEL: func.func @append_in_place
// CHECK-SAME: %[[KC:[^:]*]]: memref<?x16x8x128xbf16>, %[[VC:[^:]*]]: memref<?x16x8x128xbf16>
// CHECK-NOT: memref.alloc
// CHECK: attn.append_kv %{{.*}}, %{{.*}} into %[[KC]], %[[VC]] format(#attn.bsr<block_cols = 16>)
// CHECK-SAME: : memref<?x8x128xbf16> into memref<?x16x8x128xbf16>{{$}}
// CHECK: return %[[KC]], %[[VC]]
func.func @append_in_place(%kn: tensor<?x8x128xbf16>, %vn: tensor<?x8x128xbf16>,
    %kc: tensor<?x16x8x128xbf16>, %vc: tensor<?x16x8x128xbf16>,
    %b: tensor<?xi32>, %p: tensor<?xi32>, %ip: tensor<?xi32>, %ix: tensor<?xi32>)
    -> (tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>) {
  %k1, %v1 = attn.append_kv %kn, %vn into %kc, %vc format(#attn.bsr<block_cols = 16>)
      indices(%b, %p, %ip, %ix : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x8x128xbf16> into tensor<?x16x8x128xbf16>
  return %k1, %v1 : tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
}

// -----

// The cache is read after the append: bufferization copies it first.
// CHECK-LABEL: func.func @append_copies_a_cache_read_later
// CHECK: %[[COPY:.*]] = memref.alloc
// CHECK: memref.copy %{{.*}}, %[[COPY]]
// CHECK: attn.append_kv %{{.*}}, %{{.*}} into %[[COPY]], %{{.*}}
func.func @append_copies_a_cache_read_later(%kn: tensor<?x8x128xbf16>, %vn: tensor<?x8x128xbf16>,
    %kc: tensor<?x16x8x128xbf16>, %vc: tensor<?x16x8x128xbf16>,
    %b: tensor<?xi32>, %p: tensor<?xi32>, %ip: tensor<?xi32>, %ix: tensor<?xi32>)
    -> (tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>) {
  %k1, %v1 = attn.append_kv %kn, %vn into %kc, %vc format(#attn.bsr<block_cols = 16>)
      indices(%b, %p, %ip, %ix : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x8x128xbf16> into tensor<?x16x8x128xbf16>
  return %k1, %v1, %kc : tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
}

// -----

// copy_indices writes its destinations in place (their tails stay).
// CHECK-LABEL: func.func @copy_indices_in_place
// CHECK-SAME: %{{[^:]*}}: memref<?xi32>, %[[D:[^:]*]]: memref<?xi32>
// CHECK-NOT: memref.alloc
// CHECK: attn.copy_indices %{{.*}} into %[[D]] : memref<?xi32> into memref<?xi32>{{$}}
// CHECK: return %[[D]]
func.func @copy_indices_in_place(%s: tensor<?xi32>, %d: tensor<?xi32>) -> tensor<?xi32> {
  %c = attn.copy_indices %s into %d : tensor<?xi32> into tensor<?xi32>
  return %c : tensor<?xi32>
}
