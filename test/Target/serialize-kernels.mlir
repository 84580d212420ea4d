// REQUIRES: ptxas
// RUN: attn-opt %s --attn-prepare-pipeline="chip=sm_90a" --attn-outline-kernels="chip=sm_90a" --attn-serialize-kernels="chip=sm_90a" | FileCheck %s --check-prefix=BIN
// RUN: attn-opt %s --attn-prepare-pipeline="chip=sm_90a" --attn-outline-kernels="chip=sm_90a" --attn-serialize-kernels="chip=sm_90a format=isa" | FileCheck %s --check-prefix=ISA
// RUN: not attn-opt %s --attn-serialize-kernels="format=elf" 2>&1 | FileCheck %s --check-prefix=BADFORMAT

// The outlined gpu.module becomes a gpu.binary of the same name: a cubin
// (or PTX) and the manifest, with ptxas' resources; the host function keeps
// its op and the op its kernel symbols.

// BIN-NOT: gpu.module
// BIN: attn.attention {{.*}}attn.kernels = [@attn_kernels::@attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_causal]
// BIN: gpu.binary @attn_kernels{{ +}}{attn.manifest = "{\22arch\22:\22sm_90a\22,\22attn_manifest_version\22:1,{{.*}}\22name\22:\22attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_causal\22{{.*}}\22resources\22:{{.*}}"}
// BIN-SAME: [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "\7FELF
// BIN-NOT: gpu.module

// ISA: gpu.binary @attn_kernels{{ +}}{attn.manifest = "{{.*}}"} [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, assembly = "{{.*}}.target sm_90a{{.*}}.entry attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_causal(

// BADFORMAT: attn-serialize-kernels: format must be bin or isa, got 'elf'
func.func @decode(%q: tensor<?x32x128xbf16>, %k: tensor<?x16x8x128xbf16>, %v: tensor<?x16x8x128xbf16>,
                  %qo: tensor<?xi32>, %kp: tensor<?xi32>, %ki: tensor<?xi32>, %kl: tensor<?xi32>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
      indices(%qo, %kp, %ki, %kl : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
      variants [@causal]
      : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
      -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}
