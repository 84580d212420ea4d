// RUN: attn-opt %s -split-input-file -attn-lower-host-calls | FileCheck %s

// A gpu.binary as attn-serialize-kernels leaves it (a stand-in object and a
// manifest of the fields the pass reads) becomes the image, manifest and
// attnRtEmbeddedModule globals; a memref-form decode becomes one call of
// attnRtHostAttention with its kernels, the merge kernel and causal from the
// manifest, and every buffer as (aligned pointer, element count).

// CHECK: func.func private @attnRtHostAttention(!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, i64, i64, i64) -> i32
// CHECK-NOT: gpu.binary
// CHECK-NOT: attn.variant
// CHECK-LABEL: func.func @decode
// CHECK-SAME: (%[[Q:[^:]*]]: memref<?x32x128xbf16>, %[[K:[^:]*]]: memref<?x16x8x128xbf16>, %[[V:[^:]*]]: memref<?x16x8x128xbf16>
// CHECK-DAG: %[[MOD:.*]] = llvm.mlir.addressof @attn_kernels_module : !llvm.ptr
// CHECK-DAG: %[[NAMES:.*]] = llvm.mlir.addressof @attn_kernel_names : !llvm.ptr
// CHECK-DAG: %[[MERGES:.*]] = llvm.mlir.addressof @attn_kernel_names_0 : !llvm.ptr
// CHECK-DAG: %[[CAUSAL:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[NOWINDOW:.*]] = arith.constant -1 : i32
// CHECK: %[[QIDX:.*]] = memref.extract_aligned_pointer_as_index %[[Q]] : memref<?x32x128xbf16> -> index
// CHECK: %[[QPTR:.*]] = arith.index_castui %[[QIDX]] : index to i64
// CHECK: %[[ROWS:.*]] = memref.dim %[[Q]], %{{.*}} : memref<?x32x128xbf16>
// CHECK: %[[SCALE:.*]] = arith.constant 0.0883883461 : f32
// CHECK: %[[NOPARAMS:.*]] = arith.constant 0 : i32
// CHECK: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %{{.*}} = call @attnRtHostAttention(%[[MOD]], %[[NAMES]], %[[MERGES]], %[[CAUSAL]], %[[NOWINDOW]], %[[QPTR]], %{{.*}}, %[[SCALE]], %[[NOPARAMS]], %[[NULL]], %[[NULL]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-NOT: attn.attention
// CHECK: return

// CHECK-DAG: llvm.mlir.global internal constant @attn_kernels_image("CUBIN") {addr_space = 0 : i32, alignment = 64 : i64}
// CHECK-DAG: llvm.mlir.global internal constant @attn_kernels_manifest("{{.*}}\00")
// CHECK: llvm.mlir.global internal @attn_kernels_module() {addr_space = 0 : i32, alignment = 8 : i64} : !llvm.struct<(ptr, i64, ptr, ptr)> {
// CHECK:   %[[IMG:.*]] = llvm.mlir.addressof @attn_kernels_image : !llvm.ptr
// CHECK:   llvm.insertvalue %[[IMG]], %{{.*}}[0]
// CHECK:   %[[BYTES:.*]] = llvm.mlir.constant(5 : i64) : i64
// CHECK:   llvm.insertvalue %[[BYTES]], %{{.*}}[1]
// CHECK:   %[[MAN:.*]] = llvm.mlir.addressof @attn_kernels_manifest : !llvm.ptr
// CHECK:   llvm.insertvalue %[[MAN]], %{{.*}}[2]
// CHECK:   %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK:   llvm.insertvalue %[[NULL]], %{{.*}}[3]
// CHECK:   llvm.return
// CHECK-DAG: llvm.mlir.global internal constant @attn_kernel_names("attn_decode\00")
// CHECK-DAG: llvm.mlir.global internal constant @attn_kernel_names_0("attn_merge\00")
module attributes {gpu.container_module} {
  attn.variant @causal {
    attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) {
      %keep = arith.cmpi sle, %k_pos, %q_pos : i32
      attn.yield %keep : i1
    }
  }
  gpu.binary @attn_kernels {attn.manifest = "{\"attn_manifest_version\": 1, \"arch\": \"sm_90a\", \"kernels\": [{\"name\": \"attn_decode\", \"role\": \"attention\", \"merge_kernel\": \"attn_merge\", \"band\": {\"upper\": 0}}, {\"name\": \"attn_merge\", \"role\": \"merge\"}]}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  func.func @decode(%q: memref<?x32x128xbf16>, %k: memref<?x16x8x128xbf16>, %v: memref<?x16x8x128xbf16>,
                    %qo: memref<?xi32>, %kp: memref<?xi32>, %ki: memref<?xi32>, %kl: memref<?xi32>,
                    %o: memref<?x32x128xbf16>, %lse: memref<?x32xf32>) {
    attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
        indices(%qo, %kp, %ki, %kl : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
        variants [@causal] outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@attn_decode]}
        : memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>
    return
  }
}

