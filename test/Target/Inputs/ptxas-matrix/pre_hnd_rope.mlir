func.func @attention(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x16x128xbf16>, %v: tensor<?x8x16x128xbf16>, %qo_indptr: tensor<?xi32>, %kv_indptr: tensor<?xi32>, %kv_indices: tensor<?xi32>, %kv_last_len: tensor<?xi32>, %sm_scale: f32, %p0: f32, %p1: f32)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = ?, block_cols = 16, layout = HND>)
      indices(%qo_indptr, %kv_indptr, %kv_indices, %kv_last_len : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      sm_scale(%sm_scale)
      variants [@rope, @causal]
      params(%p0, %p1 : f32, f32)
      : tensor<?x32x128xbf16>, tensor<?x8x16x128xbf16>, tensor<?x8x16x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
