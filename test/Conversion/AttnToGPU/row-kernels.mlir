// RUN: attn-opt %s --attn-outline-kernels="chip=sm_80" --convert-attn-to-gpu -split-input-file | FileCheck %s

// merge_states: a grid-strided loop over pairs of 16-row groups (16
// threads a row at head dim 128): the loads of both rows a thread holds
// first (16-byte chunks of every state and its LSE, at the row clamped to
// the last one), then per row, inside its existence test, the weights
// 2^(s_i - m) against the max (0 when every state is -inf), the merged
// chunk narrowed back to bf16 and stored by all threads, the LSE by the
// row's first thread. The row index is divided in 32 bits.
// CHECK-LABEL: gpu.func @attn_merge_states_bf16_d128_n2
// CHECK-NOT: attn.tile
// CHECK: %[[GRID:.*]] = gpu.grid_dim x
// CHECK: %[[STEP:.*]] = arith.muli %[[GRID]], %{{.*}} : index
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[STEP]]
// CHECK: arith.minsi
// CHECK: arith.divui %{{.*}}, %{{.*}} : i32
// CHECK-COUNT-2: memref.load
// CHECK-COUNT-2: vector.load %{{.*}} {alignment = 16 : i64} : memref<1099511627776xbf16, #gpu.address_space<global>>, vector<8xbf16>
// CHECK: arith.minsi
// CHECK-COUNT-2: memref.load
// CHECK-COUNT-2: vector.load %{{.*}} {alignment = 16 : i64} : memref<1099511627776xbf16, #gpu.address_space<global>>, vector<8xbf16>
// CHECK: scf.if
// CHECK: arith.cmpf oeq
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: math.log2
// CHECK: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK: vector.store %{{.*}} {alignment = 16 : i64}
// CHECK: scf.if
// CHECK: memref.store
// CHECK: scf.if
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
func.func @merge(%v0: tensor<?x32x128xbf16>, %v1: tensor<?x32x128xbf16>, %s0: tensor<?x32xf32>, %s1: tensor<?x32xf32>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.merge_states %v0, %v1 lse %s0, %s1
      : tensor<?x32x128xbf16>, tensor<?x32xf32> -> tensor<?x32x128xbf16>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// Six f32 states with a mask: two groups of loads (4, issued with the other
// row's, then 2 inside the row's test), the second rescaling the first's sum
// and accumulator; a masked-off row keeps state 0.
// CHECK-LABEL: gpu.func @attn_merge_states_f32_d64_n6_masked
// CHECK-COUNT-4: vector.load %{{.*}} : memref<1099511627776xf32, #gpu.address_space<global>>, vector<8xf32>
// CHECK: arith.minsi
// CHECK-COUNT-4: vector.load %{{.*}} : memref<1099511627776xf32, #gpu.address_space<global>>, vector<8xf32>
// CHECK: scf.if
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK-COUNT-2: vector.load %{{.*}} : memref<1099511627776xf32, #gpu.address_space<global>>, vector<8xf32>
// CHECK: memref.load %{{.*}} : memref<1099511627776xi8, #gpu.address_space<global>>
// CHECK: arith.cmpi ne
// CHECK: arith.select %{{.*}} : vector<8xf32>
// CHECK-NOT: arith.truncf
// CHECK: vector.store
func.func @merge6(%v: tensor<?x4x64xf32>, %s: tensor<?x4xf32>, %m: tensor<?xi8>) -> tensor<?x4x64xf32> {
  %o, %lse = attn.merge_states %v, %v, %v, %v, %v, %v lse %s, %s, %s, %s, %s, %s mask %m
      : tensor<?x4x64xf32>, tensor<?x4xf32>, tensor<?xi8> -> tensor<?x4x64xf32>
  return %o : tensor<?x4x64xf32>
}

// -----

// append_kv: per row, loaded first for both rows of the step: the K/V
// chunks, the row's request and position, its slot in the page table (the
// page read only when the request owns the slot); then, inside the row's
// test, the copy when the page is in range, else the row's first thread
// counts it in dropped[0].
// CHECK-LABEL: gpu.func @attn_append_kv_bf16_d128_p16
// CHECK-COUNT-2: vector.load {{.*}} vector<8xbf16>
// CHECK: memref.load %{{.*}} : memref<1099511627776xi32, #gpu.address_space<global>>
// CHECK: memref.load %{{.*}} : memref<1099511627776xi32, #gpu.address_space<global>>
// CHECK: arith.cmpi sge
// CHECK: scf.if %{{.*}} -> (index)
// CHECK-COUNT-2: vector.load {{.*}} vector<8xbf16>
// CHECK: scf.if %{{.*}} -> (index)
// CHECK: scf.if
// CHECK: scf.if
// CHECK-COUNT-2: vector.store {{.*}} vector<8xbf16>
// CHECK: } else {
// CHECK: memref.atomic_rmw addi
func.func @append(%k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>, %kc: tensor<?x16x8x128xbf16>, %vc: tensor<?x16x8x128xbf16>,
                  %b: tensor<?xi32>, %p: tensor<?xi32>, %ip: tensor<?xi32>, %ix: tensor<?xi32>)
    -> (tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>) {
  %k1, %v1 = attn.append_kv %k, %v into %kc, %vc format(#attn.bsr<block_cols = 16>)
      indices(%b, %p, %ip, %ix : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x8x128xbf16> into tensor<?x16x8x128xbf16>
  return %k1, %v1 : tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
}

// -----

// copy_indices: a grid-strided loop over the words of all pairs, one a
// thread per step; the first pair whose running end passes the word copies
// it (at the word less the pairs before), the others are else branches, and
// a word past every end copies nothing. Negative counts count as 0.
// CHECK-LABEL: gpu.func @attn_copy_indices_n2
// CHECK-NOT: attn.tile
// CHECK-COUNT-2: arith.maxsi
// CHECK: %[[GRID:.*]] = gpu.grid_dim x
// CHECK: %[[STEP:.*]] = arith.muli %[[GRID]], %{{.*}} : index
// CHECK: scf.for %[[W:.*]] = %{{.*}} to %{{.*}} step %[[STEP]]
// CHECK: %[[IN0:.*]] = arith.cmpi slt, %[[W]], %[[END0:.*]] : index
// CHECK: scf.if %[[IN0]]
// CHECK: %[[V0:.*]] = memref.load %{{.*}}[%[[AT0:.*]]] : memref<1099511627776xi32, #gpu.address_space<global>>
// CHECK: memref.store %[[V0]], %{{.*}}[%[[AT0]]]
// CHECK: } else {
// CHECK: arith.cmpi slt, %[[W]], %{{.*}} : index
// CHECK: scf.if
// CHECK: arith.subi %[[W]], %[[END0]] : index
// CHECK: memref.load
// CHECK: memref.store
// CHECK-NOT: memref.store
// CHECK: gpu.return
func.func @copy(%s0: tensor<?xi32>, %s1: tensor<?xi32>, %d0: tensor<?xi32>, %d1: tensor<?xi32>)
    -> (tensor<?xi32>, tensor<?xi32>) {
  %c0, %c1 = attn.copy_indices %s0, %s1 into %d0, %d1
      : tensor<?xi32>, tensor<?xi32> into tensor<?xi32>, tensor<?xi32>
  return %c0, %c1 : tensor<?xi32>, tensor<?xi32>
}

// -----

// copy_by_table: the CTA's first threads copy the table (2 rows x 3 words)
// into shared memory, the CTA meets, and the loop of copy_indices runs over
// the rows' counts (negative ones as 0) up to their sum or num_rows,
// whichever is less; each row's addresses are raw pointers, read and
// written with LLVM's load and store.
// CHECK-LABEL: gpu.func @attn_copy_by_table_n2
// CHECK-NOT: attn.tile
// CHECK: %[[SMEM:.*]] = gpu.dynamic_shared_memory
// CHECK: %[[TABLE:.*]] = memref.view %[[SMEM]]{{.*}} to memref<6xi64, #gpu.address_space<workgroup>>
// CHECK: scf.if
// CHECK: memref.load {{.*}} : memref<1099511627776xi64, #gpu.address_space<global>>
// CHECK: memref.store {{.*}}, %[[TABLE]]
// CHECK: gpu.barrier
// CHECK-COUNT-4: llvm.inttoptr {{.*}} : i64 to !llvm.ptr<1>
// CHECK-COUNT-2: arith.maxsi
// CHECK: %[[LAST:.*]] = arith.minsi
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[LAST]] step
// CHECK: llvm.getelementptr {{.*}} -> !llvm.ptr<1>, i32
// CHECK: %[[V:.*]] = llvm.load {{.*}} : !llvm.ptr<1> -> i32
// CHECK: llvm.store %[[V]]
// CHECK: } else {
// CHECK: llvm.load
// CHECK: llvm.store
// CHECK: gpu.return
func.func @copy_by_table(%t: memref<?xi64>) {
  attn.copy_by_table %t {rows = 2} : memref<?xi64>
  return
}
