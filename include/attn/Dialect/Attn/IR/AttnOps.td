//===- AttnOps.td - attn dialect operations ----------------*- tablegen -*-===//
//
// The operations of the attn dialect. Variant definitions (attn.variant and
// what lives inside it) are in AttnVariantOps.td; the attention family
// (attention, merge_states, append_kv) is here.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_IR_ATTNOPS_TD
#define ATTN_DIALECT_ATTN_IR_ATTNOPS_TD

include "attn/Dialect/Attn/IR/AttnDialect.td"
include "attn/Dialect/Attn/IR/AttnAttrs.td"
include "attn/Dialect/Attn/IR/AttnVariantOps.td"
include "attn/Dialect/Attn/IR/AttnTileOps.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Attn_IndexArray : RankedTensorOf<[I32], [HasAnyRankOfPred<[1]>]>;

//===----------------------------------------------------------------------===//
// attn.attention
//===----------------------------------------------------------------------===//

def Attn_AttentionOp : Attn_Op<"attention", [
    Pure, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "batched attention of ragged queries over a KV cache format";
  let description = [{
    Computes, for every query row and query head of a serving batch,
    softmax attention over the keys and values that the KV `format` gives the
    row's request, with the attention `variants` applied.

    Operands:
    * `query`: `tensor<rows x Hq x D x T>`, the packed query rows of all
      requests (`rows` is dynamic; `T` is `bf16` or `f16`).
    * `key_cache`, `value_cache`: the cache in the layout the format names
      (paged NHD `[pages, block_cols, Hkv, D]`, paged HND
      `[pages, Hkv, block_cols, D]`, ragged NHD `[tokens, Hkv, D]`, ragged HND
      `[Hkv, tokens, D]`). They may be views of one buffer.
    * `indices`: the format's i32 index arrays, view after view (see
      `#attn.bsr`).
    * `mask` (optional): a custom boolean mask, `qo_len x kv_len` per request,
      row-major, concatenated over requests; `i1` elements, or `i8` bit-packed
      little-endian with each request starting on its own byte. It replaces
      causal masking, so it cannot be combined with the `causal` variant.
    * `sm_scale` (optional, f32): the logits scale; `1/sqrt(D)` when absent.
    * `params`: the runtime parameters of the variants, variant after
      variant, in each variant's declared order.

    Results: `output` (the query's type) and `lse`, `tensor<rows x Hq x f32>`,
    the base-2 log-sum-exp of the scaled logits of each row and head, the
    convention FlashInfer reports, so `attn.merge_states` composes partial
    results. A row that sees no key gets output 0 and LSE -inf.

    Query head `h` reads KV head `h / (Hq / Hkv)`. Query row `i` of a request
    with `qo_len` rows and `kv_len` keys sits at position
    `kv_len - qo_len + i` (causal masks are bottom-right aligned).

    `tile` (or `tile_candidates`, when the query lengths are only known at
    run time) is filled in by `attn-select-tile`.

    ```mlir
    %o, %lse = attn.attention %q, %k, %v
        format(#attn.bsr<block_rows = 1, block_cols = 16>)
        indices(%qo_indptr, %kv_indptr, %kv_indices, %kv_last_len
                : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
        variants [@causal, @soft_cap] params(%cap : f32)
        : tensor<?x32x128xbf16>, tensor<?x16x8x128xbf16>, tensor<?x16x8x128xbf16>
        -> tensor<?x32x128xbf16>, tensor<?x32xf32>
    ```
  }];
  let arguments = (ins
    RankedTensorOf<[BF16, F16]>:$query,
    RankedTensorOf<[BF16, F16]>:$key_cache,
    RankedTensorOf<[BF16, F16]>:$value_cache,
    Variadic<Attn_IndexArray>:$indices,
    Optional<RankedTensorOf<[I1, I8]>>:$mask,
    Optional<F32>:$sm_scale,
    Variadic<AnyType>:$params,
    Attn_KVFormatAttr:$format,
    OptionalAttr<FlatSymbolRefArrayAttr>:$variants,
    OptionalAttr<Attn_TileAttr>:$tile,
    OptionalAttr<TypedArrayAttrBase<Attn_TileAttr, "tile candidates">>:$tile_candidates
  );
  let results = (outs
    RankedTensorOf<[BF16, F16]>:$output,
    RankedTensorOf<[F32]>:$lse
  );
  let assemblyFormat = [{
    $query `,` $key_cache `,` $value_cache
    `format` `(` $format `)`
    `indices` `(` $indices `:` type($indices) `)`
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`sm_scale` `(` $sm_scale^ `)`)?
    (`variants` $variants^)?
    (`params` `(` $params^ `:` type($params) `)`)?
    attr-dict `:` type($query) `,` type($key_cache) `,` type($value_cache)
    `->` type($output) `,` type($lse)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The format's BSR views, in operand order.
    ::llvm::SmallVector<BsrAttr> getViews() {
      return getFormatViews(getFormat());
    }
    /// The index arrays of view `view`.
    ::mlir::OperandRange getViewIndices(unsigned view);
    int64_t getNumQoHeads();
    int64_t getNumKVHeads();
    int64_t getHeadDim();
    /// Query heads per KV head.
    int64_t getGroupSize() { return getNumQoHeads() / getNumKVHeads(); }
    /// The variant names, in application order.
    ::llvm::SmallVector<::llvm::StringRef> getVariantNames();
  }];
}

