// RUN: attn-opt %s --convert-attn-to-gpu -split-input-file -verify-diagnostics | FileCheck %s

// Decode (q = 16) with causal + sliding window + soft-cap: the persistent
// split-KV decode kernel on the work-list ABI, the variants' hooks inlined in
// application order (masks, then the logits transform), their parameters as
// trailing kernel arguments named as the parameters; one merge kernel.

// CHECK-LABEL: func.func @decode_causal_window_softcap
// CHECK: attn.attention
// CHECK-SAME: attn.kernel = @attn_kernels::@[[DECODE:attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_causal_sliding_window_soft_cap]]
// CHECK-SAME: attn.merge_kernel = @attn_kernels::@[[MERGE:attn_merge_bf16_d128]]
// CHECK: gpu.module @attn_kernels
// CHECK: gpu.func @[[DECODE]](
// CHECK-SAME: {attn.name = "cta_indptr"}
// CHECK-SAME: {attn.name = "work_items"}
// CHECK-SAME: {attn.name = "partial_o"}
// CHECK-SAME: {attn.name = "partial_lse"}
// CHECK-SAME: %{{.*}}: i32 {attn.name = "slot_rows"}
// CHECK-SAME: memref<{{[0-9]+}}xbf16, #gpu.address_space<global>> {attn.name = "q"}
// CHECK-SAME: {attn.name = "kv_last_len"}
// CHECK-SAME: %{{.*}}: f32 {attn.name = "sm_scale"}
// CHECK-SAME: %[[W:arg[0-9]+]]: i32 {attn.name = "window_left", attn.param_type = i32}
// CHECK-SAME: %[[CAP:arg[0-9]+]]: f32 {attn.name = "cap", attn.param_type = f32}
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 96, 1, 1>, nvvm.minctasm = 4 : i32}
// The persistent loop over this CTA's work items.
// CHECK: gpu.block_id x
// CHECK: scf.for
// CHECK: nvgpu.device_async_copy {{.*}} {bypassL1}
// CHECK: nvvm.mma.sync
// @causal's mask, @sliding_window's mask reading its parameter, then
// @soft_cap's transform reading its own.
// CHECK: arith.cmpi sle, %{{.*}}, %{{.*}} : i32
// CHECK: arith.subi %{{.*}}, %[[W]] : i32
// CHECK: arith.cmpi sge, %{{.*}}, %{{.*}} : i32
// CHECK: arith.divf %{{.*}}, %[[CAP]] : f32
// CHECK: math.tanh
// CHECK: math.exp2
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK: gpu.barrier
// CHECK: gpu.func @[[MERGE]](
// CHECK-SAME: {attn.name = "plan"}
// CHECK-SAME: {attn.name = "merge_indptr"}
// CHECK-SAME: {attn.name = "merge_units"}
// CHECK-SAME: kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// CHECK: gpu.grid_dim x
// CHECK: math.log2
func.func @decode_causal_window_softcap(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>,
    %v: tensor<?x16x8x128xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %kvi: tensor<?xi32>,
    %last: tensor<?xi32>, %w: i32, %cap: f32) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%qo, %kvp, %kvi, %last : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@causal, @sliding_window, @soft_cap] params(%w, %cap : i32, f32)
      {tile = #attn.tile<q = 16, kv = 16, warps = 3, stages = 2, gqa_pack = 4>}
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// Identical attentions share one kernel; a table parameter (sinks) becomes a
// bare f32 buffer the cloned memref.load reads; f16 HND gets its own merge.

// CHECK-LABEL: func.func @dedupe_and_sinks
// CHECK: attn.kernel = @attn_kernels::@[[K:attn_decode_f16_d64_h8x2_p1_hnd_k4_w3_s2_sinks]]
// CHECK: attn.kernel = @attn_kernels::@[[K]]
// CHECK: gpu.module @attn_kernels
// CHECK-COUNT-1: gpu.func @attn_decode_
// CHECK-SAME: %[[SINKS:arg[0-9]+]]: memref<{{[0-9]+}}xf32, #gpu.address_space<global>> {attn.name = "sinks", attn.param_type = memref<?xf32>}
// CHECK: memref.load %[[SINKS]][%{{.*}}] : memref<{{[0-9]+}}xf32, #gpu.address_space<global>>
// CHECK: gpu.func @attn_merge_f16_d64(
// CHECK-NOT: gpu.func
func.func @dedupe_and_sinks(%q: tensor<?x8x64xf16>, %k: tensor<?x2x1x64xf16>, %v: tensor<?x2x1x64xf16>,
    %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %kvi: tensor<?xi32>, %sinks: memref<?xf32>)
    -> (tensor<?x8x64xf16>, tensor<?x8x64xf16>) {
  %o0, %l0 = attn.attention %q, %k, %v
      format(#attn.bsr<block_cols = 1, layout = HND>)
      indices(%qo, %kvp, %kvi : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@sinks] params(%sinks : memref<?xf32>)
      {tile = #attn.tile<q = 16, kv = 16, warps = 3, stages = 2, gqa_pack = 4>}
      : tensor<?x8x64xf16>, tensor<?x2x1x64xf16>, tensor<?x2x1x64xf16>
      -> tensor<?x8x64xf16>, tensor<?x8xf32>
  %o1, %l1 = attn.attention %q, %k, %v
      format(#attn.bsr<block_cols = 1, layout = HND>)
      indices(%qo, %kvp, %kvi : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@sinks] params(%sinks : memref<?xf32>)
      {tile = #attn.tile<q = 16, kv = 16, warps = 3, stages = 2, gqa_pack = 4>}
      : tensor<?x8x64xf16>, tensor<?x2x1x64xf16>, tensor<?x2x1x64xf16>
      -> tensor<?x8x64xf16>, tensor<?x8xf32>
  return %o0, %o1 : tensor<?x8x64xf16>, tensor<?x8x64xf16>
}

// -----

// Attentions without a tile are left alone (attn-prepare-pipeline tiles them).

// CHECK-LABEL: func.func @untiled
// CHECK-NOT: attn.kernel
// CHECK-NOT: gpu.module
func.func @untiled(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %kvi: tensor<?xi32>, %last: tensor<?xi32>)
    -> tensor<?x32x128xbf16> {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_cols = 16>)
      indices(%qo, %kvp, %kvi, %last : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o : tensor<?x32x128xbf16>
}

// -----

func.func @composed(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %a0: tensor<?xi32>, %a1: tensor<?xi32>, %a2: tensor<?xi32>, %a3: tensor<?xi32>,
    %b0: tensor<?xi32>, %b1: tensor<?xi32>, %b2: tensor<?xi32>, %b3: tensor<?xi32>)
    -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{has a composed format; run attn-decompose-composed before convert-attn-to-gpu}}
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.composed<[#attn.bsr<block_rows = 64, block_cols = 16>, #attn.bsr<block_rows = 1, block_cols = 16>]>)
      indices(%a0, %a1, %a2, %a3, %b0, %b1, %b2, %b3 : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>,
              tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      {tile = #attn.tile<q = 16, kv = 16, warps = 3, stages = 2, gqa_pack = 4>}
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o : tensor<?x32x128xbf16>
}

// -----

// Larger tiles go to the prefill generator, with a merge kernel of its own shape.

// CHECK-LABEL: func.func @prefill_tile
// CHECK: attn.kernel = @attn_kernels::@attn_prefill_{{.*}}_causal
// CHECK-SAME: attn.merge_kernel = @attn_kernels::@attn_merge_bf16_d128_r16
// CHECK: gpu.func @attn_prefill_
// Prefill splits tall tiles into a few chunks: its merge kernel gives each
// part (16 threads of a row) a row of its own, so there is no cross-part
// combine and no barrier.
// CHECK: gpu.func @attn_merge_bf16_d128_r16(
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
func.func @prefill_tile(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %kvi: tensor<?xi32>, %last: tensor<?xi32>)
    -> tensor<?x32x128xbf16> {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 512, block_cols = 16>)
      indices(%qo, %kvp, %kvi, %last : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@causal]
      {tile = #attn.tile<q = 128, kv = 64, warps = 8, stages = 2, gqa_pack = 1>}
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o : tensor<?x32x128xbf16>
}
