// RUN: attn-opt %s -split-input-file --convert-attn-to-gpu | FileCheck %s

// The sm_80+ lowering of the tile-level form (the input is what
// attn-outline-kernels writes for the attentions named in each comment):
// no attn.tile op is left, each tile type is one thread's values, and the
// kernels are mma.sync / ldmatrix / cp.async code of upstream dialects.

// Decode (a 16-row tile of 3 warps) with @causal, @sliding_window and
// @soft_cap: the persistent loop over the CTA's work items; each warp's
// prologue gathers its first K/V tile with 16-byte cp.async (K and V, 8
// copies each per lane), then per step: __syncwarp, refill, wait for the
// tile, S = Q Kᵀ (ldmatrix x4, two mma.sync per k-step), the hooks inlined
// per element (causal, the window reading its parameter, the soft-cap
// reading its own), the online softmax (quad shuffles, exp2) and P V
// (ldmatrix.trans); then the warps combine through shared memory, the
// programmatic-launch trigger for the merge kernel, and 16-byte stores of
// the output (bf16) or the partial slot (f32). The occupancy hint is the
// contract's ctas_per_sm.
// CHECK-LABEL: gpu.func @attn_merge_bf16_d128(
// Parts of a row combine through the dynamic shared memory the contract
// sizes (shared_bytes = 10240: 256 threads x 10 floats).
// CHECK: gpu.dynamic_shared_memory
// CHECK: memref.view {{.*}} to memref<2560xf32, #gpu.address_space<workgroup>>
// CHECK: gpu.grid_dim x
// CHECK: nvvm.griddepcontrol wait
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: gpu.barrier
// CHECK: math.log2
// CHECK-LABEL: gpu.func @attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_causal_sliding_window_soft_cap(
// CHECK-SAME: %[[W:arg[0-9]+]]: i32 {attn.name = "window_left", attn.param_type = i32}
// CHECK-SAME: %[[CAP:arg[0-9]+]]: f32 {attn.name = "cap", attn.param_type = f32}
// CHECK-SAME: nvvm.minctasm = 4 : i32
// CHECK-NOT: attn.tile
// CHECK: gpu.block_id x
// CHECK: scf.for
// CHECK-COUNT-16: nvgpu.device_async_copy {{.*}} {bypassL1}
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK: nvvm.bar.warp.sync
// CHECK-COUNT-16: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvvm.cp.async.wait.group 1
// CHECK: nvvm.bar.warp.sync
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK-NEXT: vector.extract
// CHECK: nvvm.mma.sync {{.*}} {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>}
// CHECK: arith.divf %{{.*}}, %[[CAP]] : f32
// CHECK-NEXT: math.tanh
// CHECK: arith.cmpi sle, %{{.*}}, %{{.*}} : i32
// CHECK: arith.subi %{{.*}}, %[[W]] : i32
// CHECK: gpu.shuffle xor
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK: scf.yield
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: nvvm.griddepcontrol launch_dependents
// CHECK: gpu.barrier
// CHECK: math.log2
// CHECK: vector.store {{.*}} : memref<{{[0-9]+}}xbf16, #gpu.address_space<global>>, vector<8xbf16>
// CHECK: } else {
// CHECK: vector.store {{.*}} : memref<{{[0-9]+}}xf32, #gpu.address_space<global>>, vector<8xf32>
// CHECK: gpu.barrier
// CHECK: gpu.return
module attributes {gpu.container_module} {
  gpu.module @attn_kernels {
    gpu.func @attn_merge_bf16_d128(%arg0: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "plan"}, %arg1: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "merge_indptr"}, %arg2: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "merge_units"}, %arg3: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_o"}, %arg4: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_lse"}, %arg5: i32 {attn.name = "slot_rows"}, %arg6: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "o"}, %arg7: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "lse"}, %arg8: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "qo_indptr"}) kernel attributes {attn.launch = #attn.launch<role = merge, chip = "sm_90", threads = 256, shared_bytes = 10240, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, pdl = true>, known_block_size = array<i32: 256, 1, 1>} {
      attn.tile.merge %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8 : memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>
      gpu.return
    }
    gpu.func @attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_causal_sliding_window_soft_cap(%arg0: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "cta_indptr"}, %arg1: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "work_items"}, %arg2: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_o"}, %arg3: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_lse"}, %arg4: i32 {attn.name = "slot_rows"}, %arg5: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "q"}, %arg6: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "k_cache"}, %arg7: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "v_cache"}, %arg8: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "o"}, %arg9: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "lse"}, %arg10: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "qo_indptr"}, %arg11: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "kv_indptr"}, %arg12: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "kv_indices"}, %arg13: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "kv_last_len"}, %arg14: f32 {attn.name = "sm_scale"}, %arg15: i32 {attn.name = "window_left", attn.param_type = i32}, %arg16: f32 {attn.name = "cap", attn.param_type = f32}, %num_pages: i32 {attn.name = "num_pages"}, %page_stride: i64 {attn.name = "page_stride"}, %index_error: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "index_error"}, %plan: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "plan"}) kernel attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, shared_bytes = 49536, ctas_per_sm = 4, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = <q = 16, kv = 16, warps = 3, gqa_pack = 4, ctas_per_sm = 4>, format = <block_cols = 16>, cost_per_item = 128, min_chunk = 512, band = <upper = 0, lower_param = "window_left">, merge = @attn_merge_bf16_d128, variants = ["causal", "sliding_window", "soft_cap"]>, known_block_size = array<i32: 96, 1, 1>} {
      attn.tile.work_loop %plan, %arg0, %arg1 requests(%arg10, %arg11, %arg13 : memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>) : memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>> {
      ^bb0(%arg17: !attn.item):
        %0 = attn.tile.kv_range %arg17 lower(%arg15) {upper = 0 : i64} : !attn.kv_range<16>
        %1 = attn.tile.kv_tile_count %0 : !attn.kv_range<16>
        %2 = attn.tile.softmax_init : !attn.softmax<16x128>
        %c0 = arith.constant 0 : index
        %3 = arith.cmpi sgt, %1, %c0 : index
        %4 = scf.if %3 -> (!attn.softmax<16x128>) {
          %5 = attn.tile.kv_prologue %0, %arg17, %arg6, %arg7 pages(%arg12 : memref<1099511627776xi32, #gpu.address_space<global>>, stride %page_stride) bounds(%num_pages, %index_error : memref<1099511627776xi32, #gpu.address_space<global>>) : memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xbf16, #gpu.address_space<global>>, !attn.kv_range<16> -> !attn.kv_pipe<16x128xbf16>
          %6 = attn.tile.load_query %arg17, %arg5 : memref<1099511627776xbf16, #gpu.address_space<global>> -> !attn.query<16x128xbf16>
          %c1 = arith.constant 1 : index
          %7:2 = scf.for %arg18 = %c0 to %1 step %c1 iter_args(%arg19 = %2, %arg20 = %5) -> (!attn.softmax<16x128>, !attn.kv_pipe<16x128xbf16>) {
            %tile, %next = attn.tile.kv_next %arg20, %arg18, %arg17, %arg6, %arg7 pages(%arg12 : memref<1099511627776xi32, #gpu.address_space<global>>, stride %page_stride) bounds(%num_pages, %index_error : memref<1099511627776xi32, #gpu.address_space<global>>) : memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xbf16, #gpu.address_space<global>>, !attn.kv_pipe<16x128xbf16> -> !attn.kv_tile<16x128xbf16>
            %8 = attn.tile.qk %6, %tile : !attn.query<16x128xbf16>, !attn.kv_tile<16x128xbf16> -> !attn.scores<16x16>
            %new_state, %probs = attn.tile.online_softmax %arg19, %8, %arg17, %tile scale(%arg14) {band_covers_mask} : !attn.softmax<16x128>, !attn.scores<16x16>, !attn.kv_tile<16x128xbf16> -> !attn.probs<16x16xbf16> logits_transform {
            ^bb0(%arg21: f32, %arg22: i32, %arg23: i32, %arg24: i32):
              %10 = arith.divf %arg21, %arg16 : f32
              %11 = math.tanh %10 : f32
              %12 = arith.mulf %arg16, %11 : f32
              attn.yield %12 : f32
            } logits_mask {
            ^bb0(%arg21: i32, %arg22: i32, %arg23: i32):
              %10 = arith.cmpi sle, %arg22, %arg21 : i32
              %c0_i32 = arith.constant 0 : i32
              %11 = arith.cmpi slt, %arg15, %c0_i32 : i32
              %12 = arith.subi %arg21, %arg15 : i32
              %13 = arith.cmpi sge, %arg22, %12 : i32
              %14 = arith.ori %11, %13 : i1
              %15 = arith.andi %10, %14 : i1
              attn.yield %15 : i1
            }
            %9 = attn.tile.pv %new_state, %probs, %tile : !attn.softmax<16x128>, !attn.probs<16x16xbf16>, !attn.kv_tile<16x128xbf16>
            scf.yield %9, %next : !attn.softmax<16x128>, !attn.kv_pipe<16x128xbf16>
          }
          attn.tile.kv_drain %7#1 : !attn.kv_pipe<16x128xbf16>
          scf.yield %7#0 : !attn.softmax<16x128>
        } else {
          scf.yield %2 : !attn.softmax<16x128>
        }
        attn.tile.store %4, %arg17, %arg8, %arg9, %arg2, %arg3, %arg4 : !attn.softmax<16x128>, memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>
      }
      gpu.return
    }
  }
}