// -----

// Gemma-2's variants: the window bound by a parameter goes to the planner
// as that parameter's value; both parameters travel by name, in the
// manifest's order, in 64-bit slots (the f32 as its bits).

// CHECK-LABEL: func.func @gemma
// CHECK-SAME: %[[W:[^:]*]]: i32, %[[CAP:[^:]*]]: f32
// CHECK-DAG: %[[CAUSAL:.*]] = arith.constant 1 : i32
// CHECK: %[[TWO:.*]] = arith.constant 2 : i32
// CHECK: %[[WSLOT:.*]] = arith.extui %[[W]] : i32 to i64
// CHECK: %[[BITS:.*]] = arith.bitcast %[[CAP]] : f32 to i32
// CHECK: %[[CAPSLOT:.*]] = arith.extui %[[BITS]] : i32 to i64
// CHECK: %[[PNAMES:.*]] = llvm.mlir.addressof @attn_kernel_names_1 : !llvm.ptr
// CHECK: %[[SLOTS:.*]] = memref.alloca() : memref<2xi64>
// CHECK: memref.store %[[WSLOT]], %[[SLOTS]]
// CHECK: memref.store %[[CAPSLOT]], %[[SLOTS]]
// CHECK: %[[VALUES:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CHECK: call @attnRtHostAttention(%{{.*}}, %{{.*}}, %{{.*}}, %[[CAUSAL]], %[[W]], {{.*}}, %[[TWO]], %[[PNAMES]], %[[VALUES]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK-DAG: llvm.mlir.global internal constant @attn_kernel_names_1("window_left,cap\00")
module attributes {gpu.container_module} {
  attn.variant @causal {
    attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) {
      %keep = arith.cmpi sle, %k_pos, %q_pos : i32
      attn.yield %keep : i1
    }
  }
  attn.variant @window(window_left : i32) {
    attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) {
      %w = attn.param "window_left" : i32
      %lowest = arith.subi %q_pos, %w : i32
      %keep = arith.cmpi sge, %k_pos, %lowest : i32
      attn.yield %keep : i1
    }
  }
  attn.variant @cap(cap : f32) {
    attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
      %c = attn.param "cap" : f32
      %r = arith.minimumf %s, %c : f32
      attn.yield %r : f32
    }
  }
  gpu.binary @attn_kernels {attn.manifest = "{\"attn_manifest_version\": 1, \"arch\": \"sm_90a\", \"kernels\": [{\"name\": \"attn_prefill\", \"role\": \"attention\", \"merge_kernel\": \"attn_merge\", \"band\": {\"upper\": 0, \"lower_param\": \"window_left\"}, \"variant_params\": [{\"name\": \"window_left\", \"type\": \"i32\"}, {\"name\": \"cap\", \"type\": \"f32\"}]}, {\"name\": \"attn_merge\", \"role\": \"merge\"}]}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  func.func @gemma(%q: memref<?x32x128xbf16>, %k: memref<?x16x8x128xbf16>, %v: memref<?x16x8x128xbf16>,
                   %qo: memref<?xi32>, %kp: memref<?xi32>, %ki: memref<?xi32>, %kl: memref<?xi32>,
                   %o: memref<?x32x128xbf16>, %lse: memref<?x32xf32>, %w: i32, %cap: f32) {
    attn.attention %q, %k, %v format(#attn.bsr<block_rows = 256, block_cols = 16>)
        indices(%qo, %kp, %ki, %kl : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
        variants [@causal, @window, @cap] params(%w, %cap : i32, f32)
        outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@attn_prefill]}
        : memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>
    return
  }
}

// -----

// A bit-packed custom mask: its pointer and byte count after the index
// arrays (the runtime makes the kernels' mask_indptr).

