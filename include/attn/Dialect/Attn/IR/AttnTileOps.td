//===- AttnTileOps.td - the tile-level form of attention ---*- tablegen -*-===//
//
// `attn-outline-kernels` rewrites every tiled attn.attention into a kernel
// (a gpu.func with an `attn.launch` contract) whose body is written with the
// ops below: the persistent loop over the planner's work items, and per item
// the query tile, the pipeline that gathers K/V tiles through the BSR
// indices, S = Q Kᵀ, the logits hooks, mask and online-softmax update,
// O += P V, and the final write. Loops over KV tiles and the test for an item
// with no visible key are plain scf ops carrying tile-typed values.
//
// Variant hooks are regions of the ops that apply them (the hooks of every
// variant of the attention composed in order, their parameters bound to the
// kernel's arguments); the target lowering inlines them. How values are
// spread over threads, and which instructions move and multiply them, is
// the target lowering's (lib/Conversion/AttnToGPU): the same tile-level
// kernel lowers to mma.sync on sm_80+ and to wgmma on sm_90a.
//
// Each op reads the tile, the KV format and the head configuration from the
// `attn.launch` contract of the kernel it is in.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_IR_ATTNTILEOPS_TD
#define ATTN_DIALECT_ATTN_IR_ATTNTILEOPS_TD

include "attn/Dialect/Attn/IR/AttnDialect.td"
include "attn/Dialect/Attn/IR/AttnAttrs.td"
include "attn/Dialect/Attn/IR/AttnTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Attn_Buffer : MemRefRankOf<[AnyType], [1]>;
def Attn_I32Buffer : MemRefRankOf<[I32], [1]>;
// A tensor map (CUtensorMap) in the kernel's parameters, by its address.
def Attn_TensorMap : Type<CPred<"::llvm::isa<::mlir::LLVM::LLVMPointerType>($_self)">,
                          "a tensor map's address (!llvm.ptr)">;
def Attn_F32Buffer : MemRefRankOf<[F32], [1]>;
def Attn_I8Buffer : MemRefRankOf<[I8], [1]>;

class Attn_TileOp<string mnemonic, list<Trait> traits = []>
    : Attn_Op<"tile." # mnemonic, traits> {
  code tileExtraClassDeclaration = [{
    /// The launch contract of the kernel this op is in.
    LaunchAttr getLaunch() { return ::mlir::attn::getEnclosingLaunch(*this); }
  }];
  let extraClassDeclaration = tileExtraClassDeclaration;
}

//===----------------------------------------------------------------------===//
// The persistent loop
//===----------------------------------------------------------------------===//

def Attn_TileWorkLoopOp : Attn_TileOp<"work_loop", [
    SingleBlock, NoTerminator, RecursiveMemoryEffects]> {
  let summary = "run this CTA's work items of the plan";
  let description = [{
    CTA `c` of the persistent grid runs the work items `cta_indptr[c'] ..
    cta_indptr[c'+1]-1` of `work_items` (the plan ABI), in order; the body
    runs once per item, with the item as its block argument. The plan's
    header (`plan`) says how many head-group copies of the stored work run:
    CTA `c` runs copy `g = c / copy_ctas` (nothing when `g >= copies`) of
    stored CTA `c' = c - g * copy_ctas`, its items moved by `g *
    copy_groups` head groups and `g * copy_slots` partial slots. The request
    arrays give each item's query rows and KV length (`kv_last_len` for
    paged formats).

    ```mlir
    attn.tile.work_loop %plan, %cta_indptr, %work_items
        requests(%qo_indptr, %kv_indptr, %kv_last_len : memref<...>, memref<...>, memref<...>)
        : memref<...>, memref<...>, memref<...> {
    ^bb0(%item: !attn.item):
      ...
    }
    ```
  }];
  let arguments = (ins
    Attn_I32Buffer:$plan,
    Attn_I32Buffer:$cta_indptr,
    Attn_I32Buffer:$work_items,
    Attn_I32Buffer:$qo_indptr,
    Attn_I32Buffer:$kv_indptr,
    Optional<Attn_I32Buffer>:$kv_last_len
  );
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $plan `,` $cta_indptr `,` $work_items
    `requests` `(` $qo_indptr `,` $kv_indptr (`,` $kv_last_len^)?
      `:` type($qo_indptr) `,` type($kv_indptr) (`,` type($kv_last_len)^)? `)`
    attr-dict `:` type($plan) `,` type($cta_indptr) `,` type($work_items) $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = tileExtraClassDeclaration # [{
    /// The work item the body runs on.
    ::mlir::BlockArgument getItem() { return getBody().getArgument(0); }
  }];
}

