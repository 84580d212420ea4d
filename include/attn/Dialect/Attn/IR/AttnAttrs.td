//===- AttnAttrs.td - KV formats, tiles, variant params ----*- tablegen -*-===//
//
// KV formats are attributes: one block-sparse-row family covers paged,
// ragged and token-tree caches, and a composed format sees one cache through
// several BSR views. The tile attribute records what the passes chose.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_IR_ATTNATTRS_TD
#define ATTN_DIALECT_ATTN_IR_ATTNATTRS_TD

include "attn/Dialect/Attn/IR/AttnDialect.td"
include "attn/Dialect/Attn/IR/AttnEnums.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

class Attn_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Attn_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

class Attn_DefaultEnumParameter<EnumAttrInfo info, string default>
    : EnumParameter<info> {
  let defaultValue = default;
}

// A yes/no field, printed `true` / `false` and absent when false.
def Attn_FlagParameter : AttrParameter<"bool", "a flag"> {
  let parser = "::mlir::attn::parseFlag($_parser)";
  let printer = "$_printer << ($_self ? \"true\" : \"false\")";
  let defaultValue = "false";
}

// Query rows per block row of a BSR format: a count, or `?` when the
// requests' query lengths vary from batch to batch (prefill, append).
def Attn_BlockRowsParameter : AttrParameter<"int64_t", "query rows per block row"> {
  let parser = "::mlir::attn::parseBlockRows($_parser)";
  let printer = "::mlir::attn::printBlockRows($_printer, $_self)";
  let defaultValue = "1";
}

//===----------------------------------------------------------------------===//
// #attn.bsr
//===----------------------------------------------------------------------===//

