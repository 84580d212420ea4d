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
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// The ops take tensors (value form) or memrefs (destination form, with
// `outs`); the accessors return ShapedType either way.
class Attn_TensorOrMemRefOf<list<Type> types, string what> : Type<
    Or<[RankedTensorOf<types>.predicate, MemRefOf<types>.predicate]>,
    "ranked tensor or memref of " # what, "::mlir::ShapedType">;

def Attn_IndexArray : Type<
    And<[Or<[RankedTensorOf<[I32]>.predicate, MemRefOf<[I32]>.predicate]>,
         HasAnyRankOfPred<[1]>]>,
    "1-D tensor or memref of i32", "::mlir::ShapedType">;
def Attn_KVData : Attn_TensorOrMemRefOf<[BF16, F16], "bf16 or f16">;
def Attn_StateData : Attn_TensorOrMemRefOf<[BF16, F16, F32], "bf16, f16 or f32">;
def Attn_LseData : Attn_TensorOrMemRefOf<[F32], "f32">;

//===----------------------------------------------------------------------===//
// attn.attention
//===----------------------------------------------------------------------===//

def Attn_AttentionOp : Attn_Op<"attention", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<ConditionallySpeculatable>]> {
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

    **Destination form.** `outs(%o, %lse)` names the buffers the output and
    the LSE are written to. With tensors it is the value form with explicit
    destinations (the results are the updated `outs`); with memrefs every
    data operand (query, caches, index arrays, mask, outs) is a memref and
    the op has no results: it writes `%o` and `%lse` in place. This is what
    one-shot bufferization produces (the value form without `outs` gets
    fresh `memref.alloc` destinations) and what `attn-lower-host-calls`
    turns into a runtime call. Tensors and memrefs do not mix.

    ```mlir
    attn.attention %q, %k, %v
        format(#attn.bsr<block_rows = 1, block_cols = 16>)
        indices(%qo_indptr, %kv_indptr, %kv_indices, %kv_last_len
                : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
        variants [@causal]
        outs(%o, %lse : memref<?x32x128xbf16>, memref<?x32xf32>)
        : memref<?x32x128xbf16>, memref<?x16x8x128xbf16>, memref<?x16x8x128xbf16>
    ```
  }];
  let arguments = (ins
    Attn_KVData:$query,
    Attn_KVData:$key_cache,
    Attn_KVData:$value_cache,
    Variadic<Attn_IndexArray>:$indices,
    Optional<Attn_TensorOrMemRefOf<[I1, I8], "i1 or i8">>:$mask,
    Optional<F32>:$sm_scale,
    Variadic<AnyType>:$params,
    Variadic<Attn_StateData>:$outs,
    Attn_KVFormatAttr:$format,
    OptionalAttr<FlatSymbolRefArrayAttr>:$variants,
    OptionalAttr<Attn_TileAttr>:$tile,
    OptionalAttr<TypedArrayAttrBase<Attn_TileAttr, "tile candidates">>:$tile_candidates
  );
  // (output, lse) as tensors; none in the memref destination form.
  let results = (outs Variadic<RankedTensorOf<[BF16, F16, F32]>>:$tensor_results);
  let assemblyFormat = [{
    $query `,` $key_cache `,` $value_cache
    `format` `(` $format `)`
    `indices` `(` $indices `:` type($indices) `)`
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`sm_scale` `(` $sm_scale^ `)`)?
    (`variants` $variants^)?
    (`params` `(` $params^ `:` type($params) `)`)?
    (`outs` `(` $outs^ `:` type($outs) `)`)?
    attr-dict `:` type($query) `,` type($key_cache) `,` type($value_cache)
    (`->` type($tensor_results)^)?
  }];
  let builders = [
    // The value form (no destinations), as before the destination form.
    OpBuilder<(ins "::mlir::Type":$output, "::mlir::Type":$lse,
      "::mlir::Value":$query, "::mlir::Value":$key_cache,
      "::mlir::Value":$value_cache, "::mlir::ValueRange":$indices,
      "::mlir::Value":$mask, "::mlir::Value":$sm_scale,
      "::mlir::ValueRange":$params, "::mlir::Attribute":$format,
      "::mlir::ArrayAttr":$variants, "::mlir::attn::TileAttr":$tile,
      "::mlir::ArrayAttr":$tile_candidates), [{
      build($_builder, $_state, ::mlir::TypeRange{output, lse}, query,
            key_cache, value_cache, indices, mask, sm_scale, params,
            /*outs=*/::mlir::ValueRange(), format, variants, tile,
            tile_candidates);
    }]>
  ];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether the operands are tensors (value form, with or without outs).
    bool hasTensorSemantics() {
      return ::llvm::isa<::mlir::RankedTensorType>(getQuery().getType());
    }
    /// The tensor results; null in the memref form.
    ::mlir::TypedValue<::mlir::RankedTensorType> getOutput() {
      return getTensorResults().empty() ? nullptr
          : ::llvm::cast<::mlir::TypedValue<::mlir::RankedTensorType>>(getTensorResults()[0]);
    }
    ::mlir::TypedValue<::mlir::RankedTensorType> getLse() {
      return getTensorResults().size() < 2 ? nullptr
          : ::llvm::cast<::mlir::TypedValue<::mlir::RankedTensorType>>(getTensorResults()[1]);
    }
    /// The output and LSE types in either form (outs, else results).
    ::mlir::ShapedType getOutputType() {
      return ::llvm::cast<::mlir::ShapedType>(!getOuts().empty()
          ? getOuts()[0].getType() : getTensorResults()[0].getType());
    }
    ::mlir::ShapedType getLseType() {
      return ::llvm::cast<::mlir::ShapedType>(getOuts().size() > 1
          ? getOuts()[1].getType() : getTensorResults()[1].getType());
    }
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