// CHECK-LABEL: func.func @masked
// CHECK-SAME: %[[MASK:[^:]*]]: memref<?xi8>
// CHECK: %[[MIDX:.*]] = memref.extract_aligned_pointer_as_index %[[MASK]] : memref<?xi8> -> index
// CHECK: %[[MPTR:.*]] = arith.index_castui %[[MIDX]] : index to i64
// CHECK: %[[MLEN:.*]] = memref.dim %[[MASK]], %{{.*}} : memref<?xi8>
// CHECK: %[[MBYTES:.*]] = arith.index_castui %{{.*}} : index to i64
// CHECK: call @attnRtHostAttention({{.*}}, %[[MPTR]], %[[MBYTES]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
module attributes {gpu.container_module} {
  gpu.binary @attn_kernels {attn.manifest = "{\"attn_manifest_version\": 1, \"arch\": \"sm_90a\", \"kernels\": [{\"name\": \"attn_prefill\", \"role\": \"attention\", \"merge_kernel\": \"attn_merge\"}, {\"name\": \"attn_merge\", \"role\": \"merge\"}]}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  func.func @masked(%q: memref<?x32x128xbf16>, %k: memref<?x16x8x128xbf16>, %v: memref<?x16x8x128xbf16>,
                    %qo: memref<?xi32>, %kp: memref<?xi32>, %ki: memref<?xi32>, %kl: memref<?xi32>,
                    %mask: memref<?xi8>, %o: memref<?x32x128xbf16>, %lse: memref<?x32xf32>) {
    attn.attention %q, %k, %v format(#attn.bsr<block_rows = 256, block_cols = 16>)
        indices(%qo, %kp, %ki, %kl : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
        mask(%mask : memref<?xi8>)
        outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@attn_prefill]}
        : memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>
    return
  }
}

// -----

// Row kernels: merge_states passes its states' pointers as stack arrays and
// the output's [tokens, heads, head_dim]; append_kv the page count and the
// index arrays with their lengths.

