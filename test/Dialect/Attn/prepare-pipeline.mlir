// RUN: attn-opt %s --attn-prepare-pipeline | FileCheck %s
// RUN: attn-opt %s --attn-prepare-pipeline="chip=sm_80 candidates=true" | FileCheck %s --check-prefix=CAND

// The whole preparation: built-ins expanded, the cascade split in two,
// each half tiled for its own query length and GQA-packed: the 64-row
// prefix block packs 2 heads into a 128-row tile, decode packs all 4.
// CHECK: attn.variant @causal
// CHECK-LABEL: func.func @shared_prefix_decode
// CHECK: attn.attention {{.*}} format(#attn.bsr<block_rows = 64, block_cols = 16>) {{.*}} {tile = #attn.tile<q = 128, kv = 64, warps = 8, gqa_pack = 2>}
// CHECK: attn.attention {{.*}} format(#attn.bsr<block_cols = 16>) {{.*}} {tile = #attn.tile<q = 16, kv = 16, warps = 3, gqa_pack = 4, ctas_per_sm = 4>}
// CHECK: attn.merge_states
// CAND: tile_candidates = [#attn.tile<q = 16, kv = 16, warps = 3, ctas_per_sm = 3>, #attn.tile<q = 64, kv = 64, warps = 4, ctas_per_sm = 2>, #attn.tile<q = 128, kv = 64, warps = 8, gqa_pack = 2>]
// CAND: tile_candidates = [#attn.tile<q = 16, kv = 16, warps = 3, gqa_pack = 4, ctas_per_sm = 3>, #attn.tile<q = 64, kv = 64, warps = 4, gqa_pack = 4, ctas_per_sm = 2>, #attn.tile<q = 128, kv = 64, warps = 8, gqa_pack = 4>]
func.func @shared_prefix_decode(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %a0: tensor<?xi32>, %a1: tensor<?xi32>, %a2: tensor<?xi32>, %a3: tensor<?xi32>,
    %b0: tensor<?xi32>, %b1: tensor<?xi32>, %b2: tensor<?xi32>, %b3: tensor<?xi32>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.composed<[#attn.bsr<block_rows = 64, block_cols = 16>, #attn.bsr<block_rows = 1, block_cols = 16>]>)
      indices(%a0, %a1, %a2, %a3, %b0, %b1, %b2, %b3 : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>,
              tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@causal]
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