def Attn_MergeStatesOp : Attn_Op<"merge_states", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<ConditionallySpeculatable>]> {
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

    **Destination form.** `outs(%o, %lse)` after the states (and mask) names
    the merged output's and LSE's buffers. With memrefs (every operand a
    memref) the op has no results and writes them in place; one-shot
    bufferization gives the form without `outs` fresh destinations.

    ```mlir
    attn.merge_states %o0, %o1 lse %lse0, %lse1
        outs(%o, %lse : memref<?x32x128xf32>, memref<?x32xf32>)
        : memref<?x32x128xf32>, memref<?x32xf32>
    ```
  }];
  let arguments = (ins
    Variadic<Attn_StateData>:$outputs,
    Variadic<Attn_LseData>:$lses,
    Optional<Attn_TensorOrMemRefOf<[I8], "i8">>:$mask,
    Variadic<Attn_StateData>:$outs
  );
  // (output, lse) as tensors; none in the memref destination form.
  let results = (outs Variadic<RankedTensorOf<[BF16, F16, F32]>>:$tensor_results);
  let builders = [
    // The value form (no destinations), as before the destination form.
    OpBuilder<(ins "::mlir::Type":$output, "::mlir::Type":$lse,
      "::mlir::ValueRange":$outputs, "::mlir::ValueRange":$lses,
      "::mlir::Value":$mask), [{
      build($_builder, $_state, ::mlir::TypeRange{output, lse}, outputs, lses,
            mask, /*outs=*/::mlir::ValueRange());
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    bool hasTensorSemantics() {
      return ::llvm::isa<::mlir::RankedTensorType>(getOutputs().front().getType());
    }
    ::mlir::TypedValue<::mlir::RankedTensorType> getOutput() {
      return getTensorResults().empty() ? nullptr
          : ::llvm::cast<::mlir::TypedValue<::mlir::RankedTensorType>>(getTensorResults()[0]);
    }
    ::mlir::TypedValue<::mlir::RankedTensorType> getLse() {
      return getTensorResults().size() < 2 ? nullptr
          : ::llvm::cast<::mlir::TypedValue<::mlir::RankedTensorType>>(getTensorResults()[1]);
    }
    ::mlir::ShapedType getOutputType() {
      return ::llvm::cast<::mlir::ShapedType>(!getOuts().empty()
          ? getOuts()[0].getType() : getTensorResults()[0].getType());
    }
    ::mlir::ShapedType getLseType() {
      return ::llvm::cast<::mlir::ShapedType>(getOuts().size() > 1
          ? getOuts()[1].getType() : getTensorResults()[1].getType());
    }
  }];
}

//===----------------------------------------------------------------------===//
// attn.append_kv
//===----------------------------------------------------------------------===//