//===----------------------------------------------------------------------===//
// Query
//===----------------------------------------------------------------------===//

def Attn_TileLoadQueryOp : Attn_TileOp<"load_query"> {
  let summary = "load the item's query tile, applying the query transform";
  let description = [{
    Packed row `r` of the item is query token `r / gqa_pack` of its request
    and query head `head_group * gqa_pack + r % gqa_pack`. Rows past the
    item's `row_count` read as zero. The `transform` region, when present,
    is the composition of the variants' `query_transform` hooks and maps
    every element at the row's position.

    ```mlir
    %q = attn.tile.load_query %item, %query : memref<...> -> !attn.query<16x128xbf16>
    ```
  }];
  let arguments = (ins Attn_ItemType:$item, Attn_Buffer:$query);
  let results = (outs Attn_QueryType:$result);
  let regions = (region AnyRegion:$transform);
  let assemblyFormat = [{
    $item `,` $query attr-dict `:` qualified(type($query)) `->` qualified(type($result))
    (`transform` $transform^)?
  }];
  let hasVerifier = 1;
}

def Attn_TilePrefetchQueryOp : Attn_TileOp<"prefetch_query"> {
  let summary = "start loading the query tile of the CTA's next item";
  let description = [{
    Placed after the item's last `qk`: its query tile is not read again, so
    a target may start copying the rows of the next work item of the CTA
    (the item after this one in `work_items`, if the CTA has one; its
    request's first query row from `qo_indptr`) into the query tile's
    buffer while this item finishes. That item's `load_query` then waits
    for the copies instead of issuing them. Targets that do not overlap
    items lower it to nothing; the result is the same either way.

    ```mlir
    attn.tile.prefetch_query %item, %query plan(%work_items, %qo_indptr : memref<...>, memref<...>) : memref<...>
    ```
  }];
  let arguments = (ins Attn_ItemType:$item, Attn_Buffer:$query,
                       Attn_I32Buffer:$work_items, Attn_I32Buffer:$qo_indptr);
  let assemblyFormat = [{
    $item `,` $query `plan` `(` $work_items `,` $qo_indptr `:`
      type($work_items) `,` type($qo_indptr) `)` attr-dict `:` qualified(type($query))
  }];
}

//===----------------------------------------------------------------------===//
// The KV pipeline
//===----------------------------------------------------------------------===//

def Attn_TileKVRangeOp : Attn_TileOp<"kv_range", [Pure]> {
  let summary = "the keys an item's rows can see, in steps of a KV tile";
  let description = [{
    The item's keys `[kv_begin, kv_end)`, clipped to the visible band of the
    attention's masks (for rows at positions `p` in `[p_first, p_last]`:
    keys `>= p_first - lower` and `<= p_last + upper`; `lower_bound` is a
    run-time bound, negative for none), split into steps of `keys` keys. The
    range also knows its interior: the keys every row of the item sees, where
    a mask described by the band cannot bite.

    ```mlir
    %r = attn.tile.kv_range %item {upper = 0 : i64} : !attn.kv_range<64>
    %r2 = attn.tile.kv_range %item lower(%window_left) : !attn.kv_range<64>
    ```
  }];
  let arguments = (ins
    Attn_ItemType:$item,
    Optional<I32>:$lower_bound,
    OptionalAttr<I64Attr>:$lower,
    OptionalAttr<I64Attr>:$upper
  );
  let results = (outs Attn_KVRangeType:$result);
  let assemblyFormat = [{
    $item (`lower` `(` $lower_bound^ `)`)? attr-dict `:` qualified(type($result))
  }];
}

