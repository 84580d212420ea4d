// RUN: attn-opt %s --attn-to-nvvm-pipeline="chip=sm_90" | FileCheck %s

// The whole compiler in one pipeline: the built-in variant expanded, the
// tile chosen, the kernels outlined in the tile-level form, lowered for the
// chip and then to LLVM/NVVM.
// CHECK: attn.attention {{.*}} {attn.kernels = [@attn_kernels::@attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_causal]
// CHECK: gpu.module @attn_kernels [#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">]
// CHECK-DAG: llvm.func @attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_causal({{.*}}) attributes {{{.*}}gpu.kernel, {{.*}}nvvm.kernel
// CHECK-DAG: llvm.func @attn_merge_bf16_d128(

// The registered pipelines pick the chip's PTX version when no features are
// given, and refuse a chip and PTX version that NVPTX would abort the process
// on when it serializes the module, naming the rule.

// RUN: attn-opt %s --attn-to-nvvm-pipeline="chip=sm_120a" | FileCheck %s --check-prefix=SM120
// SM120: gpu.module @attn_kernels [#nvvm.target<O = 3, chip = "sm_120a", features = "+ptx87">]

// RUN: attn-opt %s --attn-to-nvvm-pipeline="chip=sm_100a" | FileCheck %s --check-prefix=SM100
// SM100: gpu.module @attn_kernels [#nvvm.target<O = 3, chip = "sm_100a", features = "+ptx86">]

// RUN: not attn-opt %s --attn-to-nvvm-pipeline="chip=sm_120a features=+ptx80" 2>&1 | FileCheck %s --check-prefix=OLD
// OLD: error: attn-to-nvvm-pipeline: sm_120a needs PTX ISA 8.7 or newer (+ptx87), got +ptx80

// RUN: not attn-opt %s --attn-to-nvvm-pipeline="chip=sm_42" 2>&1 | FileCheck %s --check-prefix=CHIP
// CHIP: error: attn-to-nvvm-pipeline: unknown chip 'sm_42' (attn generates kernels for sm_80,

// RUN: not attn-opt %s --attn-lower-to-nvvm="chip=sm_100a features=+ptx80" 2>&1 | FileCheck %s --check-prefix=LOWER
// LOWER: error: attn-lower-to-nvvm: sm_100a needs PTX ISA 8.6 or newer (+ptx86), got +ptx80

// RUN: not attn-opt %s --attn-lower-to-nvvm="chip=sm_90a features=+avx" 2>&1 | FileCheck %s --check-prefix=FEATURE
// FEATURE: error: attn-lower-to-nvvm: unsupported feature '+avx' (expected +ptxNN)

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
