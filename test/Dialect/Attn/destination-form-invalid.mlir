// RUN: attn-opt %s -split-input-file -verify-diagnostics
// Verifier errors of the destination form.

func.func @mixed(%q: memref<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %i: memref<?xi32>, %o: memref<?x32x128xbf16>, %lse: memref<?x32xf32>) {
  // expected-error @+1 {{key cache is a tensor but the query is a memref: the operands are all tensors (value form) or all memrefs (destination form)}}
  attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %i, %i, %i : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
      : memref<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
  return
}

// -----

func.func @mixed_index(%q: memref<?x32x128xbf16>, %k: memref<?x16x8x128xbf16>, %v: memref<?x16x8x128xbf16>,
    %i: memref<?xi32>, %t: tensor<?xi32>, %o: memref<?x32x128xbf16>, %lse: memref<?x32xf32>) {
  // expected-error @+1 {{index array is a tensor but the query is a memref}}
  attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %t, %i, %i : memref<?xi32>, tensor<?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
      : memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>
  return
}

// -----

func.func @no_outs(%q: memref<?x32x128xbf16>, %k: memref<?x16x8x128xbf16>, %v: memref<?x16x8x128xbf16>,
    %i: memref<?xi32>) {
  // expected-error @+1 {{on memrefs needs destinations: outs(%output, %lse : memref<...>, memref<...>)}}
  attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %i, %i, %i : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
      : memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>
  return
}

// -----

func.func @tensor_outs_memref(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %i: tensor<?xi32>, %o: memref<?x32x128xbf16>, %lse: memref<?x32xf32>) {
  // expected-error @+1 {{destination is a memref but the query is a tensor}}
  %r:2 = attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @wrong_output(%q: memref<?x32x128xbf16>, %k: memref<?x16x8x128xbf16>, %v: memref<?x16x8x128xbf16>,
    %i: memref<?xi32>, %o: memref<?x32x64xbf16>, %lse: memref<?x32xf32>) {
  // expected-error @+1 {{output type 'memref<?x32x64xbf16>' must equal the query type 'memref<?x32x128xbf16>'}}
  attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %i, %i, %i : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x32x64xbf16>, memref<?x32xf32>)
      : memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>
  return
}

// -----

func.func @wrong_lse(%q: memref<?x32x128xbf16>, %k: memref<?x16x8x128xbf16>, %v: memref<?x16x8x128xbf16>,
    %i: memref<?xi32>, %o: memref<?x32x128xbf16>, %lse: memref<?x8xf32>) {
  // expected-error @+1 {{lse must be [rows, qo_heads] = [?, 32] of f32, got 'memref<?x8xf32>'}}
  attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %i, %i, %i : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
      outs(%o, %lse : memref<?x32x128xbf16>, memref<?x8xf32>)
      : memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>
  return
}

// -----

func.func @result_not_outs(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
    %i: tensor<?xi32>, %o: tensor<4x32x128xbf16>, %lse: tensor<4x32xf32>) {
  // expected-error @+1 {{result #0 'tensor<?x32x128xbf16>' must have the type of its destination 'tensor<4x32x128xbf16>'}}
  %r:2 = attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      outs(%o, %lse : tensor<4x32x128xbf16>, tensor<4x32xf32>)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return
}

// -----

func.func @one_out(%o0: memref<?x32x128xf32>, %l0: memref<?x32xf32>, %o: memref<?x32x128xf32>) {
  // expected-error @+1 {{takes two destinations, outs(%output, %lse), got 1}}
  attn.merge_states %o0, %o0 lse %l0, %l0 outs(%o : memref<?x32x128xf32>)
      : memref<?x32x128xf32>, memref<?x32xf32>
  return
}

// -----

func.func @merge_mixed(%o0: memref<?x32x128xf32>, %l0: tensor<?x32xf32>, %o: memref<?x32x128xf32>, %l: memref<?x32xf32>) {
  // expected-error @+1 {{LSE is a tensor but the first state is a memref}}
  attn.merge_states %o0, %o0 lse %l0, %l0 outs(%o, %l : memref<?x32x128xf32>, memref<?x32xf32>)
      : memref<?x32x128xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @merge_wrong_out(%o0: memref<?x32x128xf32>, %l0: memref<?x32xf32>, %o: memref<?x32x64xf32>, %l: memref<?x32xf32>) {
  // expected-error @+1 {{merged output 'memref<?x32x64xf32>' must have the shape of the partial outputs 'memref<?x32x128xf32>'}}
  attn.merge_states %o0, %o0 lse %l0, %l0 outs(%o, %l : memref<?x32x64xf32>, memref<?x32xf32>)
      : memref<?x32x128xf32>, memref<?x32xf32>
  return
}

// -----

func.func @append_mixed(%kn: memref<?x8x128xbf16>, %vn: memref<?x8x128xbf16>,
    %kc: tensor<?x16x8x128xbf16>, %vc: tensor<?x16x8x128xbf16>, %i: memref<?xi32>) {
  // expected-error @+1 {{key cache is a tensor but the key is a memref}}
  %r:2 = attn.append_kv %kn, %vn into %kc, %vc format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
      : memref<?x8x128xbf16> into tensor<?x16x8x128xbf16>
  return
}