// CHECK-DAG: func.func private @attnRtHostMergeStates(!llvm.ptr, !llvm.ptr, i32, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64) -> i32
// CHECK-DAG: func.func private @attnRtHostAppendKV(!llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i32, i64, i64, i64, i64, i64, i64, i64) -> i32
// CHECK-LABEL: func.func @rows
// CHECK: %[[STATES:.*]] = memref.alloca() : memref<2xi64>
// CHECK: memref.store %{{.*}}, %[[STATES]][%{{.*}}] : memref<2xi64>
// CHECK: llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CHECK: call @attnRtHostMergeStates(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: call @attnRtHostAppendKV(
// CHECK-NOT: attn.
// CHECK: return
// CHECK-DAG: llvm.mlir.global internal constant @attn_kernel_names("attn_merge_states_f32_d128_n2\00")
// CHECK-DAG: llvm.mlir.global internal constant @attn_kernel_names_0("attn_append_kv_bf16_d128_p16\00")
module attributes {gpu.container_module} {
  gpu.binary @attn_kernels {attn.manifest = "{\"attn_manifest_version\": 1, \"arch\": \"sm_90a\", \"kernels\": []}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  func.func @rows(%o0: memref<?x32x128xf32>, %o1: memref<?x32x128xf32>, %l0: memref<?x32xf32>, %l1: memref<?x32xf32>,
                  %o: memref<?x32x128xf32>, %l: memref<?x32xf32>,
                  %kn: memref<?x8x128xbf16>, %vn: memref<?x8x128xbf16>,
                  %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
                  %b: memref<?xi32>, %p: memref<?xi32>, %ip: memref<?xi32>, %ix: memref<?xi32>) {
    attn.merge_states %o0, %o1 lse %l0, %l1 outs(%o, %l : memref<?x32x128xf32>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@attn_merge_states_f32_d128_n2]} : memref<?x32x128xf32>, memref<?x32xf32>
    attn.append_kv %kn, %vn into %kc, %vc format(#attn.bsr<block_cols = 16>)
        indices(%b, %p, %ip, %ix : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
        {attn.kernels = [@attn_kernels::@attn_append_kv_bf16_d128_p16]}
        : memref<?x8x128xbf16> into memref<?x16x8x128xbf16>
    return
  }
}

// -----

// Buffers the function allocates itself (bufferization's memref.alloc for a
// result without caller-given outs) become managed memory the kernels reach,
// gpu.alloc host_shared, their deallocs attnRtDeviceFree; the calls run on
// the stream of the argument marked attn.stream (the mark is dropped).

// CHECK-LABEL: func.func @own_outputs
// CHECK-SAME: %[[STREAM:[^:]*]]: i64)
// CHECK-NOT: memref.alloc(
// CHECK: %[[O:.*]] = gpu.alloc  host_shared (%{{.*}}) : memref<?x32x128xbf16>
// CHECK: %[[LSE:.*]] = gpu.alloc  host_shared (%{{.*}}) : memref<?x32xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[O]]
// CHECK: call @attnRtHostAttention({{.*}}, %[[STREAM]]) :
// CHECK: %[[LIDX:.*]] = memref.extract_aligned_pointer_as_index %[[LSE]]
// CHECK: %[[LPTR:.*]] = arith.index_castui %[[LIDX]] : index to i64
// CHECK: call @attnRtDeviceFree(%[[LPTR]]) : (i64) -> i32
// CHECK-NOT: memref.dealloc
// CHECK: return %[[O]]
module attributes {gpu.container_module} {
  gpu.binary @attn_kernels {attn.manifest = "{\"attn_manifest_version\": 1, \"arch\": \"sm_90a\", \"kernels\": [{\"name\": \"attn_decode\", \"role\": \"attention\", \"merge_kernel\": \"attn_merge\"}, {\"name\": \"attn_merge\", \"role\": \"merge\"}]}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  func.func @own_outputs(%q: memref<?x32x128xbf16>, %k: memref<?x16x8x128xbf16>, %v: memref<?x16x8x128xbf16>,
                         %qo: memref<?xi32>, %kp: memref<?xi32>, %ki: memref<?xi32>, %kl: memref<?xi32>,
                         %stream: i64 {attn.stream}) -> memref<?x32x128xbf16> {
    %c0 = arith.constant 0 : index
    %n = memref.dim %q, %c0 : memref<?x32x128xbf16>
    %o = memref.alloc(%n) {alignment = 64 : i64} : memref<?x32x128xbf16>
    %lse = memref.alloc(%n) : memref<?x32xf32>
    attn.attention %q, %k, %v format(#attn.bsr<block_rows = 1, block_cols = 16>)
        indices(%qo, %kp, %ki, %kl : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
        outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@attn_decode]}
        : memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>
    memref.dealloc %lse : memref<?x32xf32>
    return %o : memref<?x32x128xbf16>
  }
}

// -----

// A stream passed as a pointer (a CUstream) reaches the row kernels' calls
// as its address; buffers from the caller stay as they are.

// CHECK-LABEL: func.func @rows_on_stream
// CHECK-SAME: %[[S:[^:]*]]: !llvm.ptr)
// CHECK-NOT: gpu.alloc
// CHECK: %[[SI:.*]] = llvm.ptrtoint %[[S]] : !llvm.ptr to i64
// CHECK: call @attnRtHostMergeStates({{.*}}, %[[SI]]) :
// CHECK: %[[SI2:.*]] = llvm.ptrtoint %[[S]] : !llvm.ptr to i64
// CHECK: call @attnRtHostAppendKV({{.*}}, %[[SI2]]) :
module attributes {gpu.container_module} {
  gpu.binary @attn_kernels {attn.manifest = "{\"attn_manifest_version\": 1, \"arch\": \"sm_90a\", \"kernels\": []}"}
      [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, bin = "CUBIN">]
  func.func @rows_on_stream(%o0: memref<?x32x128xf32>, %o1: memref<?x32x128xf32>, %l0: memref<?x32xf32>,
                            %l1: memref<?x32xf32>, %o: memref<?x32x128xf32>, %l: memref<?x32xf32>,
                            %kn: memref<?x8x128xbf16>, %vn: memref<?x8x128xbf16>,
                            %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>,
                            %b: memref<?xi32>, %p: memref<?xi32>, %ip: memref<?xi32>, %ix: memref<?xi32>,
                            %s: !llvm.ptr {attn.stream}) {
    attn.merge_states %o0, %o1 lse %l0, %l1 outs(%o, %l : memref<?x32x128xf32>, memref<?x32xf32>)
        {attn.kernels = [@attn_kernels::@attn_merge_states_f32_d128_n2]} : memref<?x32x128xf32>, memref<?x32xf32>
    attn.append_kv %kn, %vn into %kc, %vc format(#attn.bsr<block_cols = 16>)
        indices(%b, %p, %ip, %ix : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
        {attn.kernels = [@attn_kernels::@attn_append_kv_bf16_d128_p16]}
        : memref<?x8x128xbf16> into memref<?x16x8x128xbf16>
    return
  }
}