def Attn_BsrAttr : Attn_Attr<"Bsr", "bsr"> {
  let summary = "a KV cache as a block-sparse-row matrix";
  let description = [{
    Attention over a serving batch is a sparse matrix: rows are query rows
    (packed over the requests of the batch), columns are KV positions of the
    cache, and a non-zero block means "these queries attend to these keys".
    `#attn.bsr` describes that matrix with blocks of `block_rows` query rows
    by `block_cols` KV tokens. Every KV layout a serving engine uses is one of
    its forms:

    | form | block_cols | indexing | index arrays (i32, in operand order) |
    | --- | --- | --- | --- |
    | paged KV | page size | paged | `qo_indptr`, `kv_indptr`, `kv_indices`, `kv_last_len` |
    | token tree (column vector) | 1 | paged | `qo_indptr`, `kv_indptr`, `kv_indices` |
    | ragged / contiguous KV | 1 | ragged | `qo_indptr`, `kv_indptr` |

    The index arrays keep their CSR meaning, so a vLLM/FlashInfer page table
    passes unchanged. For a batch of `B` requests:

    * `qo_indptr[B+1]`: request `b` owns packed query rows
      `[qo_indptr[b], qo_indptr[b+1])`.
    * paged: `kv_indptr[B+1]` counts blocks; request `b` owns the blocks
      `kv_indices[kv_indptr[b] .. kv_indptr[b+1])`, in order; each is the index
      of a page (the leading dimension of the K/V cache tensors).
      `kv_last_len[B]` is how many tokens of the request's last page are used,
      in `[1, block_cols]` for a non-empty request. The request's KV length is
      `(kv_indptr[b+1] - kv_indptr[b] - 1) * block_cols + kv_last_len[b]`.
      With `block_cols = 1` every block is one token, `kv_last_len` is implied
      (1) and dropped: this is the column-vector form that lets a speculative
      token tree pick any set of cached tokens.
    * ragged: `kv_indptr[B+1]` counts tokens; request `b` owns the token rows
      `[kv_indptr[b], kv_indptr[b+1])` of the K/V tensors. In BSR terms the
      column indices are implicit and contiguous, i.e. one column block as
      wide as the request's KV.

    `block_rows` is how many consecutive query rows share one row of blocks:
    1 for decode (one query per request), the number of tokens each request
    verifies or appends when that is fixed, large for a prefix shared by a
    whole group of requests (a view of an `#attn.composed` format), and `?`
    when it varies from batch to batch (prefill, chunked prefill). Tile
    selection reads it as the expected query length: a count gets one tile,
    `?` gets every candidate tile, for the planner to pick from per batch.

    `block_cols` is any positive page size (1 for token trees, 16 for vLLM's
    default, 3, 48 or 544 work as well).

    `layout` orders the axes of a K/V block: `NHD` is `[page, token, head,
    dim]` (`[token, head, dim]` when ragged), `HND` is `[page, head, token,
    dim]` (`[head, token, dim]` when ragged).

    `strided = true` (ragged only): the K/V rows lie at a token stride and a
    head stride given at launch rather than densely in `layout`, so a slice
    of a fused QKV projection, an HND tensor or any view whose `dim` axis is
    dense is read in place. Dense rows (the default) let the kernels fold
    each copy's offset into its instruction; strided ones cost an add a copy.

    Example: Llama-3 decode over 16-token pages.

    ```mlir
    #paged = #attn.bsr<block_rows = 1, block_cols = 16, layout = NHD>
    #tree = #attn.bsr<block_rows = 8, block_cols = 1>
    #ragged = #attn.bsr<block_rows = ?, block_cols = 1, indexing = ragged>
    #fused_qkv = #attn.bsr<block_rows = ?, block_cols = 1, indexing = ragged,
                           strided = true>
    ```
  }];
  let parameters = (ins
    Attn_BlockRowsParameter:$block_rows,
    "int64_t":$block_cols,
    Attn_DefaultEnumParameter<Attn_KVLayout, "::mlir::attn::KVLayout::NHD">:$layout,
    Attn_DefaultEnumParameter<Attn_KVIndexing, "::mlir::attn::KVIndexing::paged">:$indexing,
    DefaultValuedParameter<"bool", "false">:$strided
  );
  // The format before `strided` existed: dense rows (callers built against it keep working).
  let builders = [
    AttrBuilder<(ins "int64_t":$block_rows, "int64_t":$block_cols,
                     "::mlir::attn::KVLayout":$layout,
                     "::mlir::attn::KVIndexing":$indexing), [{
      return $_get($_ctxt, block_rows, block_cols, layout, indexing,
                   /*strided=*/false);
    }]>
  ];
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool isPaged() const { return getIndexing() == KVIndexing::paged; }
    bool isRagged() const { return getIndexing() == KVIndexing::ragged; }
    /// Paged with one-token blocks: the column-vector form of token trees.
    bool isColumnVector() const { return isPaged() && getBlockCols() == 1; }
    /// How many i32 index arrays the attention op takes for this view.
    unsigned getNumIndexArrays() const;
    /// The names of those arrays, in operand order.
    ::llvm::SmallVector<::llvm::StringRef> getIndexArrayNames() const;
    /// Blocks a request of `kvLen` tokens occupies (0 for an empty request).
    int64_t getNumBlocks(int64_t kvLen) const;
    /// Tokens used in the last block of a request of `kvLen` tokens (0 for
    /// an empty request), the `kv_last_len` entry of a paged view.
    int64_t getLastBlockLen(int64_t kvLen) const;
    /// The KV length of a request from its block count and last-block length.
    int64_t getKVLen(int64_t numBlocks, int64_t lastBlockLen) const;
    /// The rank of the K/V cache tensors this view reads.
    int64_t getCacheRank() const { return isPaged() ? 4 : 3; }
    /// Whether the requests' query lengths vary by batch (`block_rows = ?`).
    bool hasDynamicBlockRows() const {
      return ::mlir::ShapedType::isDynamic(getBlockRows());
    }
  }];
}

//===----------------------------------------------------------------------===//
// #attn.composed
//===----------------------------------------------------------------------===//

// Views print with their #attn.bsr prefix: the full spelling reads better in
// a list than the stripped one.
def Attn_ViewListParameter : ArrayRefParameter<"::mlir::attn::BsrAttr"> {
  let printer = [{
    ::llvm::interleaveComma($_self, $_printer, [&](::mlir::attn::BsrAttr view) {
      $_printer.printAttribute(view);
    });
  }];
}

