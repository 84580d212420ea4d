// RUN: attn-opt %s -split-input-file --attn-outline-kernels -verify-diagnostics

// What the row kernels cannot take is an error naming it, never a guess.
func.func @merge_narrowing(%v: tensor<?x4x64xf32>, %s: tensor<?x4xf32>) -> tensor<?x4x64xbf16> {
  // expected-error@+1 {{merges 'f32' states into 'bf16'; the generated merge_states kernel writes the states' element type (merge, then convert)}}
  %o, %lse = attn.merge_states %v, %v lse %s, %s : tensor<?x4x64xf32>, tensor<?x4xf32> -> tensor<?x4x64xbf16>
  return %o : tensor<?x4x64xbf16>
}

// -----

func.func @merge_dynamic_dim(%v: tensor<?x4x?xbf16>, %s: tensor<?x4xf32>) -> tensor<?x4x?xbf16> {
  // expected-error@+1 {{needs a static head dim to generate its kernel, got 'tensor<?x4x?xbf16>'}}
  %o, %lse = attn.merge_states %v, %v lse %s, %s : tensor<?x4x?xbf16>, tensor<?x4xf32> -> tensor<?x4x?xbf16>
  return %o : tensor<?x4x?xbf16>
}

// -----

func.func @merge_d40(%v: tensor<?x4x40xbf16>, %s: tensor<?x4xf32>) -> tensor<?x4x40xbf16> {
  // expected-error@+1 {{head dim 40 is not supported: kernels take a multiple of 16 in [16, 256]}}
  %o, %lse = attn.merge_states %v, %v lse %s, %s : tensor<?x4x40xbf16>, tensor<?x4xf32> -> tensor<?x4x40xbf16>
  return %o : tensor<?x4x40xbf16>
}

// -----

func.func @append_d72(%k: tensor<?x2x72xbf16>, %kc: tensor<?x16x2x72xbf16>, %i: tensor<?xi32>) -> tensor<?x16x2x72xbf16> {
  // expected-error@+1 {{head dim 72 is not supported: kernels take a multiple of 16 in [16, 256]}}
  %k1, %v1 = attn.append_kv %k, %k into %kc, %kc format(#attn.bsr<block_cols = 16>)
      indices(%i, %i, %i, %i : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      : tensor<?x2x72xbf16> into tensor<?x16x2x72xbf16>
  return %k1 : tensor<?x16x2x72xbf16>
}
