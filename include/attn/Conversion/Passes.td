//===- Passes.td - attn conversion passes ------------------*- tablegen -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Conversions out of the attn dialect. `convert-attn-to-gpu` generates the
// device kernels of every tiled attention into one gpu.module.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_PASSES_TD
#define ATTN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertAttnToGPUPass : Pass<"convert-attn-to-gpu", "::mlir::ModuleOp"> {
  let summary = "generate the GPU kernels of every tiled attn.attention";
  let description = [{
    For every `attn.attention` that carries a `tile` (run
    `attn-prepare-pipeline` first), builds a kernel spec from the op (dtype,
    heads, head dim, the BSR view's indexing, page size and layout, the tile's
    q / kv / warps / stages / gqa_pack, and its variants) and generates the
    kernel into `gpu.module @attn_kernels` with the variants' hooks inlined:

    * decode tiles (`q = 16`): the persistent split-KV decode kernel;
    * larger tiles: the persistent prefill kernel;
    * one LSE merge kernel per (head_dim, dtype), shared by all attentions.

    Identical specs share one kernel. The attention op records the symbols
    it launches in `attn.kernel` and `attn.merge_kernel`; the variants'
    runtime parameters become kernel arguments named as the parameters (the
    manifest's `variant_params`). The module becomes a
    `gpu.container_module`. Composed formats must be decomposed first, and
    custom masks are not supported yet.

    Before:
    ```mlir
    %o, %lse = attn.attention %q, %k, %v
        format(#attn.bsr<block_cols = 16>)
        indices(%qo, %kvp, %kvi, %last : ...)
        variants [@causal, @soft_cap] params(%cap : f32)
        {tile = #attn.tile<q = 16, kv = 16, warps = 3, gqa_pack = 4>} : ...
    ```
    After:
    ```mlir
    %o, %lse = attn.attention ... {
        attn.kernel = @attn_kernels::@attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_causal_soft_cap,
        attn.merge_kernel = @attn_kernels::@attn_merge_bf16_d128, tile = ...} : ...
    gpu.module @attn_kernels {
      gpu.func @attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_causal_soft_cap(
          ..., %cap: f32 {attn.name = "cap"}) kernel { ... math.tanh ... }
      gpu.func @attn_merge_bf16_d128(...) kernel { ... }
    }
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"\"sm_90\"",
           "the target GPU (sm_80 ... sm_90a)">,
    Option<"gpuModuleName", "gpu-module", "std::string",
           /*default=*/"\"attn_kernels\"",
           "the gpu.module the kernels go into">,
  ];
  // The dialects the generated kernels use are registered by the pass
  // (attn::registerKernelGenDialects), so the list lives in one place.
}

#endif // ATTN_CONVERSION_PASSES_TD
