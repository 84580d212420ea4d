// The whole compiler on a variant with an output transform: the merge kernel
// carries the hook (its own name, page table and parameter), both kernels
// assemble with ptxas, and the manifest gives the merge's launch shape
// (one CTA per merge unit row), its programmatic dependent launch and its
// extra arguments.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: attn-compile %s --chip=sm_90 --emit=cubin --output-dir=%t
// RUN: FileCheck %s --input-file=%t/attn_kernels.ptx --check-prefix=PTX
// RUN: FileCheck %s --input-file=%t/attn_kernels.json --check-prefix=MANIFEST

// PTX-LABEL: .entry attn_merge_bf16_d128_h32x8_p16_affine_tanh(
// PTX-COUNT-3: .param .u64
// PTX: .param .u32
// PTX-COUNT-5: .param .u64
// PTX: .param .f32
// PTX: .maxntid 256, 1, 1
// PTX: %nctaid.x
// PTX: griddepcontrol.wait;
// PTX: ex2.approx
// PTX-LABEL: .entry attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_affine_tanh(
// PTX: griddepcontrol.launch_dependents;

// MANIFEST: "name": "gain"
// MANIFEST: "merge_ctas": "unit_rows"
// MANIFEST-NEXT: "merge_rows_per_cta": 1
// MANIFEST-NEXT: "name": "attn_merge_bf16_d128_h32x8_p16_affine_tanh"
// MANIFEST: "output_transform": true
// MANIFEST-NEXT: "pdl": 1
// MANIFEST: "role": "merge"
// MANIFEST: "merge_kernel": "attn_merge_bf16_d128_h32x8_p16_affine_tanh"
// MANIFEST: "name": "attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_affine_tanh"

attn.variant @affine_tanh(gain : f32) {
  attn.hook output_transform(%o : f32, %dim : i32, %q_pos : i32, %head : i32) {
    %g = attn.param "gain" : f32
    %x = arith.mulf %o, %g : f32
    %t = math.tanh %x : f32
    attn.yield %t : f32
  }
}

func.func @decode(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>,
    %v: tensor<?x16x8x128xbf16>, %qo: tensor<?xi32>, %kvp: tensor<?xi32>, %kvi: tensor<?xi32>,
    %last: tensor<?xi32>, %gain: f32) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%qo, %kvp, %kvi, %last : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@affine_tanh] params(%gain : f32)
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
