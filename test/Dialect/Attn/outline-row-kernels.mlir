// RUN: attn-opt %s -split-input-file --attn-outline-kernels | FileCheck %s
// RUN: attn-opt %s -split-input-file --attn-outline-kernels | attn-opt -split-input-file | FileCheck %s

// attn.merge_states in host code: a row kernel of role merge_states, its
// head count and strides arguments; 256 threads, 16 threads a row at head
// dim 128, so 16 rows per CTA at a time; a grid of 32 CTAs per SM (more than
// fit at once: the hardware starts one as another finishes).
// CHECK-LABEL: func.func @merge_two
// CHECK: attn.merge_states {{.*}}attn.kernels = [@attn_kernels::@attn_merge_states_bf16_d128_n2]
// CHECK: gpu.func @attn_merge_states_bf16_d128_n2(%{{.*}}: i32 {attn.name = "num_rows"}, %{{.*}}: i32 {attn.name = "heads"}, {{.*}}{attn.name = "v0"}, {{.*}}{attn.name = "v1"}, %{{.*}}: i64 {attn.name = "v_stride"}, {{.*}}{attn.name = "s0"}, {{.*}}{attn.name = "s1"}, %{{.*}}: i64 {attn.name = "s_stride"}, {{.*}}{attn.name = "o"}, %{{.*}}: i64 {attn.name = "o_stride"}, {{.*}}{attn.name = "lse"}, %{{.*}}: i64 {attn.name = "lse_stride"})
// CHECK-SAME: attn.launch = #attn.launch<role = merge_states, chip = "sm_90", threads = 256, ctas_per_sm = 32, dtype = bf16, head_dim = 128, num_qo_heads = 0, num_kv_heads = 0, merge_rows = 32>
// CHECK: attn.tile.merge_states %{{.*}}, %{{.*}} states(%{{.*}}, %{{.*}} : {{.*}}) stride %{{.*}} lses(%{{.*}}, %{{.*}} : {{.*}}) stride %{{.*}} into %{{.*}} : {{.*}} stride %{{.*}}, %{{.*}} : {{.*}} stride %{{.*}}
// CHECK-NOT: mask
// CHECK: gpu.return
func.func @merge_two(%v0: tensor<?x32x128xbf16>, %v1: tensor<?x32x128xbf16>, %s0: tensor<?x32xf32>, %s1: tensor<?x32xf32>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.merge_states %v0, %v1 lse %s0, %s1
      : tensor<?x32x128xbf16>, tensor<?x32xf32> -> tensor<?x32x128xbf16>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// Three f32 states with a mask (merge_state_in_place's): its own kernel, the
// mask its last argument; head dim 64 puts 32 rows in a CTA step. Two
// identical merges share one kernel.
// CHECK-LABEL: func.func @merge_masked
// CHECK-COUNT-2: attn.kernels = [@attn_kernels::@attn_merge_states_f32_d64_n3_masked]
// CHECK: gpu.func @attn_merge_states_f32_d64_n3_masked({{.*}}{attn.name = "v2"}{{.*}}{attn.name = "s2"}{{.*}}, %{{.*}}: memref<1099511627776xi8, #gpu.address_space<global>> {attn.name = "mask"})
// CHECK-SAME: role = merge_states, {{.*}}dtype = f32, head_dim = 64, {{.*}}merge_rows = 64>
// CHECK: attn.tile.merge_states {{.*}} mask(%{{.*}} : memref<1099511627776xi8, #gpu.address_space<global>>)
// CHECK-NOT: gpu.func
func.func @merge_masked(%v: tensor<?x4x64xf32>, %s: tensor<?x4xf32>, %m: tensor<?xi8>)
    -> (tensor<?x4x64xf32>, tensor<?x4x64xf32>) {
  %o, %lse = attn.merge_states %v, %v, %v lse %s, %s, %s mask %m
      : tensor<?x4x64xf32>, tensor<?x4xf32>, tensor<?xi8> -> tensor<?x4x64xf32>
  %o2, %lse2 = attn.merge_states %v, %v, %v lse %s, %s, %s mask %m
      : tensor<?x4x64xf32>, tensor<?x4xf32>, tensor<?xi8> -> tensor<?x4x64xf32>
  return %o, %o2 : tensor<?x4x64xf32>, tensor<?x4x64xf32>
}

// -----

// attn.append_kv: one kernel per element type, head dim and page size (the
// layout and the cache strides are arguments); the contract keeps the
// format for its page size.
// CHECK-LABEL: func.func @append
// CHECK: attn.append_kv {{.*}}attn.kernels = [@attn_kernels::@attn_append_kv_f16_d96_p3]
// CHECK: gpu.func @attn_append_kv_f16_d96_p3(%{{.*}}: i32 {attn.name = "num_rows"}, %{{.*}}: i32 {attn.name = "heads"}, %{{.*}}: i32 {attn.name = "batch"}, %{{.*}}: i32 {attn.name = "num_pages"}, {{.*}}{attn.name = "key"}, {{.*}}{attn.name = "value"}, %{{.*}}: i64 {attn.name = "key_stride"}, %{{.*}}: i64 {attn.name = "value_stride"}, {{.*}}{attn.name = "batch_indices"}, {{.*}}{attn.name = "positions"}, {{.*}}{attn.name = "kv_indptr"}, {{.*}}{attn.name = "kv_indices"}, {{.*}}{attn.name = "k_cache"}, {{.*}}{attn.name = "v_cache"}, %{{.*}}: i64 {attn.name = "page_stride"}, %{{.*}}: i64 {attn.name = "slot_stride"}, %{{.*}}: i64 {attn.name = "head_stride"}, %{{.*}}: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "dropped"})
// CHECK-SAME: attn.launch = #attn.launch<role = append_kv, chip = "sm_90", threads = 256, ctas_per_sm = 32, dtype = f16, head_dim = 96, num_qo_heads = 0, num_kv_heads = 0, format = <block_cols = 3, layout = HND>, merge_rows = 42>
// CHECK: attn.tile.append_kv {{.*}} tokens({{.*}}) stride({{.*}}) at({{.*}}) into({{.*}}) stride({{.*}}) dropped
func.func @append(%k: tensor<?x2x96xf16>, %v: tensor<?x2x96xf16>, %kc: tensor<?x2x3x96xf16>, %vc: tensor<?x2x3x96xf16>,
                  %b: tensor<?xi32>, %p: tensor<?xi32>, %ip: tensor<?xi32>, %ix: tensor<?xi32>)
    -> (tensor<?x2x3x96xf16>, tensor<?x2x3x96xf16>) {
  %k1, %v1 = attn.append_kv %k, %v into %kc, %vc format(#attn.bsr<block_cols = 3, layout = HND>)
      indices(%b, %p, %ip, %ix : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x2x96xf16> into tensor<?x2x3x96xf16>
  return %k1, %v1 : tensor<?x2x3x96xf16>, tensor<?x2x3x96xf16>
}


// -----

// attn.copy_indices: one kernel per number of arrays; rows are words (dtype
// i32, head_dim 1), a word a thread per CTA step, so merge_rows is the
// thread count. Each pair's length is an argument (n<i>), the words of all
// pairs the launch's num_rows.
// CHECK-LABEL: func.func @copy_two
// CHECK: attn.copy_indices {{.*}}attn.kernels = [@attn_kernels::@attn_copy_indices_n2]
// CHECK: gpu.func @attn_copy_indices_n2(%{{.*}}: i32 {attn.name = "num_rows"}, %{{.*}}: i32 {attn.name = "n0"}, %{{.*}}: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "src0"}, %{{.*}}: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "dst0"}, %{{.*}}: i32 {attn.name = "n1"}, {{.*}}{attn.name = "src1"}, {{.*}}{attn.name = "dst1"})
// CHECK-SAME: attn.launch = #attn.launch<role = copy_indices, chip = "sm_90", threads = 256, ctas_per_sm = 32, dtype = i32, head_dim = 1, num_qo_heads = 0, num_kv_heads = 0, merge_rows = 256>
// CHECK: attn.tile.copy_indices %{{.*}} counts(%{{.*}}, %{{.*}} : i32, i32) from(%{{.*}}, %{{.*}} : {{.*}}) into(%{{.*}}, %{{.*}} : {{.*}})
// CHECK: gpu.return
func.func @copy_two(%s0: tensor<?xi32>, %s1: tensor<?xi32>, %d0: tensor<?xi32>, %d1: tensor<?xi32>)
    -> (tensor<?xi32>, tensor<?xi32>) {
  %c0, %c1 = attn.copy_indices %s0, %s1 into %d0, %d1
      : tensor<?xi32>, tensor<?xi32> into tensor<?xi32>, tensor<?xi32>
  return %c0, %c1 : tensor<?xi32>, tensor<?xi32>
}

// -----

// attn.copy_by_table: the copy_indices contract (words, 256 threads) with
// the table's rows in dynamic shared memory (3 x 8 bytes a row), and two
// arguments: num_rows (the capacity the launch covers) and the table.
// CHECK-LABEL: func.func @copy_by_table
// CHECK: attn.copy_by_table {{.*}}attn.kernels = [@attn_kernels::@attn_copy_by_table_n10]
// CHECK: gpu.func @attn_copy_by_table_n10(%{{.*}}: i32 {attn.name = "num_rows"}, %{{.*}}: memref<1099511627776xi64, #gpu.address_space<global>> {attn.name = "table"})
// CHECK-SAME: attn.launch = #attn.launch<role = copy_indices, chip = "sm_90", threads = 256, shared_bytes = 240, ctas_per_sm = 32, dtype = i32, head_dim = 1, num_qo_heads = 0, num_kv_heads = 0, merge_rows = 256>
// CHECK: attn.tile.copy_by_table %{{.*}} table(%{{.*}} : {{.*}}) {rows = 10 : i64}
// CHECK: gpu.return
func.func @copy_by_table(%t: memref<?xi64>) {
  attn.copy_by_table %t {rows = 10} : memref<?xi64>
  return
}
