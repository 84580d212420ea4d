// RUN: attn-opt %s --attn-outline-kernels --convert-attn-to-gpu -split-input-file -verify-diagnostics | FileCheck %s

// Speculative token-tree verification: the column-vector BSR form (1-token
// pages, explicit kv_indices, no last-page length) with a bit-packed custom mask and a sliding
// window. The prefill kernel takes custom_mask (i8) and mask_indptr after the
// page table, reads request b's byte offset from mask_indptr, and ANDs one
// mask bit per (row, key) with the window's mask on every tile: each row's
// bytes under the thread's keys are loaded once a tile (NT + 1 of them, each
// index clamped to the row's last byte), and a score tests its bit in the pair
// of bytes that holds it.

// CHECK-LABEL: func.func @tree_verify
// CHECK: attn.kernels = [@attn_kernels::@[[K:attn_prefill_bf16_d128_h32x8_p1_nhd_q128_kv64_s2_k1_c1_sliding_window_mask]]]
// CHECK: gpu.func @[[K]](
// CHECK-SAME: {attn.name = "kv_last_len"}
// CHECK-SAME: %[[MASK:arg[0-9]+]]: memref<{{[0-9]+}}xi8, #gpu.address_space<global>> {attn.name = "custom_mask"}
// CHECK-SAME: %[[MASKPTR:arg[0-9]+]]: memref<{{[0-9]+}}xi32, #gpu.address_space<global>> {attn.name = "mask_indptr"}
// CHECK-SAME: %{{.*}}: f32 {attn.name = "sm_scale"}
// CHECK-SAME: %{{.*}}: i32 {attn.name = "window_left", attn.param_type = i32}
// CHECK: nvvm.mma.sync
// CHECK: memref.load %[[MASKPTR]][%{{.*}}] : memref<{{[0-9]+}}xi32, #gpu.address_space<global>>
// Each row's mask bytes (64 keys: 8 n-tiles, 9 bytes; no more loads for the
// tile's 64 scores), paired, then the window's mask and each score's bit.
// CHECK: memref.load %[[MASK]][%{{.*}}] : memref<{{[0-9]+}}xi8, #gpu.address_space<global>>
// CHECK-NEXT: arith.extui %{{.*}} : i8 to i32
// CHECK-COUNT-8: memref.load %[[MASK]]
// CHECK: arith.shli
// CHECK: arith.ori
// CHECK-COUNT-9: memref.load %[[MASK]]
// CHECK-NOT: memref.load %[[MASK]]
// CHECK: arith.cmpi sge
// CHECK: arith.andi
// CHECK: arith.cmpi ne
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
func.func @tree_verify(%q: tensor<?x32x128xbf16>, %k: tensor<?x1x8x128xbf16>, %v: tensor<?x1x8x128xbf16>,
    %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %kvi: tensor<?xi32>,
    %mask: tensor<?xi8>, %w: i32) -> tensor<?x32x128xbf16> {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 16, block_cols = 1>)
      indices(%qo, %kvp, %kvi : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      mask(%mask : tensor<?xi8>)
      variants [@sliding_window] params(%w : i32)
      {tile = #attn.tile<q = 128, kv = 64, warps = 8, stages = 2, gqa_pack = 1>}
      : tensor<?x32x128xbf16>, tensor<?x1x8x128xbf16>, tensor<?x1x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o : tensor<?x32x128xbf16>
}

// -----

// The decode kernel (tile q = 16) reads the mask the same way. (The tile is
// the user's: one CTA per SM.)

// CHECK-LABEL: func.func @tree_decode_tile
// CHECK: attn.kernels = [@attn_kernels::@[[K:attn_decode_bf16_d128_h32x8_p1_nhd_k4_w3_s2_c1_mask]]]
// CHECK: gpu.func @[[K]](
// CHECK-SAME: %[[MASK:arg[0-9]+]]: memref<{{[0-9]+}}xi8, #gpu.address_space<global>> {attn.name = "custom_mask"}
// CHECK-SAME: %[[MASKPTR:arg[0-9]+]]: memref<{{[0-9]+}}xi32, #gpu.address_space<global>> {attn.name = "mask_indptr"}
// CHECK: memref.load %[[MASKPTR]]
// CHECK: memref.load %[[MASK]]
// CHECK: arith.shli
func.func @tree_decode_tile(%q: tensor<?x32x128xbf16>, %k: tensor<?x1x8x128xbf16>, %v: tensor<?x1x8x128xbf16>,
    %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %kvi: tensor<?xi32>,
    %mask: tensor<?xi8>) -> tensor<?x32x128xbf16> {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 1, block_cols = 1>)
      indices(%qo, %kvp, %kvi : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      mask(%mask : tensor<?xi8>)
      {tile = #attn.tile<q = 16, kv = 16, warps = 3, stages = 2, gqa_pack = 4>}
      : tensor<?x32x128xbf16>, tensor<?x1x8x128xbf16>, tensor<?x1x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o : tensor<?x32x128xbf16>
}

// -----

func.func @unpacked_mask(%q: tensor<?x32x128xbf16>, %k: tensor<?x1x8x128xbf16>, %v: tensor<?x1x8x128xbf16>,
    %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %kvi: tensor<?xi32>,
    %mask: tensor<?xi1>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{has an unpacked (i1) custom mask; the generated kernels read it bit-packed: pack it into i8}}
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 16, block_cols = 1>)
      indices(%qo, %kvp, %kvi : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      mask(%mask : tensor<?xi1>)
      {tile = #attn.tile<q = 128, kv = 64, warps = 8, stages = 2, gqa_pack = 1>}
      : tensor<?x32x128xbf16>, tensor<?x1x8x128xbf16>, tensor<?x1x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o : tensor<?x32x128xbf16>
}
