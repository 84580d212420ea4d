// The two merge-kernel shapes of one module, through the whole compiler and
// ptxas. Decode splits a 16-row tile into many chunks: its merge kernel gives
// one CTA a row and lets the CTA's parts share the row's slots (combined
// through shared memory, hence a barrier). Prefill splits a 128-row tile into
// a few chunks: its merge kernel gives each 16-thread part a row of its own
// (16 rows per CTA, no shared memory, no barrier). The manifest tells the
// runtime the launch shape of each.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: attn-compile %s --chip=sm_90 --emit=cubin --output-dir=%t
// RUN: FileCheck %s --input-file=%t/attn_kernels.ptx --check-prefix=PTX
// RUN: FileCheck %s --input-file=%t/attn_kernels.json --check-prefix=MANIFEST

// PTX-LABEL: .entry attn_merge_bf16_d128(
// PTX: griddepcontrol.wait;
// PTX: bar.sync
// PTX-LABEL: .entry attn_merge_bf16_d128_r16(
// PTX: griddepcontrol.wait;
// PTX-NOT: bar.sync
// PTX: ret;

// MANIFEST: "merge_ctas": "unit_rows"
// MANIFEST-NEXT: "merge_rows_per_cta": 1
// MANIFEST-NEXT: "name": "attn_merge_bf16_d128"
// MANIFEST: "merge_ctas": "unit_rows"
// MANIFEST-NEXT: "merge_rows_per_cta": 16
// MANIFEST-NEXT: "name": "attn_merge_bf16_d128_r16"

!q = tensor<?x32x128xbf16>
!cache = tensor<?x16x8x128xbf16>
!lse = tensor<?x32xf32>
!idx = tensor<?xi32>

func.func @decode(%q: !q, %k: !cache, %v: !cache, %qo: !idx, %kp: !idx, %ki: !idx, %kl: !idx)
    -> (!q, !lse) {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : !idx, !idx, !idx, !idx)
      variants [@causal] : !q, !cache, !cache -> !q, !lse
  return %o, %lse : !q, !lse
}

func.func @prefill(%q: !q, %k: !cache, %v: !cache, %qo: !idx, %kp: !idx, %ki: !idx, %kl: !idx)
    -> (!q, !lse) {
  %o, %lse = attn.attention %q, %k, %v
      format(#attn.bsr<block_rows = 2048, block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : !idx, !idx, !idx, !idx)
      variants [@causal] : !q, !cache, !cache -> !q, !lse
  return %o, %lse : !q, !lse
}
