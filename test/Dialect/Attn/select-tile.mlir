// RUN: attn-opt %s -split-input-file --attn-select-tile | FileCheck %s
// RUN: attn-opt %s -split-input-file --attn-select-tile=chip=sm_86 | FileCheck %s --check-prefix=SM86
// RUN: attn-opt %s -split-input-file --attn-select-tile=chip=sm_90a | FileCheck %s --check-prefix=SM90A
// RUN: attn-opt %s -split-input-file --attn-select-tile=candidates=true | FileCheck %s --check-prefix=CAND
// RUN: not attn-opt %s -split-input-file --attn-select-tile=chip=sm_75 2>&1 | FileCheck %s --check-prefix=BADCHIP

// BADCHIP: unknown chip 'sm_75' (attn generates kernels for sm_80, sm_86,

// Decode, GQA 32/8: one row per request, 4 heads packed -> a 16-row tile;
// 3 warps, each with its own 2-stage pipeline of 16-token KV tiles, 4 CTAs
// per SM (2 fit the shared memory of an sm_86 SM).
// CHECK-LABEL: func.func @decode
// CHECK: tile = #attn.tile<q = 16, kv = 16, warps = 3, ctas_per_sm = 4>
// SM86-LABEL: func.func @decode
// SM86: tile = #attn.tile<q = 16, kv = 16, warps = 3, ctas_per_sm = 2>
// CAND-LABEL: func.func @decode
// CAND: tile_candidates = [#attn.tile<q = 16, kv = 16, warps = 3, ctas_per_sm = 4>, #attn.tile<q = 64, kv = 64, warps = 4, ctas_per_sm = 2>, #attn.tile<q = 128, kv = 64, warps = 8>]
func.func @decode(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

// Long prefill: a 128-row tile, 8 warps.
// CHECK-LABEL: func.func @prefill
// CHECK: tile = #attn.tile<q = 128, kv = 64, warps = 8>
// On wgmma (sm_90a) the 128-row tile takes 32 KB K/V tiles, and three
// stages where they fit (the pipelined K/V loop).
// SM90A-LABEL: func.func @prefill
// SM90A: tile = #attn.tile<q = 128, kv = 128, warps = 8, stages = 3>
func.func @prefill(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = 2048, block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

// Static shapes win over block_rows: 64 rows over 16 requests is 4 rows
// each; with 4 heads packed, 16 rows.
// CHECK-LABEL: func.func @static_append
// CHECK: tile = #attn.tile<q = 16, kv = 16, warps = 3, ctas_per_sm = 4>
func.func @static_append(%q: tensor<64x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %qo: tensor<17xi32>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = 4096, block_cols = 16>)
      indices(%qo, %i, %i, %i : tensor<17xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<64x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<64x32x128xbf16>, tensor<64x32xf32>
  return
}

// -----

// Head dim 256 halves the KV tile (mma.sync); wgmma's two stages take the
// most keys that fit beside the Q tile.
// CHECK-LABEL: func.func @d256
// CHECK: tile = #attn.tile<q = 128, kv = 32, warps = 8>
// SM90A-LABEL: func.func @d256
// SM90A: tile = #attn.tile<q = 128, kv = 80, warps = 8>
func.func @d256(%q: tensor<?x8x256xbf16>, %k: tensor<?x8x256xbf16>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = 4096, block_cols = 1, indexing = ragged>)
      indices(%i, %i : tensor<?xi32>, tensor<?xi32>)
      : tensor<?x8x256xbf16>, tensor<?x8x256xbf16>, tensor<?x8x256xbf16> -> tensor<?x8x256xbf16>, tensor<?x8xf32>
  return
}

// -----

// An existing tile is kept.
// CHECK-LABEL: func.func @kept
// CHECK: tile = #attn.tile<q = 64, kv = 32, warps = 4>
func.func @kept(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      {tile = #attn.tile<q = 64, kv = 32, warps = 4>}
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

// Query lengths that vary by batch (`block_rows = ?`): every query tile is a
// candidate, for the planner to pick from per batch.
// CHECK-LABEL: func.func @varying
// CHECK: tile_candidates = [#attn.tile<q = 16, kv = 16, warps = 3, ctas_per_sm = 4>, #attn.tile<q = 64, kv = 64, warps = 4, ctas_per_sm = 2>, #attn.tile<q = 128, kv = 64, warps = 8>]
func.func @varying(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = ?, block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

// Head dims that are not a multiple of 64 (Phi-3's 96) pad shared-memory
// rows; the KV tile stays a power of two.
// CHECK-LABEL: func.func @d96
// CHECK: tile = #attn.tile<q = 128, kv = 64, warps = 8>
// Head dim 96 is not whole 128-byte blocks: mma.sync, its tile.
// SM90A-LABEL: func.func @d96
// SM90A: tile = #attn.tile<q = 128, kv = 64, warps = 8>
func.func @d96(%q: tensor<?x32x96xbf16>, %k: tensor<?x3x8x96xbf16>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = 512, block_cols = 3>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x32x96xbf16>, tensor<?x3x8x96xbf16>, tensor<?x3x8x96xbf16> -> tensor<?x32x96xbf16>, tensor<?x32xf32>
  return
}
