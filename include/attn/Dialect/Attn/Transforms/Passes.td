//===- Passes.td - attn transform passes -------------------*- tablegen -*-===//
//
// The passes that prepare attn.attention for kernel generation: variant
// expansion, composed-format decomposition, tile selection, GQA packing.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_TRANSFORMS_PASSES_TD
#define ATTN_DIALECT_ATTN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AttnExpandVariantsPass : Pass<"attn-expand-variants", "::mlir::ModuleOp"> {
  let summary = "materialize the built-in variants an attention uses";
  let description = [{
    Every variant name an `attn.attention` lists that the module does not
    define, and that names a built-in, is copied from the built-in library
    into the module as an `attn.variant`, so later passes see only hook
    regions. Unknown names are an error.

    Before:
    ```mlir
    %o, %lse = attn.attention ... variants [@causal] ...
    ```
    After:
    ```mlir
    attn.variant @causal {
      attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) {
        %keep = arith.cmpi sle, %k_pos, %q_pos : i32
        attn.yield %keep : i1
      }
    }
    %o, %lse = attn.attention ... variants [@causal] ...
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect"];
}

def AttnDecomposeComposedPass : Pass<"attn-decompose-composed"> {
  let summary = "cascade attention: one attention per view of a composed format";
  let description = [{
    An `attn.attention` over `#attn.composed<[v0, v1, ...]>` becomes one
    `attn.attention` per view, each with that view's index arrays, merged by
    `attn.merge_states`. The KV cache operands are shared: no KV moves.

    Before:
    ```mlir
    %o, %lse = attn.attention %q, %k, %v
        format(#attn.composed<[#attn.bsr<block_rows = 64, block_cols = 16>,
                               #attn.bsr<block_rows = 1, block_cols = 16>]>)
        indices(%p0, %p1, %p2, %p3, %s0, %s1, %s2, %s3 : ...) : ...
    ```
    After:
    ```mlir
    %o0, %lse0 = attn.attention %q, %k, %v
        format(#attn.bsr<block_rows = 64, block_cols = 16>)
        indices(%p0, %p1, %p2, %p3 : ...) : ...
    %o1, %lse1 = attn.attention %q, %k, %v
        format(#attn.bsr<block_rows = 1, block_cols = 16>)
        indices(%s0, %s1, %s2, %s3 : ...) : ...
    %o, %lse = attn.merge_states %o0, %o1 lse %lse0, %lse1 : ...
    ```
  }];
}

