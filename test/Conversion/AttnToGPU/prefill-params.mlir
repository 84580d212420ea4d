// RUN: attn-opt %s --attn-outline-kernels --convert-attn-to-gpu -split-input-file | FileCheck %s

// Variant parameters of the prefill kernel follow the ABI decode uses
// (KernelSignature.h): a memref<?xf32> table (@sinks) is a flat f32 buffer
// argument that the cloned hook's memref.load reads, in the epilogue, on the
// first chunk of a tile only (flag bit 1), joining the denominator in base-2
// units (sink * log2 e).

// CHECK-LABEL: func.func @prefill_sinks
// CHECK: attn.kernels = [@attn_kernels::@[[K:attn_prefill_bf16_d128_h32x8_p16_nhd_q128_kv64_s2_k1_c1_causal_sinks]]]
// CHECK: gpu.module @attn_kernels
// CHECK: gpu.func @[[K]](
// CHECK-SAME: %{{.*}}: f32 {attn.name = "sm_scale"}
// CHECK-SAME: %[[SINKS:arg[0-9]+]]: memref<{{[0-9]+}}xf32, #gpu.address_space<global>> {attn.name = "sinks", attn.param_type = memref<?xf32>})
// The epilogue: the first-chunk flag, the sink of the row's head, in log2 units.
// CHECK: %[[FLAG:.*]] = arith.andi %{{.*}}, %c1_i32
// CHECK: %[[FIRST:.*]] = arith.cmpi ne, %[[FLAG]]
// CHECK: %[[S:.*]] = memref.load %[[SINKS]][%{{.*}}] : memref<{{[0-9]+}}xf32, #gpu.address_space<global>>
// CHECK: %[[S2:.*]] = arith.mulf %[[S]], %cst{{.*}} : f32
// CHECK: %[[M:.*]] = arith.maximumf %{{.*}}, %[[S2]] : f32
// CHECK: arith.select %[[FIRST]], %[[M]], %{{.*}} : f32
func.func @prefill_sinks(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %kvi: tensor<?xi32>, %last: tensor<?xi32>,
    %sinks: memref<?xf32>) -> tensor<?x32x128xbf16> {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 512, block_cols = 16>)
      indices(%qo, %kvp, %kvi, %last : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@causal, @sinks] params(%sinks : memref<?xf32>)
      {tile = #attn.tile<q = 128, kv = 64, warps = 8, stages = 2, gqa_pack = 1>}
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o : tensor<?x32x128xbf16>
}

// -----

// Ragged prefill with sinks and Llama-3.1 RoPE: every parameter in order,
// scalars then the table.

// CHECK-LABEL: func.func @ragged_rope_llama31_sinks
// CHECK: attn.kernels = [@attn_kernels::@[[K:attn_prefill_bf16_d128_h32x8_ragged_nhd_q128_kv64_s2_k1_c1_rope_llama31_causal_sinks]]]
// CHECK: gpu.func @[[K]](
// CHECK-SAME: f32 {attn.name = "rope_scale", attn.param_type = f32}
// CHECK-SAME: f32 {attn.name = "rope_theta", attn.param_type = f32}
// CHECK-SAME: f32 {attn.name = "rope_factor", attn.param_type = f32}
// CHECK-SAME: f32 {attn.name = "low_freq_factor", attn.param_type = f32}
// CHECK-SAME: f32 {attn.name = "high_freq_factor", attn.param_type = f32}
// CHECK-SAME: f32 {attn.name = "original_context", attn.param_type = f32}
// CHECK-SAME: memref<{{[0-9]+}}xf32, #gpu.address_space<global>> {attn.name = "sinks", attn.param_type = memref<?xf32>})
func.func @ragged_rope_llama31_sinks(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>,
    %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %a: f32, %b: f32, %c: f32, %d: f32, %e: f32, %f: f32,
    %sinks: memref<?xf32>) -> tensor<?x32x128xbf16> {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 128, block_cols = 1, layout = NHD, indexing = ragged>)
      indices(%qo, %kvp : tensor<?xi32>, tensor<?xi32>)
      variants [@rope_llama31, @causal, @sinks]
      params(%a, %b, %c, %d, %e, %f, %sinks : f32, f32, f32, f32, f32, f32, memref<?xf32>)
      {tile = #attn.tile<q = 128, kv = 64, warps = 8, stages = 2, gqa_pack = 1>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o : tensor<?x32x128xbf16>
}

// -----

// An i1 parameter travels as i32 and is rebuilt (arg != 0) at the kernel's
// start; a parameter name an earlier variant already used is qualified with
// its variant's name, as in decode.

attn.variant @gate(cap : f32, on : i1) {
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    %on = attn.param "on" : i1
    %cap = attn.param "cap" : f32
    %x = arith.minimumf %s, %cap : f32
    %r = arith.select %on, %x, %s : f32
    attn.yield %r : f32
  }
}

// CHECK-LABEL: func.func @prefill_bool_and_qualified
// CHECK: gpu.func @attn_prefill_bf16_d128_h32x8_p16_nhd_q128_kv64_s2_k1_c1_soft_cap_gate(
// CHECK-SAME: %{{.*}}: f32 {attn.name = "cap", attn.param_type = f32}
// CHECK-SAME: %{{.*}}: f32 {attn.name = "gate_cap", attn.param_type = f32}
// CHECK-SAME: %[[ON:arg[0-9]+]]: i32 {attn.name = "on", attn.param_type = i1})
// CHECK-SAME: {
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[B:.*]] = arith.cmpi ne, %[[ON]], %[[ZERO]] : i32
// CHECK: arith.select %[[B]]
func.func @prefill_bool_and_qualified(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>,
    %v: tensor<?x16x8x128xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %kvi: tensor<?xi32>,
    %last: tensor<?xi32>, %c0: f32, %c1: f32, %on: i1) -> tensor<?x32x128xbf16> {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 512, block_cols = 16>)
      indices(%qo, %kvp, %kvi, %last : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@soft_cap, @gate] params(%c0, %c1, %on : f32, f32, i1)
      {tile = #attn.tile<q = 128, kv = 64, warps = 8, stages = 2, gqa_pack = 1>}
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o : tensor<?x32x128xbf16>
}
