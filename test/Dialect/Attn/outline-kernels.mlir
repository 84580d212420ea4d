// RUN: attn-opt %s -split-input-file --attn-prepare-pipeline --attn-outline-kernels | FileCheck %s
// RUN: attn-opt %s -split-input-file --attn-prepare-pipeline --attn-outline-kernels | attn-opt -split-input-file | FileCheck %s

// Decode with @causal and @soft_cap: one attention kernel (a 16-row decode
// tile) and its merge kernel, each with its launch contract; the body is the
// tile-level form: the work loop, the visible key range (causal's band: keys
// up to the query's position), the K/V pipeline inside an scf.if for items
// with keys, and the store. The soft-cap is a logits_transform region bound
// to the `cap` argument, its `s / cap` a product with 1 / cap (the same for
// every logit: one division per kernel after CSE); the causal mask a
// logits_mask region.
// CHECK-LABEL: func.func @decode
// CHECK: attn.attention {{.*}}attn.kernels = [@attn_kernels::@attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_causal_soft_cap]
// CHECK: gpu.module @attn_kernels
// CHECK: gpu.func @attn_merge_bf16_d128({{.*}}{attn.name = "plan"}
// CHECK-SAME: kernel attributes {attn.launch = #attn.launch<role = merge, chip = "sm_90", threads = 256, shared_bytes = 10240, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, pdl = true>
// CHECK: attn.tile.merge
// CHECK: gpu.func @attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_causal_soft_cap(
// CHECK-SAME: {attn.name = "cta_indptr"}
// CHECK-SAME: {attn.name = "kv_last_len"}
// CHECK-SAME: %[[SCALE:arg[0-9]+]]: f32 {attn.name = "sm_scale"}, %[[CAP:arg[0-9]+]]: f32 {attn.name = "cap", attn.param_type = f32})
// CHECK-SAME: attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, shared_bytes = 49536, ctas_per_sm = 4, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = <q = 16, kv = 16, warps = 3, gqa_pack = 4, ctas_per_sm = 4>, format = <block_cols = 16>, cost_per_item = 128, min_chunk = 512, band = <upper = 0>, merge = @attn_merge_bf16_d128, variants = ["causal", "soft_cap"]>
// CHECK-SAME: known_block_size = array<i32: 96, 1, 1>
// CHECK: attn.tile.work_loop
// CHECK: ^bb0(%[[ITEM:arg[0-9]+]]: !attn.item):
// CHECK: %[[RANGE:[0-9]+]] = attn.tile.kv_range %[[ITEM]] {upper = 0 : i64} : !attn.kv_range<16>
// CHECK: %[[N:[0-9]+]] = attn.tile.kv_tile_count %[[RANGE]]
// CHECK: scf.if
// CHECK: %[[PIPE:[0-9]+]] = attn.tile.kv_prologue %[[RANGE]], %[[ITEM]]
// CHECK: %[[Q:[0-9]+]] = attn.tile.load_query %[[ITEM]]
// CHECK: scf.for {{.*}} to %[[N]]
// CHECK: attn.tile.kv_next
// CHECK: attn.tile.qk %[[Q]]
// CHECK: attn.tile.online_softmax {{.*}} scale(%[[SCALE]]) {band_covers_mask}
// CHECK: logits_transform {
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT: %[[INV:.*]] = arith.divf %[[ONE]], %[[CAP]] : f32
// CHECK-NEXT: %[[X:.*]] = arith.mulf %{{.*}}, %[[INV]] : f32
// CHECK-NEXT: math.tanh %[[X]]
// CHECK: } logits_mask {
// CHECK: arith.cmpi sle
// CHECK: attn.tile.pv
// CHECK: attn.tile.kv_drain
// CHECK: attn.tile.store
func.func @decode(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>, %cap: f32) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@causal, @soft_cap] params(%cap : f32)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// Prefill whose query lengths vary by batch: one kernel per candidate tile,
// in candidate order, each with the merge kernel of its shape (decode splits
// share a row, taller tiles merge a row per part). A sliding window bounds
// the keys from below by its run-time parameter.
// CHECK-LABEL: func.func @prefill
// CHECK: attn.kernels = [@attn_kernels::@attn_decode_bf16_d128_h32x8_ragged_nhd_k4_w3_s2_c4_causal_sliding_window, @attn_kernels::@attn_prefill_bf16_d128_h32x8_ragged_nhd_q64_kv64_s2_k4_c2_causal_sliding_window, @attn_kernels::@attn_prefill_bf16_d128_h32x8_ragged_nhd_q128_kv64_s2_k4_c1_causal_sliding_window]
// CHECK: gpu.func @attn_merge_bf16_d128(
// CHECK: gpu.func @attn_decode_bf16_d128_h32x8_ragged_nhd_k4_w3_s2_c4_causal_sliding_window(
// CHECK-SAME: %[[W:arg[0-9]+]]: i32 {attn.name = "window_left", attn.param_type = i32}
// CHECK-SAME: band = <upper = 0, lower_param = "window_left">
// CHECK: attn.tile.kv_range %{{.*}} lower(%[[W]]) {upper = 0 : i64}
// CHECK: gpu.func @attn_merge_bf16_d128_r16(
// CHECK: gpu.func @attn_prefill_bf16_d128_h32x8_ragged_nhd_q64_kv64_s2_k4_c2_causal_sliding_window(
// CHECK-SAME: threads = 128, shared_bytes = 81920, ctas_per_sm = 2
// CHECK-SAME: merge = @attn_merge_bf16_d128_r16
// CHECK: gpu.func @attn_prefill_bf16_d128_h32x8_ragged_nhd_q128_kv64_s2_k4_c1_causal_sliding_window(
// CHECK-SAME: threads = 256, shared_bytes = 98304
// CHECK-NOT: kv_last_len
func.func @prefill(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>, %i: tensor<?xi32>, %w: i32) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = ?, block_cols = 1, indexing = ragged>)
      indices(%i, %i : tensor<?xi32>, tensor<?xi32>)
      variants [@causal, @sliding_window] params(%w : i32)
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// A custom mask: the kernel takes the bit-packed mask and its offsets, the
// softmax reads them, and tiles inside the band no longer skip the mask.
// CHECK-LABEL: func.func @tree
// CHECK: gpu.func @attn_decode_bf16_d128_h32x8_p1_nhd_k4_w3_s2_c4_mask(
// CHECK-SAME: {attn.name = "custom_mask"}
// CHECK-SAME: {attn.name = "mask_indptr"}
// CHECK-SAME: custom_mask = true
// CHECK: attn.tile.online_softmax {{.*}} custom_mask(
// CHECK-NOT: band_covers_mask
func.func @tree(%q: tensor<?x32x128xbf16>, %k: tensor<?x1x8x128xbf16>, %i: tensor<?xi32>, %m: tensor<?xi8>) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = 1, block_cols = 1>)
      indices(%i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>) mask(%m : tensor<?xi8>)
      : tensor<?x32x128xbf16>, tensor<?x1x8x128xbf16>, tensor<?x1x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// Sinks and an output transform: the store gets the sink region (a read of