// -----

// Speculative token-tree verification on a 128-row tile (8 warps sharing
// each K/V tile): page indices of the 1-token pages per copy, the prologue's
// one K/V stage, then the Q tile (cp.async, waited for with everything
// before it), ldmatrix of each warp's A fragments; per step: wait for the
// tile at a CTA barrier, S = Q Kᵀ over 8 n-tiles, the window's mask and the
// custom mask's bit (byte offset from mask_indptr, shifted by the bit) on
// every tile, the online softmax, P V; the rows' own fragments are written.
// CHECK-LABEL: gpu.func @attn_merge_bf16_d128_r16(
// A row per part: no shared memory, no barrier.
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return
// CHECK-LABEL: gpu.func @attn_prefill_bf16_d128_h32x8_p1_nhd_q128_kv64_s2_k4_c1_sliding_window_mask(
// CHECK-SAME: %[[INDICES:arg[0-9]+]]: memref<{{[0-9]+}}xi32, #gpu.address_space<global>> {attn.name = "kv_indices"}
// CHECK-SAME: %[[MASK:arg[0-9]+]]: memref<{{[0-9]+}}xi8, #gpu.address_space<global>> {attn.name = "custom_mask"}
// CHECK-SAME: %[[MASKPTR:arg[0-9]+]]: memref<{{[0-9]+}}xi32, #gpu.address_space<global>> {attn.name = "mask_indptr"}
// CHECK-NOT: nvvm.minctasm
// CHECK-SAME: {
// CHECK: gpu.barrier
// CHECK-COUNT-4: memref.load %[[INDICES]]
// CHECK-COUNT-8: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.commit.group
// CHECK-COUNT-8: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: gpu.barrier
// CHECK-COUNT-8: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: gpu.barrier
// CHECK: nvvm.mma.sync
// CHECK: memref.load %[[MASKPTR]]
// CHECK: memref.load %[[MASK]][%{{.*}}] : memref<{{[0-9]+}}xi8, #gpu.address_space<global>>
// CHECK-NEXT: arith.extui %{{.*}} : i8 to i32
// CHECK: arith.shli
// CHECK: arith.cmpi sge
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// The epilogue: each quad trades words (butterflies 1, 2, 3) so that every
// lane writes a whole 16-byte chunk of its row.
// CHECK: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"
// CHECK: gpu.shuffle xor {{.*}}, %c1_i32
// CHECK: gpu.shuffle xor {{.*}}, %c2_i32
// CHECK: gpu.shuffle xor {{.*}}, %c3_i32
// CHECK: vector.store {{.*}} : memref<{{[0-9]+}}xbf16, #gpu.address_space<global>>, vector<8xbf16>
// CHECK: vector.store {{.*}} : memref<{{[0-9]+}}xf32, #gpu.address_space<global>>, vector<2xf32>
module attributes {gpu.container_module} {
  gpu.module @attn_kernels {
    gpu.func @attn_merge_bf16_d128_r16(%arg0: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "plan"}, %arg1: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "merge_indptr"}, %arg2: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "merge_units"}, %arg3: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_o"}, %arg4: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_lse"}, %arg5: i32 {attn.name = "slot_rows"}, %arg6: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "o"}, %arg7: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "lse"}, %arg8: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "qo_indptr"}) kernel attributes {attn.launch = #attn.launch<role = merge, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, merge_rows = 16, pdl = true>, known_block_size = array<i32: 256, 1, 1>} {
      attn.tile.merge %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8 : memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>
      gpu.return
    }
    gpu.func @attn_prefill_bf16_d128_h32x8_p1_nhd_q128_kv64_s2_k4_c1_sliding_window_mask(%arg0: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "cta_indptr"}, %arg1: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "work_items"}, %arg2: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_o"}, %arg3: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_lse"}, %arg4: i32 {attn.name = "slot_rows"}, %arg5: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "q"}, %arg6: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "k_cache"}, %arg7: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "v_cache"}, %arg8: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "o"}, %arg9: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "lse"}, %arg10: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "qo_indptr"}, %arg11: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "kv_indptr"}, %arg12: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "kv_indices"}, %arg13: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "kv_last_len"}, %arg14: memref<1099511627776xi8, #gpu.address_space<global>> {attn.name = "custom_mask"}, %arg15: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "mask_indptr"}, %arg16: f32 {attn.name = "sm_scale"}, %arg17: i32 {attn.name = "window_left", attn.param_type = i32}, %num_pages: i32 {attn.name = "num_pages"}, %page_stride: i64 {attn.name = "page_stride"}, %index_error: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "index_error"}, %plan: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "plan"}) kernel attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 256, shared_bytes = 98304, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = <q = 128, kv = 64, warps = 8, gqa_pack = 4>, format = <block_rows = 16, block_cols = 1>, cost_per_item = 128, band = <lower_param = "window_left">, custom_mask = true, merge = @attn_merge_bf16_d128_r16, variants = ["sliding_window"]>, known_block_size = array<i32: 256, 1, 1>} {
      attn.tile.work_loop %plan, %arg0, %arg1 requests(%arg10, %arg11, %arg13 : memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>) : memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>> {
      ^bb0(%arg18: !attn.item):
        %0 = attn.tile.kv_range %arg18 lower(%arg17) : !attn.kv_range<64>
        %1 = attn.tile.kv_tile_count %0 : !attn.kv_range<64>
        %2 = attn.tile.softmax_init : !attn.softmax<128x128>
        %c0 = arith.constant 0 : index
        %3 = arith.cmpi sgt, %1, %c0 : index
        %4 = scf.if %3 -> (!attn.softmax<128x128>) {
          %5 = attn.tile.kv_prologue %0, %arg18, %arg6, %arg7 pages(%arg12 : memref<1099511627776xi32, #gpu.address_space<global>>, stride %page_stride) bounds(%num_pages, %index_error : memref<1099511627776xi32, #gpu.address_space<global>>) : memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xbf16, #gpu.address_space<global>>, !attn.kv_range<64> -> !attn.kv_pipe<64x128xbf16>
          %6 = attn.tile.load_query %arg18, %arg5 : memref<1099511627776xbf16, #gpu.address_space<global>> -> !attn.query<128x128xbf16>
          %c1 = arith.constant 1 : index
          %7:2 = scf.for %arg19 = %c0 to %1 step %c1 iter_args(%arg20 = %2, %arg21 = %5) -> (!attn.softmax<128x128>, !attn.kv_pipe<64x128xbf16>) {
            %tile, %next = attn.tile.kv_next %arg21, %arg19, %arg18, %arg6, %arg7 pages(%arg12 : memref<1099511627776xi32, #gpu.address_space<global>>, stride %page_stride) bounds(%num_pages, %index_error : memref<1099511627776xi32, #gpu.address_space<global>>) : memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xbf16, #gpu.address_space<global>>, !attn.kv_pipe<64x128xbf16> -> !attn.kv_tile<64x128xbf16>
            %8 = attn.tile.qk %6, %tile : !attn.query<128x128xbf16>, !attn.kv_tile<64x128xbf16> -> !attn.scores<128x64>
            %new_state, %probs = attn.tile.online_softmax %arg20, %8, %arg18, %tile scale(%arg16) custom_mask(%arg14, %arg15 : memref<1099511627776xi8, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>) : !attn.softmax<128x128>, !attn.scores<128x64>, !attn.kv_tile<64x128xbf16> -> !attn.probs<128x64xbf16> logits_mask {
            ^bb0(%arg22: i32, %arg23: i32, %arg24: i32):
              %c0_i32 = arith.constant 0 : i32
              %10 = arith.cmpi slt, %arg17, %c0_i32 : i32
              %11 = arith.subi %arg22, %arg17 : i32
              %12 = arith.cmpi sge, %arg23, %11 : i32
              %13 = arith.ori %10, %12 : i1
              attn.yield %13 : i1
            }
            %9 = attn.tile.pv %new_state, %probs, %tile : !attn.softmax<128x128>, !attn.probs<128x64xbf16>, !attn.kv_tile<64x128xbf16>
            scf.yield %9, %next : !attn.softmax<128x128>, !attn.kv_pipe<64x128xbf16>
          }
          attn.tile.kv_drain %7#1 : !attn.kv_pipe<64x128xbf16>
          scf.yield %7#0 : !attn.softmax<128x128>
        } else {
          scf.yield %2 : !attn.softmax<128x128>
        }
        attn.tile.store %4, %arg18, %arg8, %arg9, %arg2, %arg3, %arg4 : !attn.softmax<128x128>, memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>
      }
      gpu.return
    }
  }
}

