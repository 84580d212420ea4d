func.func @attention(%q: tensor<?x32x128xbf16>, %k: tensor<?x3x8x128xbf16>, %v: tensor<?x3x8x128xbf16>, %qo_indptr: tensor<?xi32>, %kv_indptr: tensor<?xi32>, %kv_indices: tensor<?xi32>, %kv_last_len: tensor<?xi32>, %sm_scale: f32) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = ?, block_cols = 3, layout = NHD>)
      indices(%qo_indptr, %kv_indptr, %kv_indices, %kv_last_len : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      sm_scale(%sm_scale)
      variants [@causal]
      : tensor<?x32x128xbf16>, tensor<?x3x8x128xbf16>, tensor<?x3x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