def Attn_AppendKVOp : Attn_Op<"append_kv", [
    AllTypesMatch<["key", "value"]>,
    AllTypesMatch<["key_cache", "value_cache"]>,
    DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<ConditionallySpeculatable>]> {
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

    The caches are the op's destinations (DestinationStyleOpInterface):
    with tensors the results are the updated caches; with memrefs (every
    operand a memref) the op has no results and writes the caches in place,
    which is what one-shot bufferization produces.

    ```mlir
    attn.append_kv %k_new, %v_new into %k_cache, %v_cache
        format(#attn.bsr<block_cols = 16>)
        indices(%batch, %pos, %kv_indptr, %kv_indices
                : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>)
        : memref<?x8x128xbf16> into memref<?x16x8x128xbf16>
    ```
  }];
  let arguments = (ins
    Attn_KVData:$key,
    Attn_KVData:$value,
    Attn_KVData:$key_cache,
    Attn_KVData:$value_cache,
    Variadic<Attn_IndexArray>:$indices,
    Attn_BsrAttr:$format
  );
  // The updated caches as tensors; none in the memref form.
  let results = (outs Variadic<RankedTensorOf<[BF16, F16]>>:$new_caches);
  let builders = [
    // The value form, as before the memref form.
    OpBuilder<(ins "::mlir::Type":$new_key_cache, "::mlir::Type":$new_value_cache,
      "::mlir::Value":$key, "::mlir::Value":$value, "::mlir::Value":$key_cache,
      "::mlir::Value":$value_cache, "::mlir::ValueRange":$indices,
      "::mlir::attn::BsrAttr":$format), [{
      build($_builder, $_state, ::mlir::TypeRange{new_key_cache, new_value_cache},
            key, value, key_cache, value_cache, indices, format);
    }]>
  ];
  let extraClassDeclaration = [{
    bool hasTensorSemantics() {
      return ::llvm::isa<::mlir::RankedTensorType>(getKey().getType());
    }
    /// DestinationStyleOpInterface: the caches.
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return ::mlir::MutableOperandRange(getOperation(), 2, 2);
    }
  }];
  let assemblyFormat = [{
    $key `,` $value `into` $key_cache `,` $value_cache
    `format` `(` qualified($format) `)`
    `indices` `(` $indices `:` type($indices) `)`
    attr-dict `:` type($key) `into` type($key_cache)
  }];
  let hasVerifier = 1;
}

def Attn_CopyIndicesOp : Attn_Op<"copy_indices", [
    SameVariadicOperandSize,
    DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<ConditionallySpeculatable>]> {
  let summary = "copy int32 index arrays into the start of other buffers";
  let description = [{
    Copies each source (a 1-D int32 array) into the first elements of its
    destination, for one to eight pairs at once; a destination longer than
    its source keeps its tail. This is what a CUDA-graph step does after
    planning: the plan's indptr arrays and the page table go into the
    fixed buffers the captured kernels (and the engine's own captured
    appends) read. As a kernel it is one launch for all the pairs, where
    separate copies would each cost a driver call.

    ```mlir
    %kv1, %last1 = attn.copy_indices %kv_indptr, %last_len
        into %kv_indptr_buf, %last_len_buf
        : tensor<?xi32>, tensor<?xi32> into tensor<?xi32>, tensor<?xi32>
    ```

    The destinations are the op's destinations (DestinationStyleOpInterface):
    with tensors the results are the updated buffers; with memrefs (every
    operand a memref) the op has no results and writes them in place.
  }];
  let arguments = (ins
    Variadic<Attn_IndexArray>:$sources,
    Variadic<Attn_IndexArray>:$destinations
  );
  // The updated destinations as tensors; none in the memref form.
  let results = (outs Variadic<RankedTensorOf<[I32]>>:$copied);
  let extraClassDeclaration = [{
    /// The most pairs one kernel copies.
    static constexpr int64_t kMaxPairs = 8;
    bool hasTensorSemantics() {
      return ::llvm::isa<::mlir::RankedTensorType>(
          getSources().front().getType());
    }
    /// DestinationStyleOpInterface: the destinations.
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getDestinationsMutable();
    }
  }];
  let assemblyFormat = [{
    $sources `into` $destinations attr-dict `:` type($sources) `into`
    type($destinations)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// attn.copy_by_table
//===----------------------------------------------------------------------===//

def Attn_CopyByTableOp : Attn_Op<"copy_by_table", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "copy the int32 arrays a table in memory lists";
  let description = [{
    The form of `attn.copy_indices` whose arrays are read when the kernel
    runs, not when it is launched: `table` holds `rows` rows of three i64
    words, (count, source address, destination address), and each row's
    `count` int32 words are copied from its source to its destination (a
    count of zero or less copies nothing). A CUDA graph captures a launch's
    arguments, so a captured copy_indices copies the same arrays at every
    replay; a captured copy_by_table copies whatever the table says at the
    replay, which a serving step's plan writes in pinned host memory. The
    addresses are device addresses (host memory the device maps included),
    so the op takes and writes memory it does not name: memref form only.

    ```mlir
    attn.copy_by_table %table {rows = 8} : memref<?xi64>
    ```
  }];
  let arguments = (ins
    MemRefRankOf<[I64], [1]>:$table,
    I64Attr:$rows
  );
  let extraClassDeclaration = [{
    /// The most rows one kernel reads.
    static constexpr int64_t kMaxRows = 16;
    /// i64 words a row of the table holds.
    static constexpr int64_t kRowWords = 3;
  }];
  let assemblyFormat = "$table attr-dict `:` type($table)";
  let hasVerifier = 1;
}

#endif // ATTN_DIALECT_ATTN_IR_ATTNOPS_TD