// -----

// Causal prefill over ragged KV, with a key transform and sinks: the key
// transform rewrites each K tile in shared memory (a loop over pairs of
// elements, then a barrier) after the tile lands; causal's band skips tiles
// past the last row (min with the last position) and masks only tiles that
// leave the interior (an scf.if around the element mask); the sink joins
// each row's denominator on the item's first chunk.
// CHECK-LABEL: gpu.func @attn_prefill_bf16_d128_h32x8_ragged_nhd_q128_kv64_s2_k1_c1_rope_free_causal_sinks(
// CHECK-SAME: %[[SINKS:arg[0-9]+]]: memref<{{[0-9]+}}xf32, #gpu.address_space<global>> {attn.name = "sinks", attn.param_type = memref<?xf32>}
// CHECK: arith.minsi
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: gpu.barrier
// CHECK: scf.for
// CHECK: vector.load {{.*}} vector<8xbf16>
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: vector.store {{.*}} vector<8xbf16>
// CHECK: gpu.barrier
// CHECK: nvvm.mma.sync
// CHECK: scf.if %{{.*}} -> (f32,
// CHECK: arith.cmpi sle
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: scf.yield
// CHECK: memref.load %[[SINKS]]
// CHECK: math.log2
module attributes {gpu.container_module} {
  gpu.module @attn_kernels {
    gpu.func @attn_merge_bf16_d128_r16(%arg0: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "plan"}, %arg1: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "merge_indptr"}, %arg2: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "merge_units"}, %arg3: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_o"}, %arg4: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_lse"}, %arg5: i32 {attn.name = "slot_rows"}, %arg6: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "o"}, %arg7: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "lse"}, %arg8: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "qo_indptr"}) kernel attributes {attn.launch = #attn.launch<role = merge, chip = "sm_90", threads = 256, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, merge_rows = 16, pdl = true>, known_block_size = array<i32: 256, 1, 1>} {
      attn.tile.merge %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8 : memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>
      gpu.return
    }
    gpu.func @attn_prefill_bf16_d128_h32x8_ragged_nhd_q128_kv64_s2_k1_c1_rope_free_causal_sinks(%arg0: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "cta_indptr"}, %arg1: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "work_items"}, %arg2: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_o"}, %arg3: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_lse"}, %arg4: i32 {attn.name = "slot_rows"}, %arg5: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "q"}, %arg6: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "k_cache"}, %arg7: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "v_cache"}, %arg8: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "o"}, %arg9: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "lse"}, %arg10: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "qo_indptr"}, %arg11: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "kv_indptr"}, %arg12: f32 {attn.name = "sm_scale"}, %arg13: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "sinks", attn.param_type = memref<?xf32>}, %plan: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "plan"}) kernel attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 256, shared_bytes = 98304, dtype = bf16, head_dim = 128, num_qo_heads = 32, num_kv_heads = 8, tile = <q = 128, kv = 64, warps = 8>, format = <block_rows = 2048, block_cols = 1, indexing = ragged>, cost_per_item = 128, band = <upper = 0>, merge = @attn_merge_bf16_d128_r16, variants = ["rope_free", "causal", "sinks"]>, known_block_size = array<i32: 256, 1, 1>} {
      attn.tile.work_loop %plan, %arg0, %arg1 requests(%arg10, %arg11 : memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>) : memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>> {
      ^bb0(%arg14: !attn.item):
        %0 = attn.tile.kv_range %arg14 {upper = 0 : i64} : !attn.kv_range<64>
        %1 = attn.tile.kv_tile_count %0 : !attn.kv_range<64>
        %2 = attn.tile.softmax_init : !attn.softmax<128x128>
        %c0 = arith.constant 0 : index
        %3 = arith.cmpi sgt, %1, %c0 : index
        %4 = scf.if %3 -> (!attn.softmax<128x128>) {
          %5 = attn.tile.kv_prologue %0, %arg14, %arg6, %arg7 : memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xbf16, #gpu.address_space<global>>, !attn.kv_range<64> -> !attn.kv_pipe<64x128xbf16>
          %6 = attn.tile.load_query %arg14, %arg5 : memref<1099511627776xbf16, #gpu.address_space<global>> -> !attn.query<128x128xbf16>
          %c1 = arith.constant 1 : index
          %7:2 = scf.for %arg15 = %c0 to %1 step %c1 iter_args(%arg16 = %2, %arg17 = %5) -> (!attn.softmax<128x128>, !attn.kv_pipe<64x128xbf16>) {
            %tile, %next = attn.tile.kv_next %arg17, %arg15, %arg14, %arg6, %arg7 : memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xbf16, #gpu.address_space<global>>, !attn.kv_pipe<64x128xbf16> -> !attn.kv_tile<64x128xbf16> key_transform {
            ^bb0(%arg18: f32, %arg19: f32, %arg20: i32, %arg21: i32, %arg22: i32):
              %cst = arith.constant 5.000000e-01 : f32
              %10 = arith.mulf %arg18, %cst : f32
              attn.yield %10 : f32
            }
            %8 = attn.tile.qk %6, %tile : !attn.query<128x128xbf16>, !attn.kv_tile<64x128xbf16> -> !attn.scores<128x64>
            %new_state, %probs = attn.tile.online_softmax %arg16, %8, %arg14, %tile scale(%arg12) {band_covers_mask} : !attn.softmax<128x128>, !attn.scores<128x64>, !attn.kv_tile<64x128xbf16> -> !attn.probs<128x64xbf16> logits_mask {
            ^bb0(%arg18: i32, %arg19: i32, %arg20: i32):
              %10 = arith.cmpi sle, %arg19, %arg18 : i32
              attn.yield %10 : i1
            }
            %9 = attn.tile.pv %new_state, %probs, %tile : !attn.softmax<128x128>, !attn.probs<128x64xbf16>, !attn.kv_tile<64x128xbf16>
            scf.yield %9, %next : !attn.softmax<128x128>, !attn.kv_pipe<64x128xbf16>
          }
          attn.tile.kv_drain %7#1 : !attn.kv_pipe<64x128xbf16>
          scf.yield %7#0 : !attn.softmax<128x128>
        } else {
          scf.yield %2 : !attn.softmax<128x128>
        }
        attn.tile.store %4, %arg14, %arg8, %arg9, %arg2, %arg3, %arg4 : !attn.softmax<128x128>, memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>> sink {
        ^bb0(%arg15: i32):
          %5 = arith.index_cast %arg15 : i32 to index
          %6 = memref.load %arg13[%5] : memref<1099511627776xf32, #gpu.address_space<global>>
          attn.yield %6 : f32
        }
      }
      gpu.return
    }
  }
}