def AttnSelectTilePass : Pass<"attn-select-tile"> {
  let summary = "choose the query tile, KV tile, warps and pipeline depth";
  let description = [{
    Sets `tile` on every `attn.attention` that has none. The query tile
    follows the expected packed query length per request: the format's
    `block_rows` times the GQA group (when heads are packed as rows), or the
    static query length when the query and `qo_indptr` shapes are static.

    | packed rows | q tile |
    | --- | --- |
    | <= 16 | 16 (decode: GQA group as rows) |
    | <= 64 | 64 |
    | larger | 128 |

    (The planner applies the same rule to each batch's average, see
    below.) Decode tiles (q = 16) take the configuration measured best on
    the H200: 3 warps, each walking its own 16-token KV tiles through a
    2-stage pipeline, with 4 CTAs resident per SM. Taller tiles give each
    warp 16 rows and share K/V tiles near 16 KB, with as many stages as the
    shared memory of `chip` holds (a 64-row tile keeps two CTAs per SM).

    When the format's `block_rows` is `?` (query lengths vary by batch:
    prefill, chunked prefill, speculative verification), or with
    `candidates=true`, the pass instead lists the 16-, 64- and 128-row tiles
    in `tile_candidates`: the kernels of all of them are generated, and the
    runtime planner picks one per batch from its average packed query
    length. A tile the IR already has is checked against `chip` (shared
    memory per CTA and per SM, threads per SM) and kept.

    With `kv-tma=true`, the tiles the pass chooses load whole K/V tiles by
    TMA (`kv_tma`) where the tile and the format can: the warp-specialized
    wgmma tiles of sm_90a, over ragged K/V or pages that are boxes
    (`getKVBoxRows`). Other tiles and page sizes keep cp.async.

    Before:
    ```mlir
    attn.attention ... format(#attn.bsr<block_rows = 1, block_cols = 16>) ...
        : tensor<?x32x128xbf16>, ...
    ```
    After (`chip=sm_90`, GQA 32/8):
    ```mlir
    attn.attention ... {tile = #attn.tile<q = 16, kv = 16, warps = 3, ctas_per_sm = 4>} ...
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"::mlir::attn::kDefaultChip",
           "the target GPU (a chip TargetInfo knows: sm_80 ... sm_120a)">,
    Option<"candidates", "candidates", "bool", /*default=*/"false",
           "list every fitting tile in tile_candidates for the planner">,
    Option<"kvTma", "kv-tma", "bool", /*default=*/"false",
           "load whole K/V tiles by TMA in the tiles it chooses where the "
           "tile and the format can (kv_tma)">,
  ];
}

def AttnPackGQAPass : Pass<"attn-pack-gqa"> {
  let summary = "pack the query heads that share a KV head into the rows of one tile";
  let description = [{
    With grouped-query attention, `Hq / Hkv` query heads read the same KV
    head. When a request contributes fewer query rows than the tile holds
    (decode, short appends), the kernel stacks the heads of a group as rows,
    so one KV load serves the whole group: decode with group 8 fills 8 rows
    of a 16-row tile instead of 1. The pass sets `gqa_pack` of the tile (and
    of every candidate) to the largest divisor of the group that still fits
    the expected rows into the tile (one row per request when the lengths
    vary: a candidate is picked for batches whose packed rows fit it); MHA
    (group 1) is left alone.

    Before:
    ```mlir
    attn.attention ... {tile = #attn.tile<q = 16, kv = 16, warps = 3>}
        : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, ...
    ```
    After:
    ```mlir
    attn.attention ... {tile = #attn.tile<q = 16, kv = 16, warps = 3, gqa_pack = 4>} ...
    ```
  }];
}

def AttnOutlineKernelsPass : Pass<"attn-outline-kernels", "::mlir::ModuleOp"> {
  let summary = "outline every tiled attention into kernels in the tile-level form";
  let description = [{
    For every `attn.attention` with a `tile` (or `tile_candidates`), writes
    its kernels into `gpu.module @attn_kernels`: one attention kernel per
    tile, and the merge kernel of split KV it pairs with. A kernel is a
    `gpu.func` with its launch contract (`attn.launch`: threads, dynamic
    shared memory, tile, format, heads, the planner's cost model, the band
    of its masks, its merge kernel), its arguments named (`attn.name`), and
    a body in the tile-level form: the persistent loop over the CTA's work
    items, the K/V pipeline, S = Q Kᵀ, the online softmax, O += P V and the
    write, with the variants' hooks composed into the regions of the ops
    that apply them. The attention records its kernels in `attn.kernels`.
    The module becomes a `gpu.container_module`; `convert-attn-to-gpu` then
    lowers the tile ops for the chip.

    An `attn.merge_states` or `attn.append_kv` in host code becomes a row
    kernel (role `merge_states` / `append_kv`: a grid-strided loop over
    tokens x heads rows, whose head count and strides are arguments), its
    body one `attn.tile.merge_states` / `attn.tile.append_kv`; the op
    records it in `attn.kernels` too.

    Before:
    ```mlir
    %o, %lse = attn.attention %q, %k, %v format(#attn.bsr<block_cols = 16>) ...
        variants [@causal] {tile = #attn.tile<q = 16, kv = 16, warps = 3, gqa_pack = 4, ctas_per_sm = 4>}
    ```
    After:
    ```mlir
    %o, %lse = attn.attention ... {attn.kernels = [@attn_kernels::@attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_causal], ...}
    gpu.module @attn_kernels {
      gpu.func @attn_merge_bf16_d128(...) kernel attributes {attn.launch = #attn.launch<role = merge, ...>} {
        attn.tile.merge ...
      }
      gpu.func @attn_decode_bf16_d128_h32x8_p16_nhd_k4_w3_s2_c4_causal(...)
          kernel attributes {attn.launch = #attn.launch<role = attention, ...>} {
        attn.tile.work_loop %cta_indptr, %work_items requests(...) {
        ^bb0(%item: !attn.item):
          %range = attn.tile.kv_range %item {upper = 0 : i64} : !attn.kv_range<16>
          ...
        }
        gpu.return
      }
    }
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", /*default=*/"::mlir::attn::kDefaultChip",
           "the target GPU (the launch contracts' chip)">,
    Option<"gpuModuleName", "gpu-module", "std::string",
           /*default=*/"\"attn_kernels\"",
           "the gpu.module the kernels go into">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // ATTN_DIALECT_ATTN_TRANSFORMS_PASSES_TD