def Attn_ComposedAttr : Attn_Attr<"Composed", "composed"> {
  let summary = "one KV cache seen through several BSR views";
  let description = [{
    A composed format describes one physical cache through several BSR
    views; attention over it is the log-sum-exp merge of attention over each
    view (cascade attention). The usual use is a shared prefix: the first view
    groups every query of the requests that share a system prompt into one
    large block row, so the prefix's KV is loaded once for the whole group;
    the second view holds each request's own tokens with one-row blocks.

    No KV moves: the views differ only in their index arrays. Since they see
    one cache, all views share `block_cols`, `layout` and `indexing`; they
    differ in `block_rows`. The attention op takes each view's index arrays,
    view after view. `attn-decompose-composed` rewrites the attention into
    one attention per view plus `attn.merge_states`.

    Example: 64 requests share a 4096-token prompt stored once.

    ```mlir
    #cascade = #attn.composed<[
      #attn.bsr<block_rows = 64, block_cols = 16>,   // shared prefix
      #attn.bsr<block_rows = 1, block_cols = 16>     // each request's suffix
    ]>
    ```
  }];
  let parameters = (ins Attn_ViewListParameter:$view_list);
  let assemblyFormat = "`<` `[` $view_list `]` `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Index arrays of all views together.
    unsigned getNumIndexArrays() const;
  }];
}

//===----------------------------------------------------------------------===//
// #attn.tile
//===----------------------------------------------------------------------===//

def Attn_TileAttr : Attn_Attr<"Tile", "tile"> {
  let summary = "the tile an attention kernel is generated for";
  let description = [{
    The work shape of one CTA of the generated kernel, filled in by
    `attn-select-tile` and `attn-pack-gqa`:

    * `q`: query rows per tile: 16, 64, 128 or 192 (192: three computing
      warpgroups, wgmma targets only). With GQA packing the rows are
      (query, head) pairs.
    * `kv`: KV tokens per main-loop step (a power of two, 16..256). Decode
      tiles (`q = 16`) step each warp through its own `kv` tokens with its
      own online softmax; larger tiles share one KV tile among all warps.
    * `warps`: warps per CTA (1..16).
    * `stages`: depth of the cp.async pipeline that gathers KV (1..8), per
      warp for decode tiles.
    * `gqa_pack`: query heads sharing a KV head that are packed as rows of
      one tile (1 = no packing; divides the GQA group, at most `q`).
    * `ctas_per_sm`: CTAs the kernel is built to keep resident on every SM
      (the persistent grid is `num_sms * ctas_per_sm`); their shared memory
      and registers must fit one SM together.
    * `kv_tma`: whole K/V tiles arrive by the tensor memory accelerator
      (`cp.async.bulk.tensor`, boxes of a tile or of a page per 64-column
      panel of K and of V, issued by one producer thread) instead of the
      producer warpgroup's 16-byte cp.async copies; a tile that ends past
      the item's keys still takes cp.async, which zero-fills them.
      Warp-specialized wgmma tiles only (sm_90a), over ragged K/V or pages
      that are boxes (`getKVBoxRows`: pages holding whole tiles, or of a
      multiple of 8 keys dividing the tile). The kernel takes two more
      arguments, `k_map` and `v_map`, the tensor maps the runtime encodes
      at launch from `k_cache` and `v_cache`.

    A 16-row tile is a decode tile: each warp walks its own share of the KV
    tiles with its own online softmax, and the warps combine once per work
    item. Taller tiles give every warp 16 rows of its own and share each KV
    tile among all warps.

    ```mlir
    #decode = #attn.tile<q = 16, kv = 16, warps = 3, stages = 2, gqa_pack = 4, ctas_per_sm = 4>
    #prefill_d64_sm90a = #attn.tile<q = 192, kv = 128, warps = 12, stages = 2, gqa_pack = 4>
    #prefill_tma = #attn.tile<q = 128, kv = 128, warps = 8, stages = 2, kv_tma = true>
    ```
  }];
  let parameters = (ins
    "int64_t":$q,
    "int64_t":$kv,
    "int64_t":$warps,
    DefaultValuedParameter<"int64_t", "2">:$stages,
    DefaultValuedParameter<"int64_t", "1">:$gqa_pack,
    DefaultValuedParameter<"int64_t", "1">:$ctas_per_sm,
    DefaultValuedParameter<"bool", "false">:$kv_tma
  );
  let skipDefaultBuilders = 1;
  let builders = [
    AttrBuilder<(ins "int64_t":$q, "int64_t":$kv, "int64_t":$warps,
                     "int64_t":$stages, "int64_t":$gqa_pack,
                     "int64_t":$ctas_per_sm, CArg<"bool", "false">:$kv_tma), [{
      return $_get($_ctxt, q, kv, warps, stages, gqa_pack, ctas_per_sm, kv_tma);
    }]>
  ];
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Whether the warps split the KV tiles (decode: one 16-row tile, each
    /// warp its own keys) rather than the rows (one 16-row slice each).
    bool warpsSplitKeys() const { return getQ() == 16; }
    /// Keys one warp computes per step: a warp's own 16-key tile in decode,
    /// the shared `kv` tile otherwise.
    int64_t getKeysPerStep() const { return warpsSplitKeys() ? 16 : getKv(); }
  }];
}

