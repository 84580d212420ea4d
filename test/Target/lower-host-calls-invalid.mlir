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

// -----

// An i1 mask: the runtime takes it bit-packed.
module attributes {gpu.container_module} {
  gpu.binary @attn_kernels {attn.manifest = "{\"kernels\": [{\"name\": \"p\", \"role\": \"attention\", \"merge_kernel\": \"m\"}]}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  func.func @i1_mask(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>,
                     %qo: memref<?xi32>, %kp: memref<?xi32>, %mask: memref<?xi1>,
                     %o: memref<?x32x128xbf16>, %lse: memref<?x32xf32>) {
    // expected-error @+1 {{has an i1 custom mask; attnRtHostAttention takes it bit-packed (i8, little-endian, each request from a new byte)}}
    attn.attention %q, %k, %v format(#attn.bsr<block_rows = 256, block_cols = 1, indexing = ragged>)
        indices(%qo, %kp : memref<?xi32>, memref<?xi32>) mask(%mask : memref<?xi1>)
        outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@p]}
        : memref<?x32x128xbf16>, memref<?x8x128xbf16>, memref<?x8x128xbf16>
    return
  }
}

// -----

// Parameters the kernel's manifest does not list.
module attributes {gpu.container_module} {
  attn.variant @cap(cap : f32) {
    attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
      %c = attn.param "cap" : f32
      %r = arith.minimumf %s, %c : f32
      attn.yield %r : f32
    }
  }
  gpu.binary @attn_kernels {attn.manifest = "{\"kernels\": [{\"name\": \"p\", \"role\": \"attention\", \"merge_kernel\": \"m\"}]}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  func.func @params(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>,
                    %qo: memref<?xi32>, %kp: memref<?xi32>, %cap: f32,
                    %o: memref<?x32x128xbf16>, %lse: memref<?x32xf32>) {
    // expected-error @+1 {{has 1 variant parameters but kernel 'p' takes 0}}
    attn.attention %q, %k, %v format(#attn.bsr<block_rows = 256, block_cols = 1, indexing = ragged>)
        indices(%qo, %kp : memref<?xi32>, memref<?xi32>) variants [@cap] params(%cap : f32)
        outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@p]}
        : memref<?x32x128xbf16>, memref<?x8x128xbf16>, memref<?x8x128xbf16>
    return
  }
}

// -----

// A band bound by a name no parameter has.
module attributes {gpu.container_module} {
  gpu.binary @attn_kernels {attn.manifest = "{\"kernels\": [{\"name\": \"p\", \"role\": \"attention\", \"merge_kernel\": \"m\", \"band\": {\"lower_param\": \"w\"}}]}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  func.func @band(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>,
                  %qo: memref<?xi32>, %kp: memref<?xi32>,
                  %o: memref<?x32x128xbf16>, %lse: memref<?x32xf32>) {
    // expected-error @+1 {{kernel 'p' bounds its band by 'w', which is no i32 parameter of the op}}
    attn.attention %q, %k, %v format(#attn.bsr<block_rows = 256, block_cols = 1, indexing = ragged>)
        indices(%qo, %kp : memref<?xi32>, memref<?xi32>)
        outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@p]}
        : memref<?x32x128xbf16>, memref<?x8x128xbf16>, memref<?x8x128xbf16>
    return
  }
}

// -----

// A kernel the image's manifest does not list.
module attributes {gpu.container_module} {
  gpu.binary @attn_kernels {attn.manifest = "{\"kernels\": [{\"name\": \"p\", \"role\": \"attention\", \"merge_kernel\": \"m\"}]}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  func.func @unlisted(%q: memref<?x32x128xbf16>, %k: memref<?x8x128xbf16>, %v: memref<?x8x128xbf16>,
                      %qo: memref<?xi32>, %kp: memref<?xi32>,
                      %o: memref<?x32x128xbf16>, %lse: memref<?x32xf32>) {
    // expected-error @+1 {{names kernel 'q', which its image's manifest lacks}}
    attn.attention %q, %k, %v format(#attn.bsr<block_rows = 256, block_cols = 1, indexing = ragged>)
        indices(%qo, %kp : memref<?xi32>, memref<?xi32>)
        outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@q]}
        : memref<?x32x128xbf16>, memref<?x8x128xbf16>, memref<?x8x128xbf16>
    return
  }
}

// -----

// Two streams for one function's calls.
module attributes {gpu.container_module} {
  gpu.binary @attn_kernels {attn.manifest = "{\"kernels\": []}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  // expected-error @+1 {{has two attn.stream arguments; mark one}}
  func.func @two_streams(%o0: memref<?x32x128xf32>, %o1: memref<?x32x128xf32>, %l0: memref<?x32xf32>,
                         %l1: memref<?x32xf32>, %o: memref<?x32x128xf32>, %l: memref<?x32xf32>,
                         %s0: i64 {attn.stream}, %s1: i64 {attn.stream}) {
    attn.merge_states %o0, %o1 lse %l0, %l1 outs(%o, %l : memref<?x32x128xf32>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@m]} : memref<?x32x128xf32>, memref<?x32xf32>
    return
  }
}

// -----

// A stream is a CUstream: an i64 or a pointer, not an i32.
module attributes {gpu.container_module} {
  gpu.binary @attn_kernels {attn.manifest = "{\"kernels\": []}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  // expected-error @+1 {{marks an argument of type 'i32' attn.stream; a stream is an i64 or !llvm.ptr (a CUstream)}}
  func.func @narrow_stream(%o0: memref<?x32x128xf32>, %o1: memref<?x32x128xf32>, %l0: memref<?x32xf32>,
                           %l1: memref<?x32xf32>, %o: memref<?x32x128xf32>, %l: memref<?x32xf32>,
                           %s: i32 {attn.stream}) {
    attn.merge_states %o0, %o1 lse %l0, %l1 outs(%o, %l : memref<?x32x128xf32>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@m]} : memref<?x32x128xf32>, memref<?x32xf32>
    return
  }
}

// -----

// copy_indices is a kernel the runtime launches itself; host code copies
// arrays with the memref and gpu dialects' own ops.
func.func @copy(%s: memref<?xi32>, %d: memref<?xi32>) {
  // expected-error @+1 {{has no host call: copy the arrays with memref.copy or gpu.memcpy in host code (attn.copy_indices is a kernel the runtime launches itself)}}
  attn.copy_indices %s into %d : memref<?xi32> into memref<?xi32>
  return
}

// -----

// So is copy_by_table (graph mode's run() launches it).
func.func @copy_by_table(%t: memref<?xi64>) {
  // expected-error @+1 {{has no host call: copy the arrays with memref.copy or gpu.memcpy in host code (attn.copy_by_table is a kernel the runtime launches itself)}}
  attn.copy_by_table %t {rows = 1} : memref<?xi64>
  return
}
