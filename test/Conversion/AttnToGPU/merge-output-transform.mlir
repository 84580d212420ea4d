// RUN: attn-opt %s --attn-outline-kernels="chip=sm_90" --convert-attn-to-gpu -split-input-file | FileCheck %s
// RUN: attn-opt %s --attn-outline-kernels="chip=sm_80" --convert-attn-to-gpu -split-input-file | FileCheck %s --check-prefix=SM80

// A variant with an output transform: split KV writes untransformed partial
// rows, so the transform must apply once, to the merged row. The merge
// kernel then carries the variant: its own name, the page table (the hook
// sees the query's position kv_len - qo_len + token) and the variant's
// parameters as trailing arguments named as in the attention kernel. It
// merges one (unit, row) per CTA, grid-strided, and on sm_90 first waits for
// the attention grid (griddepcontrol.wait), which in turn lets it launch
// early (griddepcontrol.launch_dependents in the epilogue).

attn.variant @affine_tanh(gain : f32) {
  attn.hook output_transform(%o : f32, %dim : i32, %q_pos : i32, %head : i32) {
    %g = attn.param "gain" : f32
    %x = arith.mulf %o, %g : f32
    %pf = arith.sitofp %q_pos : i32 to f32
    %y = arith.addf %x, %pf : f32
    %t = math.tanh %y : f32
    attn.yield %t : f32
  }
}

// CHECK-LABEL: func.func @decode_output_transform
// CHECK: attn.kernels = [@attn_kernels::@[[DECODE:attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c1_affine_tanh]]]
// CHECK: gpu.func @[[MERGE:attn_merge_bf16_d128_h32x8_p16_affine_tanh]](
// CHECK-SAME: {attn.name = "plan"}
// CHECK-SAME: {attn.name = "qo_indptr"}
// CHECK-SAME: %[[KVP:arg[0-9]+]]: memref<{{[0-9]+}}xi32, #gpu.address_space<global>> {attn.name = "kv_indptr"}
// CHECK-SAME: %[[LAST:arg[0-9]+]]: memref<{{[0-9]+}}xi32, #gpu.address_space<global>> {attn.name = "kv_last_len"}
// CHECK-SAME: %[[GAIN:arg[0-9]+]]: f32 {attn.name = "gain", attn.param_type = f32}
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK: gpu.grid_dim x
// One (row, unit) pair per iteration: row = v / units, unit = v % units.
// CHECK: scf.for
// CHECK: arith.divui
// CHECK: arith.remui
// The unit's fields (host-uploaded) are read before the wait for the
// attention grid's writes; only the partial slots come after it.
// CHECK: memref.load
// CHECK: nvvm.griddepcontrol wait
// CHECK: scf.if
// The online pass loads 8 slots per step.
// CHECK: scf.for
// CHECK-COUNT-8: vector.load {{.*}} : memref<{{[0-9]+}}xf32, #gpu.address_space<global>>, vector<8xf32>
// CHECK: gpu.barrier
// The parts combined and normalised, then the query position and the hook.
// CHECK: scf.for
// CHECK: arith.divf
// CHECK: memref.load %[[KVP]]
// CHECK: memref.load %[[LAST]]
// CHECK: arith.mulf %{{.*}}, %[[GAIN]] : f32
// CHECK: math.tanh
// CHECK-COUNT-7: math.tanh
// CHECK: arith.truncf {{.*}} : vector<8xf32> to vector<8xbf16>
// CHECK: math.log2
// CHECK: gpu.barrier

// CHECK: gpu.func @[[DECODE]](
// CHECK-SAME: {attn.name = "gain", attn.param_type = f32}
// CHECK-SAME: merge = @[[MERGE]]
// The epilogue lets a programmatic dependent (the merge) launch.
// CHECK: nvvm.griddepcontrol launch_dependents
// Direct items are transformed; split items store raw f32 partials.
// CHECK: math.tanh
// CHECK: vector.store {{.*}} : memref<{{[0-9]+}}xbf16, #gpu.address_space<global>>, vector<8xbf16>
// CHECK: } else {
// CHECK-NOT: math.tanh
// CHECK: vector.store {{.*}} : memref<{{[0-9]+}}xf32, #gpu.address_space<global>>, vector<8xf32>

// sm_80 has no griddepcontrol.
// SM80-LABEL: func.func @decode_output_transform
// SM80-NOT: griddepcontrol
func.func @decode_output_transform(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>,
    %v: tensor<?x16x8x128xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %kvi: tensor<?xi32>,
    %last: tensor<?xi32>, %gain: f32) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%qo, %kvp, %kvi, %last : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@affine_tanh] params(%gain : f32)
      {tile = #attn.tile<q = 16, kv = 16, warps = 3, stages = 2, gqa_pack = 4>}
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// Without an output transform the merge stays the generic one of its
// (head_dim, dtype): no page table, no parameters.
// CHECK-LABEL: func.func @decode_softcap
// CHECK: gpu.func @attn_merge_bf16_d128(
// CHECK-NOT: kv_indptr
// CHECK-SAME: {attn.name = "qo_indptr"})
// CHECK-NOT: math.tanh
// CHECK: gpu.return
func.func @decode_softcap(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>,
    %v: tensor<?x16x8x128xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %kvi: tensor<?xi32>,
    %last: tensor<?xi32>, %cap: f32) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%qo, %kvp, %kvi, %last : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@soft_cap] params(%cap : f32)
      {tile = #attn.tile<q = 16, kv = 16, warps = 3, stages = 2, gqa_pack = 4>}
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