//===----------------------------------------------------------------------===//
// attn.merge_states
//===----------------------------------------------------------------------===//

def Attn_MergeStatesOp : Attn_Op<"merge_states", [Pure, AttrSizedOperandSegments]> {
  let summary = "merge partial attention results by their log-sum-exp";
  let description = [{
    Attention over the union of disjoint key sets, from attention over each
    set: with base-2 LSEs `s_i` and outputs `o_i`,
    `s = log2(sum_i 2^s_i)` and `o = sum_i 2^(s_i - s) * o_i`. States whose
    LSE is -inf (no visible key) contribute nothing; if every state is -inf
    the result is output 0 and LSE -inf. This is how split KV and cascade
    attention combine their pieces.

    All partial outputs share one type, all LSEs another; the merged output
    may have another element type (f32 partials merged into bf16).

    With a `mask` (one byte per row), the rows whose byte is 0 are state 0's
    output and LSE unmerged: written into state 0's buffers, that is
    FlashInfer's `merge_state_in_place` with a mask.

    ```mlir
    %o, %lse = attn.merge_states %o0, %o1 lse %lse0, %lse1
        : tensor<?x32x128xf32>, tensor<?x32xf32> -> tensor<?x32x128xbf16>
    %o2, %lse2 = attn.merge_states %o0, %o1 lse %lse0, %lse1 mask %m
        : tensor<?x32x128xf32>, tensor<?x32xf32>, tensor<?xi8> -> tensor<?x32x128xf32>
    ```

    Outside an attention, `attn-outline-kernels` writes a merge_states
    kernel for the op (a row kernel, AttnTileOps.td); its states and output
    share one element type.
  }];
  let arguments = (ins
    Variadic<RankedTensorOf<[BF16, F16, F32]>>:$outputs,
    Variadic<RankedTensorOf<[F32]>>:$lses,
    Optional<RankedTensorOf<[I8]>>:$mask
  );
  let results = (outs
    RankedTensorOf<[BF16, F16, F32]>:$output,
    RankedTensorOf<[F32]>:$lse
  );
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// attn.append_kv
//===----------------------------------------------------------------------===//

def Attn_AppendKVOp : Attn_Op<"append_kv", [
    Pure, AllTypesMatch<["key", "value"]>,
    AllTypesMatch<["key_cache", "value_cache", "new_key_cache", "new_value_cache"]>]> {
  let summary = "write new tokens' keys and values into the pages of a cache";
  let description = [{
    Token `t` of the new keys/values (`[tokens, Hkv, D]`) belongs to request
    `batch_indices[t]` at KV position `positions[t]`, and is written to page
    `kv_indices[kv_indptr[b] + positions[t] / block_cols]`, slot
    `positions[t] % block_cols`. These are FlashInfer's
    `append_paged_kv_cache` arguments, so a page table passes unchanged. The
    format must be a single paged view.

    Index arrays, in order: `batch_indices`, `positions`, `kv_indptr`,
    `kv_indices`.

    ```mlir
    %k1, %v1 = attn.append_kv %k_new, %v_new into %k_cache, %v_cache
        format(#attn.bsr<block_cols = 16>)
        indices(%batch, %pos, %kv_indptr, %kv_indices
                : tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>)
        : tensor<?x8x128xbf16> into tensor<?x16x8x128xbf16>
    ```
  }];
  let arguments = (ins
    RankedTensorOf<[BF16, F16]>:$key,
    RankedTensorOf<[BF16, F16]>:$value,
    RankedTensorOf<[BF16, F16]>:$key_cache,
    RankedTensorOf<[BF16, F16]>:$value_cache,
    Variadic<Attn_IndexArray>:$indices,
    Attn_BsrAttr:$format
  );
  let results = (outs
    RankedTensorOf<[BF16, F16]>:$new_key_cache,
    RankedTensorOf<[BF16, F16]>:$new_value_cache
  );
  let assemblyFormat = [{
    $key `,` $value `into` $key_cache `,` $value_cache
    `format` `(` qualified($format) `)`
    `indices` `(` $indices `:` type($indices) `)`
    attr-dict `:` type($key) `into` type($key_cache)
  }];
  let hasVerifier = 1;
}

#endif // ATTN_DIALECT_ATTN_IR_ATTNOPS_TD
