// RUN: attn-opt %s -split-input-file --attn-pack-gqa | FileCheck %s

// Decode with GQA group 8 fills 8 rows of a 16-row tile.
// CHECK-LABEL: func.func @decode_group8
// CHECK: tile = #attn.tile<q = 16, kv = 64, warps = 4, gqa_pack = 8>
func.func @decode_group8(%q: tensor<?x64x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      {tile = #attn.tile<q = 16, kv = 64, warps = 4>}
      : tensor<?x64x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x64x128xbf16>, tensor<?x64xf32>
  return
}

// -----

// Speculative decode with 4 rows per request: 4 x 4 heads = 16 rows.
// CHECK-LABEL: func.func @verify4
// CHECK: tile = #attn.tile<q = 16, kv = 64, warps = 4, gqa_pack = 4>
// CHECK-SAME: tile_candidates = [#attn.tile<q = 16, kv = 64, warps = 4, gqa_pack = 4>, #attn.tile<q = 64, kv = 64, warps = 4, gqa_pack = 8>]
func.func @verify4(%q: tensor<?x64x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = 4, block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      {tile = #attn.tile<q = 16, kv = 64, warps = 4>,
       tile_candidates = [#attn.tile<q = 16, kv = 64, warps = 4>, #attn.tile<q = 64, kv = 64, warps = 4>]}
      : tensor<?x64x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x64x128xbf16>, tensor<?x64xf32>
  return
}

// -----

// Prefill rows fill the tile on their own: nothing packs.
// CHECK-LABEL: func.func @prefill
// CHECK: tile = #attn.tile<q = 128, kv = 64, warps = 8>}
func.func @prefill(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = 1024, block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      {tile = #attn.tile<q = 128, kv = 64, warps = 8>}
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

// MHA: one query head per KV head, nothing to pack.
// CHECK-LABEL: func.func @mha
// CHECK: tile = #attn.tile<q = 16, kv = 64, warps = 4>}
func.func @mha(%q: tensor<?x8x128xbf16>, %k: tensor<?x16x8x128xbf16>, %i: tensor<?xi32>) {
  %o, %lse = attn.attention %q, %k, %k format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      {tile = #attn.tile<q = 16, kv = 64, warps = 4>}
      : tensor<?x8x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16> -> tensor<?x8x128xbf16>, tensor<?x8xf32>
  return
}