// -----

// Head dim 96 (12 16-byte chunks a row: padded shared-memory rows, no
// XOR swizzle) over 3-token pages (a decode tile's 16 keys span several
// pages: one page index per copy, 6 per lane).
// Every page index read is checked against num_pages (unsigned: negative
// ones fail too); a bad one raises index_error[0] and reads page 0. Page p
// starts p * page_stride elements into the caches.
// CHECK-LABEL: gpu.func @attn_decode_bf16_d96_h32x8_p3_nhd_k4_w3_s2_c4(
// CHECK-SAME: %[[INDICES:arg[0-9]+]]: memref<{{[0-9]+}}xi32, #gpu.address_space<global>> {attn.name = "kv_indices"}
// CHECK-SAME: %[[PAGES:arg[0-9]+]]: i32 {attn.name = "num_pages"}
// CHECK-SAME: %[[STRIDE:arg[0-9]+]]: i64 {attn.name = "page_stride"}
// CHECK-SAME: %[[ERR:arg[0-9]+]]: memref<{{[0-9]+}}xi32, #gpu.address_space<global>> {attn.name = "index_error"}
// CHECK: %[[STRIDE_IDX:.*]] = arith.index_cast %[[STRIDE]] : i64 to index
// CHECK: %[[ID:.*]] = memref.load %[[INDICES]]
// CHECK-NEXT: %[[OK:.*]] = arith.cmpi ult, %[[ID]], %[[PAGES]] : i32
// CHECK: arith.select %[[OK]], %[[ID]], %{{.*}} : i32
// CHECK-NOT: memref.store
// CHECK-COUNT-5: memref.load %[[INDICES]]
// One branch, taken on the bad path only, raises the flag for all six.
// CHECK-NOT: memref.store
// CHECK-COUNT-5: arith.ori
// CHECK-NEXT: scf.if %{{.*}} {
// CHECK: memref.store %{{.*}}, %[[ERR]][%{{.*}}]
// CHECK-NEXT: }
// CHECK: memref.view {{.*}} to memref<192x104xbf16, #gpu.address_space<workgroup>>
// CHECK: arith.muli %{{.*}}, %[[STRIDE_IDX]] : index
// CHECK-COUNT-12: nvgpu.device_async_copy
// CHECK: scf.for
// CHECK-COUNT-6: nvgpu.ldmatrix {{.*}}transpose = false
// CHECK-COUNT-6: nvgpu.ldmatrix {{.*}}transpose = true
module attributes {gpu.container_module} {
  gpu.module @attn_kernels {
    gpu.func @attn_merge_bf16_d96(%arg0: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "plan"}, %arg1: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "merge_indptr"}, %arg2: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "merge_units"}, %arg3: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_o"}, %arg4: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_lse"}, %arg5: i32 {attn.name = "slot_rows"}, %arg6: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "o"}, %arg7: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "lse"}, %arg8: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "qo_indptr"}) kernel attributes {attn.launch = #attn.launch<role = merge, chip = "sm_90", threads = 256, shared_bytes = 10240, dtype = bf16, head_dim = 96, num_qo_heads = 32, num_kv_heads = 8, pdl = true>, known_block_size = array<i32: 256, 1, 1>} {
      attn.tile.merge %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6, %arg7, %arg8 : memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>
      gpu.return
    }
    gpu.func @attn_decode_bf16_d96_h32x8_p3_nhd_k4_w3_s2_c4(%arg0: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "cta_indptr"}, %arg1: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "work_items"}, %arg2: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_o"}, %arg3: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "partial_lse"}, %arg4: i32 {attn.name = "slot_rows"}, %arg5: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "q"}, %arg6: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "k_cache"}, %arg7: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "v_cache"}, %arg8: memref<1099511627776xbf16, #gpu.address_space<global>> {attn.name = "o"}, %arg9: memref<1099511627776xf32, #gpu.address_space<global>> {attn.name = "lse"}, %arg10: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "qo_indptr"}, %arg11: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "kv_indptr"}, %arg12: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "kv_indices"}, %arg13: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "kv_last_len"}, %arg14: f32 {attn.name = "sm_scale"}, %num_pages: i32 {attn.name = "num_pages"}, %page_stride: i64 {attn.name = "page_stride"}, %index_error: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "index_error"}, %plan: memref<1099511627776xi32, #gpu.address_space<global>> {attn.name = "plan"}) kernel attributes {attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96, shared_bytes = 40320, ctas_per_sm = 4, dtype = bf16, head_dim = 96, num_qo_heads = 32, num_kv_heads = 8, tile = <q = 16, kv = 16, warps = 3, gqa_pack = 4, ctas_per_sm = 4>, format = <block_cols = 3>, cost_per_item = 128, min_chunk = 512, merge = @attn_merge_bf16_d96>, known_block_size = array<i32: 96, 1, 1>} {
      attn.tile.work_loop %plan, %arg0, %arg1 requests(%arg10, %arg11, %arg13 : memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>) : memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>>, memref<1099511627776xi32, #gpu.address_space<global>> {
      ^bb0(%arg15: !attn.item):
        %0 = attn.tile.kv_range %arg15 : !attn.kv_range<16>
        %1 = attn.tile.kv_tile_count %0 : !attn.kv_range<16>
        %2 = attn.tile.softmax_init : !attn.softmax<16x96>
        %c0 = arith.constant 0 : index
        %3 = arith.cmpi sgt, %1, %c0 : index
        %4 = scf.if %3 -> (!attn.softmax<16x96>) {
          %5 = attn.tile.kv_prologue %0, %arg15, %arg6, %arg7 pages(%arg12 : memref<1099511627776xi32, #gpu.address_space<global>>, stride %page_stride) bounds(%num_pages, %index_error : memref<1099511627776xi32, #gpu.address_space<global>>) : memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xbf16, #gpu.address_space<global>>, !attn.kv_range<16> -> !attn.kv_pipe<16x96xbf16>
          %6 = attn.tile.load_query %arg15, %arg5 : memref<1099511627776xbf16, #gpu.address_space<global>> -> !attn.query<16x96xbf16>
          %c1 = arith.constant 1 : index
          %7:2 = scf.for %arg16 = %c0 to %1 step %c1 iter_args(%arg17 = %2, %arg18 = %5) -> (!attn.softmax<16x96>, !attn.kv_pipe<16x96xbf16>) {
            %tile, %next = attn.tile.kv_next %arg18, %arg16, %arg15, %arg6, %arg7 pages(%arg12 : memref<1099511627776xi32, #gpu.address_space<global>>, stride %page_stride) bounds(%num_pages, %index_error : memref<1099511627776xi32, #gpu.address_space<global>>) : memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xbf16, #gpu.address_space<global>>, !attn.kv_pipe<16x96xbf16> -> !attn.kv_tile<16x96xbf16>
            %8 = attn.tile.qk %6, %tile : !attn.query<16x96xbf16>, !attn.kv_tile<16x96xbf16> -> !attn.scores<16x16>
            %new_state, %probs = attn.tile.online_softmax %arg17, %8, %arg15, %tile scale(%arg14) {band_covers_mask} : !attn.softmax<16x96>, !attn.scores<16x16>, !attn.kv_tile<16x96xbf16> -> !attn.probs<16x16xbf16>
            %9 = attn.tile.pv %new_state, %probs, %tile : !attn.softmax<16x96>, !attn.probs<16x16xbf16>, !attn.kv_tile<16x96xbf16>
            scf.yield %9, %next : !attn.softmax<16x96>, !attn.kv_pipe<16x96xbf16>
          }
          attn.tile.kv_drain %7#1 : !attn.kv_pipe<16x96xbf16>
          scf.yield %7#0 : !attn.softmax<16x96>
        } else {
          scf.yield %2 : !attn.softmax<16x96>
        }
        attn.tile.store %4, %arg15, %arg8, %arg9, %arg2, %arg3, %arg4 : !attn.softmax<16x96>, memref<1099511627776xbf16, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>, memref<1099511627776xf32, #gpu.address_space<global>>
      }
      gpu.return
    }
  }
}