def Attn_TileKVTileCountOp : Attn_TileOp<"kv_tile_count", [Pure]> {
  let summary = "how many KV steps this thread's loop runs";
  let description = [{
    The trip count of the KV loop of the calling thread: the range's tiles,
    or, where the warps split the keys (a decode tile), this warp's share of
    them. Zero when no row sees a key.

    ```mlir
    %n = attn.tile.kv_tile_count %range : !attn.kv_range<16>
    ```
  }];
  let arguments = (ins Attn_KVRangeType:$range);
  let results = (outs Index:$count);
  let assemblyFormat = "$range attr-dict `:` qualified(type($range))";
}

def Attn_TileKVPrologueOp : Attn_TileOp<"kv_prologue", [AttrSizedOperandSegments]> {
  let summary = "start gathering an item's K/V tiles";
  let description = [{
    Starts the pipeline that brings the range's K/V tiles into shared
    memory: K and V rows come from the caches through the item's page
    indices (`kv_indices`, paged formats) or its token rows (ragged), keys
    outside the range as zeros. Call it only when the tile count is
    positive; `kv_next` then yields the tiles in order and `kv_drain` ends
    it.

    Paged formats name the distance between two pages of a cache in
    elements, `stride %page_stride` (i64): page `p` of K starts at element
    `p * page_stride` of `%k`, and V's at the same offset of `%v`, the page
    itself dense in the format's layout. `page_size * heads * dim` for
    separate K and V caches; twice that for one cache interleaving each
    page's K and V (`%v` then starts one page in), or whatever a strided
    view of a larger buffer has.

    Strided ragged formats (`strided = true`) name where each key's row
    lies, `rows(stride %token_stride, %head_stride)` (both i64, in
    elements): key `t`'s row of KV head `h` starts at element `t *
    token_stride + h * head_stride` of `%k` and of `%v`, its `dim` elements
    dense. `heads * dim, dim` for a dense NHD tensor; `dim, tokens * dim`
    for HND; a slice of a fused QKV projection has a larger token stride.
    Dense ragged formats take no strides: their rows are where `layout`
    puts them.

    A `kv_tma` tile also takes `maps(%k_map, %v_map)`, the tensor maps of
    `%k` and `%v` (ragged: dim, KV heads, tokens; paged: dim, heads and page
    rows in the layout's order, pages); whole tiles then arrive by
    `cp.async.bulk.tensor`.

    Paged formats also take `bounds(%num_pages, %index_error)`: a page
    index outside `[0, num_pages)` (the caller's page table is wrong) is
    never dereferenced. Page 0 is read in its place and a nonzero word is
    stored to `index_error[0]`, so the caller learns of it without a device
    fault (docs/Kernels.md, "Page-index checks").

    ```mlir
    %pipe = attn.tile.kv_prologue %range, %item, %k, %v
        pages(%kv_indices : memref<...>, stride %page_stride)
        bounds(%num_pages, %index_error : memref<...>)
        : memref<...>, memref<...>, !attn.kv_range<16> -> !attn.kv_pipe<16x128xbf16>
    ```

    Strided ragged:

    ```mlir
    %pipe = attn.tile.kv_prologue %range, %item, %k, %v
        rows(stride %token_stride, %head_stride)
        : memref<...>, memref<...>, !attn.kv_range<128> -> !attn.kv_pipe<128x128xbf16>
    ```
  }];
  let arguments = (ins
    Attn_KVRangeType:$range,
    Attn_ItemType:$item,
    Attn_Buffer:$key_cache,
    Attn_Buffer:$value_cache,
    Optional<Attn_I32Buffer>:$kv_indices,
    Optional<I64>:$page_stride,
    Optional<I64>:$token_stride,
    Optional<I64>:$head_stride,
    Optional<I32>:$num_pages,
    Optional<Attn_I32Buffer>:$index_error,
    Optional<Attn_TensorMap>:$key_map,
    Optional<Attn_TensorMap>:$value_map
  );
  let results = (outs Attn_KVPipeType:$pipe);
  let assemblyFormat = [{
    $range `,` $item `,` $key_cache `,` $value_cache
    (`pages` `(` $kv_indices^ `:` type($kv_indices) `,` `stride` $page_stride `)`)?
    (`rows` `(` `stride` $token_stride^ `,` $head_stride `)`)?
    (`bounds` `(` $num_pages^ `,` $index_error `:` type($index_error) `)`)?
    (`maps` `(` $key_map^ `,` $value_map `:` type($key_map) `,` type($value_map) `)`)?
    attr-dict `:` type($key_cache) `,` type($value_cache) `,` qualified(type($range))
    `->` qualified(type($pipe))
  }];
  let hasVerifier = 1;
}

def Attn_TileKVNextOp : Attn_TileOp<"kv_next", [AllTypesMatch<["pipe", "next"]>,
                                                  AttrSizedOperandSegments]> {
  let summary = "wait for the next K/V tile and keep the pipeline full";
  let description = [{
    Step `iteration` of the KV loop: returns the tile that step computes on,
    once it has landed (with the `key_transform` region, the composition of
    the variants' key transforms, applied to its keys at their positions),
    and refills the pipeline. Paged formats find and check their pages as
    `kv_prologue` does (`pages`, `bounds`), strided ragged ones address
    their rows alike (`rows`), and `kv_tma` tiles load through the same
    tensor maps (`maps`).

    ```mlir
    %kv, %next = attn.tile.kv_next %pipe, %j, %item, %k, %v
        pages(%kv_indices : memref<...>, stride %page_stride)
        bounds(%num_pages, %index_error : memref<...>)
        : memref<...>, memref<...>, !attn.kv_pipe<16x128xbf16> -> !attn.kv_tile<16x128xbf16>
    ```
  }];
  let arguments = (ins
    Attn_KVPipeType:$pipe,
    Index:$iteration,
    Attn_ItemType:$item,
    Attn_Buffer:$key_cache,
    Attn_Buffer:$value_cache,
    Optional<Attn_I32Buffer>:$kv_indices,
    Optional<I64>:$page_stride,
    Optional<I64>:$token_stride,
    Optional<I64>:$head_stride,
    Optional<I32>:$num_pages,
    Optional<Attn_I32Buffer>:$index_error,
    Optional<Attn_TensorMap>:$key_map,
    Optional<Attn_TensorMap>:$value_map
  );
  let results = (outs Attn_KVTileType:$tile, Attn_KVPipeType:$next);
  let regions = (region AnyRegion:$key_transform);
  let assemblyFormat = [{
    $pipe `,` $iteration `,` $item `,` $key_cache `,` $value_cache
    (`pages` `(` $kv_indices^ `:` type($kv_indices) `,` `stride` $page_stride `)`)?
    (`rows` `(` `stride` $token_stride^ `,` $head_stride `)`)?
    (`bounds` `(` $num_pages^ `,` $index_error `:` type($index_error) `)`)?
    (`maps` `(` $key_map^ `,` $value_map `:` type($key_map) `,` type($value_map) `)`)?
    attr-dict `:` type($key_cache) `,` type($value_cache) `,` qualified(type($pipe))
    `->` qualified(type($tile)) (`key_transform` $key_transform^)?
  }];
  let hasVerifier = 1;
}

def Attn_TileKVDrainOp : Attn_TileOp<"kv_drain"> {
  let summary = "wait for the copies still in flight after the last tile";
  let description = [{
    The pipeline issues copies ahead of the loop; they must land before the
    shared memory they fill is reused.

    ```mlir
    attn.tile.kv_drain %pipe : !attn.kv_pipe<16x128xbf16>
    ```
  }];
  let arguments = (ins Attn_KVPipeType:$pipe);
  let assemblyFormat = "$pipe attr-dict `:` qualified(type($pipe))";
}

//===----------------------------------------------------------------------===//
// Arithmetic of one tile
//===----------------------------------------------------------------------===//

def Attn_TileQKOp : Attn_TileOp<"qk", [Pure]> {
  let summary = "S = Q Kᵀ for one K/V tile";
  let description = [{
    `in_flight`: the product may still be running when the op is done (a
    target with asynchronous GEMMs issues it and moves on); the first op
    that reads the scores awaits it (`online_softmax`'s `await_scores`).
    Targets whose GEMMs are synchronous ignore it.

    ```mlir
    %s = attn.tile.qk %q, %kv : !attn.query<16x128xbf16>, !attn.kv_tile<16x128xbf16> -> !attn.scores<16x16>
    ```
  }];
  let arguments = (ins Attn_QueryType:$query, Attn_KVTileType:$tile,
                       UnitAttr:$in_flight);
  let results = (outs Attn_ScoresType:$scores);
  let assemblyFormat = [{
    $query `,` $tile attr-dict `:` qualified(type($query)) `,` qualified(type($tile)) `->` qualified(type($scores))
  }];
  let hasVerifier = 1;
}

def Attn_TileSoftmaxInitOp : Attn_TileOp<"softmax_init", [Pure]> {
  let summary = "the online-softmax state before any key";
  let description = [{
    Running maximum -inf, sum 0, accumulator 0.

    ```mlir
    %st = attn.tile.softmax_init : !attn.softmax<16x128>
    ```
  }];
  let results = (outs Attn_SoftmaxType:$state);
  let assemblyFormat = "attr-dict `:` qualified(type($state))";
}

def Attn_TileOnlineSoftmaxOp : Attn_TileOp<"online_softmax", [
    AttrSizedOperandSegments, AllTypesMatch<["state", "new_state"]>]> {
  let summary = "logits hooks, masks and the online-softmax update of one tile";
  let description = [{
    For element (row, key) of the tile: the logit is `s * sm_scale`, then
    the `logits_transform` region (the variants' transforms, composed). The
    key is dropped (its probability 0) when it lies outside the item's
    range, when the `logits_mask` region (the variants' masks, ANDed)
    rejects it, or when the bit-packed `custom_mask` clears it (key `j` of
    query token `i` of request `b` is bit `mask_indptr[b] * 8 + i * kv_len
    + j`). The running maximum and sum of each row are updated in base 2,
    the accumulator rescaled, and the probabilities of the tile returned.

    `band_covers_mask`: the `logits_mask` keeps every key inside the
    variants' visible band (all masks declare a band), so tiles in the
    range's interior skip the element mask.

    `await_scores = n` / `await_acc = n`: the scores, or the state's
    accumulator, come from GEMMs left `in_flight`; the op waits for them
    (leaving at most `n` of the thread's later GEMMs running) before it
    reads the scores, and before it rescales the accumulator, which is its
    last step: in the PTX the softmax of a tile comes while the previous
    tile's P V runs (the software-pipelined K/V loop of docs/Kernels.md,
    which says where ptxas moves the wait).

    ```mlir
    %st1, %p = attn.tile.online_softmax %st0, %s, %item, %kv scale(%sm_scale)
        : !attn.softmax<16x128>, !attn.scores<16x16>, !attn.kv_tile<16x128xbf16>
        -> !attn.probs<16x16xbf16>
        logits_mask {
        ^bb0(%q_pos: i32, %k_pos: i32, %head: i32):
          %keep = arith.cmpi sle, %k_pos, %q_pos : i32
          attn.yield %keep : i1
        }
    ```
  }];
  let arguments = (ins
    Attn_SoftmaxType:$state,
    Attn_ScoresType:$scores,
    Attn_ItemType:$item,
    Attn_KVTileType:$tile,
    F32:$sm_scale,
    Optional<MemRefRankOf<[I8], [1]>>:$custom_mask,
    Optional<Attn_I32Buffer>:$mask_indptr,
    UnitAttr:$band_covers_mask,
    OptionalAttr<I64Attr>:$await_scores,
    OptionalAttr<I64Attr>:$await_acc
  );
  let results = (outs Attn_SoftmaxType:$new_state, Attn_ProbsType:$probs);
  let regions = (region AnyRegion:$logits_transform, AnyRegion:$logits_mask);
  let assemblyFormat = [{
    $state `,` $scores `,` $item `,` $tile `scale` `(` $sm_scale `)`
    (`custom_mask` `(` $custom_mask^ `,` $mask_indptr `:` type($custom_mask) `,` type($mask_indptr) `)`)?
    attr-dict `:` qualified(type($state)) `,` qualified(type($scores)) `,` qualified(type($tile)) `->` qualified(type($probs))
    (`logits_transform` $logits_transform^)?
    (`logits_mask` $logits_mask^)?
  }];
  let hasVerifier = 1;
}

def Attn_TilePVOp : Attn_TileOp<"pv", [Pure, AllTypesMatch<["state", "new_state"]>]> {
  let summary = "O += P V for one K/V tile";
  let description = [{
    `in_flight`: as for `qk`; the next op to touch the accumulator awaits
    it (`online_softmax`'s `await_acc`).

    ```mlir
    %st2 = attn.tile.pv %st1, %p, %kv
        : !attn.softmax<16x128>, !attn.probs<16x16xbf16>, !attn.kv_tile<16x128xbf16>
    ```
  }];
  let arguments = (ins Attn_SoftmaxType:$state, Attn_ProbsType:$probs,
                       Attn_KVTileType:$tile, UnitAttr:$in_flight);
  let results = (outs Attn_SoftmaxType:$new_state);
  let assemblyFormat = [{
    $state `,` $probs `,` $tile attr-dict `:` qualified(type($state)) `,` qualified(type($probs)) `,` qualified(type($tile))
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Results
//===----------------------------------------------------------------------===//

def Attn_TileStoreOp : Attn_TileOp<"store"> {
  let summary = "normalise a tile's rows and write them";
  let description = [{
    Where the warps split the keys, first combines their states. The item
    that comes first in its tile (flag FirstChunk) adds the `sink` region's
    logit to each row's denominator. A Direct item writes its rows of
    `output` (after the `output_transform` region) and their base-2 `lse`; a
    split item writes rows `0 .. row_count-1` of its partial slot (f32,
    untransformed) and their LSE, for the merge kernel. A row that saw no key
    writes output 0 and LSE -inf. Rows of `output` are written in 16-byte
    chunks (the lanes that share a row trade their elements first), so its
    base must be 16-byte aligned.

    ```mlir
    attn.tile.store %st, %item, %o, %lse, %partial_o, %partial_lse, %slot_rows
        : !attn.softmax<16x128>, memref<...>, memref<...>, memref<...>, memref<...>
    ```
  }];
  let arguments = (ins
    Attn_SoftmaxType:$state,
    Attn_ItemType:$item,
    Attn_Buffer:$output,
    Attn_F32Buffer:$lse,
    Attn_F32Buffer:$partial_output,
    Attn_F32Buffer:$partial_lse,
    I32:$slot_rows
  );
  let regions = (region AnyRegion:$sink, AnyRegion:$output_transform);
  let assemblyFormat = [{
    $state `,` $item `,` $output `,` $lse `,` $partial_output `,` $partial_lse `,` $slot_rows
    attr-dict `:` qualified(type($state)) `,` type($output) `,` type($lse) `,` type($partial_output)
    `,` type($partial_lse)
    (`sink` $sink^)? (`output_transform` $output_transform^)?
  }];
  let hasVerifier = 1;
}

def Attn_TileMergeOp : Attn_TileOp<"merge", [AttrSizedOperandSegments]> {
  let summary = "the merge kernel of split KV: combine partial slots by LSE";
  let description = [{
    Merge unit `u` combines partial slots `merge_indptr[u] ..
    merge_indptr[u+1]-1` row by row: with base-2 LSEs `s_i`,
    `m = max s_i`, `o = sum 2^(s_i - m) o_i / sum 2^(s_i - m)`,
    `lse = m + log2(sum 2^(s_i - m))` (all -inf gives 0 / -inf), and writes
    the rows of `output` and `lse`. Unit `u` of a plan with head-group
    copies is stored unit `u mod copy_units` of copy `u / copy_units`, its
    head group and slots moved by that copy's (the plan ABI). The head
    configuration comes from the plan's header, so one kernel serves every
    head count of its head dim;
    with an `output_transform` region, the merged row is transformed first,
    at the query's position (from `kv_indptr`, `kv_last_len`).

    ```mlir
    attn.tile.merge %plan, %merge_indptr, %merge_units, %partial_o, %partial_lse, %slot_rows,
        %o, %lse, %qo_indptr : memref<...>, ...
    ```
  }];
  let arguments = (ins
    Attn_I32Buffer:$plan,
    Attn_I32Buffer:$merge_indptr,
    Attn_I32Buffer:$merge_units,
    Attn_F32Buffer:$partial_output,
    Attn_F32Buffer:$partial_lse,
    I32:$slot_rows,
    Attn_Buffer:$output,
    Attn_F32Buffer:$lse,
    Attn_I32Buffer:$qo_indptr,
    Optional<Attn_I32Buffer>:$kv_indptr,
    Optional<Attn_I32Buffer>:$kv_last_len
  );
  let regions = (region AnyRegion:$output_transform);
  let assemblyFormat = [{
    $plan `,` $merge_indptr `,` $merge_units `,` $partial_output `,` $partial_lse `,`
    $slot_rows `,` $output `,` $lse `,` $qo_indptr
    (`positions` `(` $kv_indptr^ (`,` $kv_last_len^)? `:` type($kv_indptr) (`,` type($kv_last_len)^)? `)`)?
    attr-dict `:` type($plan) `,` type($merge_indptr) `,` type($merge_units) `,`
    type($partial_output) `,` type($partial_lse) `,` type($output) `,` type($lse) `,`
    type($qo_indptr)
    (`output_transform` $output_transform^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Row kernels: attn.merge_states and attn.append_kv outside attention
//===----------------------------------------------------------------------===//
//
// The body of a row kernel (launch role merge_states / append_kv): a
// grid-strided loop over `num_rows` independent rows, row r being token
// r / heads, head r % heads, of head_dim elements. Strides are in elements;
// within a token the heads are dense (head h at h * head_dim).

def Attn_TileMergeStatesOp : Attn_TileOp<"merge_states", [AttrSizedOperandSegments]> {
  let summary = "the body of a merge_states kernel: N states merged row by row";
  let description = [{
    Row `r` (token `t = r / heads`, head `h = r % heads`) of state `i` is
    `states[i][t * state_stride + h * D ...]` with base-2 LSE
    `lses[i][t * lse_stride + h]`; the merged row (as `attn.merge_states`:
    all states -inf give 0 / -inf) goes to `output[t * output_stride + h * D
    ...]` and `merged_lse[t * merged_lse_stride + h]`. With `mask` (a byte
    per token), the rows of tokens whose byte is 0 are left as they are
    (FlashInfer's `merge_state_in_place` writes into state 0).

    ```mlir
    attn.tile.merge_states %num_rows, %heads
        states(%v0, %v1 : memref<1099511627776xbf16, 1>, memref<1099511627776xbf16, 1>) stride %vs
        lses(%s0, %s1 : memref<1099511627776xf32, 1>, memref<1099511627776xf32, 1>) stride %ss
        into %o : memref<1099511627776xbf16, 1> stride %os, %lse : memref<1099511627776xf32, 1> stride %ls
    ```
  }];
  let arguments = (ins
    I32:$num_rows,
    I32:$heads,
    Variadic<Attn_Buffer>:$states,
    I64:$state_stride,
    Variadic<Attn_F32Buffer>:$lses,
    I64:$lse_stride,
    Attn_Buffer:$output,
    I64:$output_stride,
    Attn_F32Buffer:$merged_lse,
    I64:$merged_lse_stride,
    Optional<Attn_I8Buffer>:$mask
  );
  let assemblyFormat = [{
    $num_rows `,` $heads
    `states` `(` $states `:` type($states) `)` `stride` $state_stride
    `lses` `(` $lses `:` type($lses) `)` `stride` $lse_stride
    `into` $output `:` type($output) `stride` $output_stride `,`
    $merged_lse `:` type($merged_lse) `stride` $merged_lse_stride
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    attr-dict
  }];
  let hasVerifier = 1;
}

def Attn_TileAppendKVOp : Attn_TileOp<"append_kv"> {
  let summary = "the body of an append_kv kernel: new tokens' K/V into pages";
  let description = [{
    Row `r` (token `t = r / heads`, head `h = r % heads`) of `key` / `value`
    (`[t * key_stride + h * D ...]`, `[t * value_stride + h * D ...]`)
    belongs to request `b = batch_indices[t]` at position `p =
    positions[t]`, and is written to page `kv_indices[kv_indptr[b] + p / P]`
    (P: the contract format's page size), slot `p % P`: element `d` of head
    `h` at `page * page_stride + (p % P) * slot_stride + h * head_stride + d`
    of `key_cache` / `value_cache` (NHD and HND, and the K/V halves of one
    combined cache, differ only in the strides). A row whose request is not
    in `[0, batch)`, whose position is negative or past the request's pages,
    or whose page is not in `[0, num_pages)` writes nothing and counts
    itself in `dropped[0]`.

    ```mlir
    attn.tile.append_kv %num_rows, %heads, %batch, %num_pages
        tokens(%k, %v : memref<...>, memref<...>) stride(%ks, %vs)
        at(%batch_indices, %positions, %kv_indptr, %kv_indices
           : memref<...>, memref<...>, memref<...>, memref<...>)
        into(%k_cache, %v_cache : memref<...>, memref<...>)
        stride(%page_stride, %slot_stride, %head_stride)
        dropped %dropped : memref<...>
    ```
  }];
  let arguments = (ins
    I32:$num_rows,
    I32:$heads,
    I32:$batch,
    I32:$num_pages,
    Attn_Buffer:$key,
    Attn_Buffer:$value,
    I64:$key_stride,
    I64:$value_stride,
    Attn_I32Buffer:$batch_indices,
    Attn_I32Buffer:$positions,
    Attn_I32Buffer:$kv_indptr,
    Attn_I32Buffer:$kv_indices,
    Attn_Buffer:$key_cache,
    Attn_Buffer:$value_cache,
    I64:$page_stride,
    I64:$slot_stride,
    I64:$head_stride,
    Attn_I32Buffer:$dropped
  );
  let assemblyFormat = [{
    $num_rows `,` $heads `,` $batch `,` $num_pages
    `tokens` `(` $key `,` $value `:` type($key) `,` type($value) `)`
    `stride` `(` $key_stride `,` $value_stride `)`
    `at` `(` $batch_indices `,` $positions `,` $kv_indptr `,` $kv_indices `:`
      type($batch_indices) `,` type($positions) `,` type($kv_indptr) `,` type($kv_indices) `)`
    `into` `(` $key_cache `,` $value_cache `:` type($key_cache) `,` type($value_cache) `)`
    `stride` `(` $page_stride `,` $slot_stride `,` $head_stride `)`
    `dropped` $dropped `:` type($dropped)
    attr-dict
  }];
  let hasVerifier = 1;
}

def Attn_TileCopyIndicesOp : Attn_TileOp<"copy_indices", [SameVariadicOperandSize]> {
  let summary = "the body of a copy_indices kernel: int32 arrays, one launch";
  let description = [{
    Copies `counts[i]` words of `sources[i]` into `destinations[i]` for
    every pair. The words of all pairs form one index space of `num_rows`
    (the sum of the counts, which the runtime passes as the launch's row
    count), strided over the grid: a thread's word belongs to the first
    pair whose running sum of counts passes it. Words at or past the sum
    of the counts copy nothing, so a `num_rows` larger than the counts
    never reads or writes outside them.

    ```mlir
    attn.tile.copy_indices %num_rows counts(%n0, %n1 : i32, i32)
        from(%s0, %s1 : memref<?xi32>, memref<?xi32>)
        into(%d0, %d1 : memref<?xi32>, memref<?xi32>)
    ```
  }];
  let arguments = (ins
    I32:$num_rows,
    Variadic<I32>:$counts,
    Variadic<Attn_I32Buffer>:$sources,
    Variadic<Attn_I32Buffer>:$destinations
  );
  let assemblyFormat = [{
    $num_rows `counts` `(` $counts `:` type($counts) `)`
    `from` `(` $sources `:` type($sources) `)`
    `into` `(` $destinations `:` type($destinations) `)`
    attr-dict
  }];
  let hasVerifier = 1;
}

def Attn_TileCopyByTableOp : Attn_TileOp<"copy_by_table"> {
  let summary = "the body of a copy_by_table kernel: the table read at run time";
  let description = [{
    `attn.tile.copy_indices` with each pair's count, source and destination
    loaded from row i of `table` (three i64 words: count, source address,
    destination address; `rows` rows) when the kernel runs. The words of
    all rows form one index space strided over the grid, as in
    copy_indices, up to the sum of the counts or `num_rows`, whichever is
    less: `num_rows` is the launch's capacity, fixed when a CUDA graph
    captures the launch (it sizes the grid), and the writer of the table
    keeps the sum within it (words past it would not be copied).

    ```mlir
    attn.tile.copy_by_table %num_rows table(%table : memref<?xi64>) {rows = 8}
    ```
  }];
  let arguments = (ins
    I32:$num_rows,
    MemRefRankOf<[I64], [1]>:$table,
    I64Attr:$rows
  );
  let assemblyFormat = [{
    $num_rows `table` `(` $table `:` type($table) `)` attr-dict
  }];
  let hasVerifier = 1;
}

#endif // ATTN_DIALECT_ATTN_IR_ATTNTILEOPS_TD
