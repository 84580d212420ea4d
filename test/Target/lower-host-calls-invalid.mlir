// RUN: attn-opt %s -split-input-file -attn-lower-host-calls -verify-diagnostics

// The tensor form has no buffers to pass.
func.func @tensor_form(%o0: tensor<?x32x128xf32>, %o1: tensor<?x32x128xf32>, %l0: tensor<?x32xf32>, %l1: tensor<?x32xf32>)
    -> (tensor<?x32x128xf32>, tensor<?x32xf32>) {
  // expected-error @+1 {{is in the tensor form: bufferize it before attn-lower-host-calls}}
  %o, %lse = attn.merge_states %o0, %o1 lse %l0, %l1 {attn.kernels = [@attn_kernels::@m]}
      : tensor<?x32x128xf32>, tensor<?x32xf32> -> tensor<?x32x128xf32>
  return %o, %lse : tensor<?x32x128xf32>, tensor<?x32xf32>
}

// -----

// Kernels of an image that was not serialized.
func.func @no_binary(%o0: memref<?x32x128xf32>, %o1: memref<?x32x128xf32>, %l0: memref<?x32xf32>, %l1: memref<?x32xf32>,
                     %o: memref<?x32x128xf32>, %l: memref<?x32xf32>) {
  // expected-error @+1 {{names kernels of @attn_kernels, which is no gpu.binary with an attn.manifest: run attn-serialize-kernels first}}
  attn.merge_states %o0, %o1 lse %l0, %l1 outs(%o, %l : memref<?x32x128xf32>, memref<?x32xf32>)
      {attn.kernels = [@attn_kernels::@m]} : memref<?x32x128xf32>, memref<?x32xf32>
  return
}

// -----

// Not outlined.
func.func @no_kernels(%o0: memref<?x32x128xf32>, %o1: memref<?x32x128xf32>, %l0: memref<?x32xf32>, %l1: memref<?x32xf32>,
                      %o: memref<?x32x128xf32>, %l: memref<?x32xf32>) {
  // expected-error @+1 {{has no attn.kernels: run attn-outline-kernels first}}
  attn.merge_states %o0, %o1 lse %l0, %l1 outs(%o, %l : memref<?x32x128xf32>, memref<?x32xf32>)
      : memref<?x32x128xf32>, memref<?x32xf32>
  return
}

// -----

// A strided view: the runtime takes dense buffers.
module attributes {gpu.container_module} {
  gpu.binary @attn_kernels {attn.manifest = "{\"kernels\": []}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  func.func @strided(%o0: memref<?x32x128xf32, strided<[8192, 128, 1], offset: ?>>,
                     %o1: memref<?x32x128xf32, strided<[8192, 128, 1], offset: ?>>,
                     %l0: memref<?x32xf32>, %l1: memref<?x32xf32>, %o: memref<?x32x128xf32>, %l: memref<?x32xf32>) {
    // expected-error @+1 {{needs dense memrefs (identity layout)}}
    attn.merge_states %o0, %o1 lse %l0, %l1 outs(%o, %l : memref<?x32x128xf32>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@m]} : memref<?x32x128xf32, strided<[8192, 128, 1], offset: ?>>, memref<?x32xf32>
    return
  }
}
