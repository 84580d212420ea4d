func.func @attention(%q: tensor<?x32x256xbf16>, %k: tensor<?x8x256xbf16>, %v: tensor<?x8x256xbf16>, %qo_indptr: tensor<?xi32>, %kv_indptr: tensor<?xi32>, %sm_scale: f32) -> (tensor<?x32x256xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = ?, block_cols = 1, layout = NHD, indexing = ragged>)
      indices(%qo_indptr, %kv_indptr : tensor<?xi32>, tensor<?xi32>)
      sm_scale(%sm_scale)
      variants [@causal]
      : tensor<?x32x256xbf16>, tensor<?x8x256xbf16>, tensor<?x8x256xbf16> -> tensor<?x32x256xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x256xbf16>, tensor<?x32xf32>
}