//===----------------------------------------------------------------------===//
// #attn.band
//===----------------------------------------------------------------------===//

def Attn_BandAttr : Attn_Attr<"Band", "band"> {
  let summary = "the keys a logits mask can keep, relative to the query";
  let description = [{
    A `logits_mask` hook may declare the band of keys it can ever keep: for
    a query at position `p`, only keys `k` with `p - lower <= k <= p + upper`.
    Each bound is a constant (`lower`, `upper`), the value of one of the
    variant's `i32` parameters (`lower_param`, `upper_param`; a negative
    value means no bound), or absent (unbounded). The mask hook still decides
    every element; the band is a promise that lets the kernel skip KV tiles
    no row of a tile can see, mask only the tiles that cross the band's edges,
    and lets the planner leave invisible keys out of its work list. Masks
    without a band run on every tile.

    ```mlir
    #attn.band<upper = 0>                      // causal: k <= p
    #attn.band<lower_param = "window_left">    // sliding window: k >= p - w
    ```
  }];
  let parameters = (ins
    OptionalParameter<"std::optional<int64_t>">:$lower,
    OptionalParameter<"std::optional<int64_t>">:$upper,
    OptionalParameter<"::mlir::StringAttr">:$lower_param,
    OptionalParameter<"::mlir::StringAttr">:$upper_param
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Whether the band bounds nothing.
    bool isUnbounded() const {
      return !getLower() && !getUpper() && !getLowerParam() && !getUpperParam();
    }
    /// The band of keys both `this` and `other` keep (where one side of both
    /// is a parameter, the first's).
    BandAttr intersect(BandAttr other) const;
  }];
}

//===----------------------------------------------------------------------===//
// #attn.launch
//===----------------------------------------------------------------------===//

