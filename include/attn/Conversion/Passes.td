//===- Passes.td - attn conversion passes ------------------*- tablegen -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Conversions out of the attn dialect. `convert-attn-to-gpu` lowers the
// tile-level form of every kernel attn-outline-kernels wrote.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_PASSES_TD
#define ATTN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertAttnToGPUPass : Pass<"convert-attn-to-gpu", "::mlir::ModuleOp"> {
  let summary = "lower the tile-level form of every kernel for its chip";
  let description = [{
    Every `gpu.func` with an `attn.launch` contract (written by
    `attn-outline-kernels`) has its `attn.tile.*` ops lowered to gpu, nvgpu,
    nvvm, vector, scf, arith and memref ops by the pattern set of the
    contract's chip: on sm_80 and newer, mma.sync m16n8k16 tensor cores,
    ldmatrix fragment loads and 16-byte cp.async gathers into swizzled (or
    padded) shared-memory rings (lib/Conversion/AttnToGPU/MMASync). Each
    tile type becomes the values one thread holds of it; scf loops and
    branches that carry tile values are converted with it. The hook regions
    are inlined where the kernel computes each element. Attention kernels
    get the occupancy hint of their contract's `ctas_per_sm`.

    Before:
    ```mlir
    %s = attn.tile.qk %q, %kv : !attn.query<16x128xbf16>, !attn.kv_tile<16x128xbf16> -> !attn.scores<16x16>
    ```
    After:
    ```mlir
    %r = nvgpu.ldmatrix %tiles[%row, %col] {numTiles = 4 : i32, transpose = false} : ...
    %d = nvvm.mma.sync A[...] B[...] C[...] {shape = #nvvm.shape<m = 16, n = 8, k = 16>, ...}
    ```
  }];
  // The dialects the lowering builds are registered by the pass
  // (registerKernelDialects), so the list lives in one place.
}

#endif // ATTN_CONVERSION_PASSES_TD
