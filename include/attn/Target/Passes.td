//===- Passes.td - attn passes that embed kernels in a program -*- tablegen -*-===//
//
// Kernel serialization inside a pass pipeline and the lowering of the host
// functions' attn ops to the runtime's C ABI (docs/Embedding.md, "From one
// module to a running program").
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_TARGET_PASSES_TD
#define ATTN_TARGET_PASSES_TD

include "mlir/Pass/PassBase.td"

def AttnSerializeKernelsPass
    : Pass<"attn-serialize-kernels", "::mlir::ModuleOp"> {
  let summary = "outlined kernels to a gpu.binary with their manifest";
  let description = [{
    Every `gpu.module` of kernels in the tile-level form (after
    `attn-outline-kernels`) is compiled exactly as `attn-compile` compiles
    it (convert-attn-to-gpu, attn-lower-to-nvvm, NVPTX, ptxas:
    `attn::compileOutlinedKernels`) and replaced by a `gpu.binary` of the
    same name holding the cubin (or the PTX, `format=isa`) and, as the
    `attn.manifest` string, the manifest the runtime loads it with
    (docs/Manifest.md, with ptxas' resources). `attn-lower-host-calls`
    embeds both in the program.

    Before:
    ```mlir
    gpu.module @attn_kernels {
      gpu.func @attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4(...) kernel
          attributes {attn.launch = #attn.launch<...>} { ... }
    }
    ```
    After:
    ```mlir
    gpu.binary @attn_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a",
        features = "+ptx80">, bin = "\7FELF...">] {attn.manifest = "{...}"}
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", "::mlir::attn::kDefaultChip",
           "target GPU (sm_80 ... sm_120a)">,
    Option<"features", "features", "std::string", "\"\"",
           "PTX features, e.g. +ptx80 (default: the chip's)">,
    Option<"cudaPath", "cuda-path", "std::string", "\"\"",
           "CUDA toolkit (ptxas, libdevice); default $CUDA_HOME or "
           "/usr/local/cuda">,
    Option<"format", "format", "std::string", "\"bin\"",
           "what the gpu.binary holds: bin (cubin) or isa (PTX, JIT-compiled "
           "by the driver at load)">,
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::NVVM::NVVMDialect"];
}

def AttnLowerHostCallsPass
    : Pass<"attn-lower-host-calls", "::mlir::ModuleOp"> {
  let summary = "memref-form attn ops to calls of the runtime's C ABI";
  let description = [{
    After `attn-serialize-kernels` and bufferization, each memref-form
    `attn.attention`, `attn.merge_states` and `attn.append_kv` in a host
    function becomes a `func.call` of `attnRtHostAttention`,
    `attnRtHostMergeStates` or `attnRtHostAppendKV` (attn-c/Runtime.h,
    declared here as external functions). The call names the kernels the
    op's `attn.kernels` lists (an attention's merge kernels and its band,
    `causal` / `window_left`, come from the manifest) and passes each memref
    as its aligned base pointer (an `i64`) and its element count. A custom
    mask (bit-packed `i8`) is one more buffer; the variants' parameters go
    by name (the manifest's `variant_params`, in the op's order) with one
    64-bit slot each, and a window bounded by a parameter
    (`band.lower_param`) passes that parameter as `window_left`. Every
    `gpu.binary` with an `attn.manifest` becomes three LLVM globals: the
    image bytes, the NUL-terminated manifest and the
    `attnRtEmbeddedModule` the calls share (`{image, bytes, manifest,
    state}`, its state written by the runtime); the `gpu.binary` is erased.
    Memrefs must have the identity layout (contiguous, offset 0). Statuses
    are not branched on: the program reads `attnRtHostTakeStatus`.

    Buffers the host function allocates itself (bufferization's
    `memref.alloc` for a result without caller-given `outs`, or any other
    alloc an attn op reads or writes) are host memory the kernels cannot
    reach: each such alloc becomes `gpu.alloc host_shared` (managed memory,
    one address for host and device; `gpu-to-llvm` lowers it to
    `mgpuMemAlloc`, which the runtime library provides) and its
    `memref.dealloc` a call of `attnRtDeviceFree`. The calls run on the
    stream of the function's argument marked `attn.stream` (an `i64` or
    `!llvm.ptr` holding a `CUstream`), or on the default stream (0) when no
    argument is marked; they do not synchronize, so the host reads results
    after `attnRtStreamSynchronize`.

    Before:
    ```mlir
    attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
        indices(%qo, %kp, %ki, %kl : memref<?xi32>, ...) variants [@causal]
        outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@attn_decode_...]} : ...
    ```
    After:
    ```mlir
    %m = llvm.mlir.addressof @attn_kernels_module : !llvm.ptr
    %kernels = llvm.mlir.addressof @attn_kernels_names_0 : !llvm.ptr
    %q_ptr = memref.extract_aligned_pointer_as_index %q : memref<?x32x128xbf16> -> index
    ...
    %status = func.call @attnRtHostAttention(%m, %kernels, %merges, %causal,
        %window_left, %q_i64, %q_numel, ...) : (...) -> i32
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect"];
}

#endif // ATTN_TARGET_PASSES_TD