def Attn_LaunchAttr : Attn_Attr<"Launch", "launch"> {
  let summary = "what the runtime must know to launch a generated kernel";
  let description = [{
    The launch contract of one generated `gpu.func`: everything the runtime
    needs besides the argument list, whose order, names (`attn.name`) and
    kinds (the argument types) the function itself gives. The kernel
    manifest the runtime reads is written from this attribute alone.

    * `role`: `attention` kernels run the planner's work list on a persistent
      grid of `num_sms * ctas_per_sm` CTAs; `merge` kernels combine the
      partial results of split KV (grid `merge_units * ceil(slot_rows /
      merge_rows)`, grid-strided); `merge_states` and `append_kv` kernels are
      row kernels (`attn.merge_states`, `attn.append_kv` outside attention):
      a grid-strided loop over the `num_rows` rows given at launch,
      `merge_rows` rows per CTA step, at most `num_sms * ctas_per_sm` CTAs.
    * `threads`, `shared_bytes` (dynamic shared memory), `ctas_per_sm`.
    * `dtype`, `head_dim`, `num_qo_heads`, `num_kv_heads` (0 in row kernels:
      their head count is an argument). Row kernels of `merge_states` may
      be f32.
    * attention: `tile` and `format` (what the plan must match), the
      planner's cost model (an item over `n` keys costs `cost_per_item +
      n * cost_per_kv_token`; KV chunks are at least `min_chunk` keys, 0:
      two KV tiles), the visible `band` of its masks (the planner clips
      work to it), whether it reads a `custom_mask`, and its `merge` kernel.
    * merge: `merge_rows` rows of a unit per CTA step, `pdl` (it waits with
      `griddepcontrol.wait`, so it may be launched as a programmatic
      dependent), `output_transform` (it applies the variants' output
      transform to the merged rows).
    * `variants`: the names of the variants whose hooks the kernel inlines.

    ```mlir
    attn.launch = #attn.launch<role = attention, chip = "sm_90", threads = 96,
        shared_bytes = 49920, ctas_per_sm = 4, dtype = bf16, head_dim = 128,
        num_qo_heads = 32, num_kv_heads = 8,
        tile = #attn.tile<q = 16, kv = 16, warps = 3, gqa_pack = 4, ctas_per_sm = 4>,
        format = #attn.bsr<block_cols = 16>, cost_per_item = 128,
        min_chunk = 512, merge = @attn_merge_bf16_d128>
    ```
  }];
  let parameters = (ins
    EnumParameter<Attn_KernelRole>:$role,
    "::mlir::StringAttr":$chip,
    "int64_t":$threads,
    DefaultValuedParameter<"int64_t", "0">:$shared_bytes,
    DefaultValuedParameter<"int64_t", "1">:$ctas_per_sm,
    "::mlir::Type":$dtype,
    "int64_t":$head_dim,
    "int64_t":$num_qo_heads,
    "int64_t":$num_kv_heads,
    OptionalParameter<"TileAttr">:$tile,
    OptionalParameter<"BsrAttr">:$format,
    DefaultValuedParameter<"int64_t", "0">:$cost_per_item,
    DefaultValuedParameter<"int64_t", "1">:$cost_per_kv_token,
    DefaultValuedParameter<"int64_t", "0">:$min_chunk,
    OptionalParameter<"BandAttr">:$band,
    Attn_FlagParameter:$custom_mask,
    OptionalParameter<"::mlir::FlatSymbolRefAttr">:$merge,
    DefaultValuedParameter<"int64_t", "1">:$merge_rows,
    Attn_FlagParameter:$pdl,
    Attn_FlagParameter:$output_transform,
    OptionalParameter<"::mlir::ArrayAttr">:$variants
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool isAttention() const { return getRole() == KernelRole::attention; }
    /// merge_states, append_kv and copy_indices: grid-strided over rows,
    /// no plan.
    bool isRowKernel() const {
      return getRole() == KernelRole::merge_states ||
             getRole() == KernelRole::append_kv ||
             getRole() == KernelRole::copy_indices;
    }
    /// The name of the discardable attribute a gpu.func carries it in.
    static constexpr ::llvm::StringLiteral getAttrName() { return "attn.launch"; }
  }];
}

//===----------------------------------------------------------------------===//
// #attn.param
//===----------------------------------------------------------------------===//

def Attn_ParamAttr : Attn_Attr<"Param", "param"> {
  let summary = "a runtime parameter of an attention variant";
  let description = [{
    A named parameter a variant's hooks read with `attn.param`. Parameters are
    kernel arguments, so one compiled kernel serves every value. Scalars are
    `f32`, `i32` or `i1`; a per-head table (e.g. attention sinks) is a
    `memref<?xf32>` indexed by the query head.

    ```mlir
    #attn.param<"window_left" : i32>
    ```
  }];
  let parameters = (ins StringRefParameter<>:$name, "::mlir::Type":$type);
  let assemblyFormat = "`<` $name `:` $type `>`";
  let genVerifyDecl = 1;
}


//===----------------------------------------------------------------------===//
// KV formats
//===----------------------------------------------------------------------===//

def Attn_KVFormatAttr : AnyAttrOf<[Attn_BsrAttr, Attn_ComposedAttr]>;

#endif // ATTN_DIALECT_ATTN_IR_ATTNATTRS_TD
