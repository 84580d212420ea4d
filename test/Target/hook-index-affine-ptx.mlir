// A custom hook may compute with any side-effect-free op of the dialects the
// compiler loads, index and affine included: attn-lower-to-nvvm keeps the
// passes that lower them (lower-affine, convert-index-to-llvm), though no
// built-in variant needs either. The hook's (k_pos * 6 + 1) * 1e-6 reaches
// the PTX (0f358637BD is 1e-6).
// RUN: attn-compile %s --chip=sm_90a --candidate=0 --emit=ptx --output-dir=%t | FileCheck %s
// RUN: FileCheck %s --input-file=%t/attn_kernels.ptx --check-prefix=PTX
// CHECK: wrote {{.*}}attn_kernels.ptx
// PTX: .entry attn_{{[a-z0-9_]+}}_index_affine(
// PTX: mul.rn.f32 {{.*}}, 0f358637BD;

attn.variant @index_affine() {
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    %i = index.casts %k_pos : i32 to index
    %j = index.add %i, %i
    %a = affine.apply affine_map<(d0) -> (d0 * 3 + 1)>(%j)
    %k = index.casts %a : index to i32
    %f = arith.sitofp %k : i32 to f32
    %e = arith.constant 1.0e-6 : f32
    %g = arith.mulf %f, %e : f32
    %r = arith.addf %s, %g : f32
    attn.yield %r : f32
  }
}

func.func @attention(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>,
                     %qo_indptr: tensor<?xi32>, %kv_indptr: tensor<?xi32>, %sm_scale: f32)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = ?, block_cols = 1, layout = NHD, indexing = ragged>)
      indices(%qo_indptr, %kv_indptr : tensor<?xi32>, tensor<?xi32>)
      sm_scale(%sm_scale)
      variants [@index_affine]
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