// the per-head table argument); the merge kernel of an output transform is
// specific to the variants and applies the transform to merged rows.
// CHECK-LABEL: func.func @sinks
// CHECK: gpu.func @attn_merge_bf16_d128_h32x8_p16_sinks_halve(
// CHECK-SAME: {attn.name = "kv_indptr"}
// CHECK-SAME: {attn.name = "kv_last_len"}
// CHECK-SAME: output_transform = true
// CHECK: attn.tile.merge {{.*}} positions(
// CHECK: output_transform {
// CHECK: gpu.func @attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_sinks_halve(
// CHECK-SAME: %[[SINKS:arg[0-9]+]]: memref<{{[0-9]+}}xf32, #gpu.address_space<global>> {attn.name = "sinks", attn.param_type = memref<?xf32>}
// CHECK: attn.tile.store {{.*}} sink {
// CHECK: memref.load %[[SINKS]]
// CHECK: } output_transform {
attn.variant @halve {
  attn.hook output_transform(%o : f32, %dim : i32, %q_pos : i32, %head : i32) {
    %h = arith.constant 0.5 : f32
    %r = arith.mulf %o, %h : f32
    attn.yield %r : f32
  }
}
func.func @sinks(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>, %s: memref<?xf32>) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@sinks, @halve] params(%s : memref<?xf32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// -----

// Strided ragged K/V (strided = true): the kernels are named `strided`, take
// the token and head strides after kv_indptr, and hand them to the K/V
// pipeline as rows(stride ...); a dense ragged kernel takes neither.
// CHECK-LABEL: func.func @strided
// CHECK: gpu.func @attn_prefill_bf16_d128_h32x8_ragged_strided_q128_
// CHECK-SAME: {attn.name = "kv_indptr"}, %[[TS:arg[0-9]+]]: i64 {attn.name = "kv_token_stride"}, %[[HS:arg[0-9]+]]: i64 {attn.name = "kv_head_stride"}
// CHECK: attn.tile.kv_prologue {{.*}} rows(stride %[[TS]], %[[HS]])
// CHECK: attn.tile.kv_next {{.*}} rows(stride %[[TS]], %[[HS]])
// CHECK-NOT: kv_token_stride
func.func @strided(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %i: tensor<?xi32>) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = ?, block_cols = 1, indexing = ragged, strided = true>)
      indices(%i, %i : tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
