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
    1 for decode (one query per request), a request's query length for
    prefill, and large for a prefix shared by a whole group of requests (a view
    of an `#attn.composed` format). Tile selection reads it as the expected
    query length when the real lengths are only known at run time.

    `layout` orders the axes of a K/V block: `NHD` is `[page, token, head,
    dim]` (`[token, head, dim]` when ragged), `HND` is `[page, head, token,
    dim]` (`[head, token, dim]` when ragged).

    Example: Llama-3 decode over 16-token pages.

    ```mlir
    #paged = #attn.bsr<block_rows = 1, block_cols = 16, layout = NHD>
    #tree = #attn.bsr<block_rows = 8, block_cols = 1>
    #ragged = #attn.bsr<block_rows = 512, block_cols = 1, indexing = ragged>
    ```
  }];
  let parameters = (ins
    DefaultValuedParameter<"int64_t", "1">:$block_rows,
    "int64_t":$block_cols,
    Attn_DefaultEnumParameter<Attn_KVLayout, "::mlir::attn::KVLayout::NHD">:$layout,
    Attn_DefaultEnumParameter<Attn_KVIndexing, "::mlir::attn::KVIndexing::paged">:$indexing
  );
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

    * `q`: query rows per tile: 1 (CUDA-core decode), 16, 64 or 128 (tensor
      cores). With GQA packing the rows are (query, head) pairs.
    * `kv`: KV tokens per main-loop step (a power of two, 16..256). Decode
      tiles (`q = 16`) step each warp through its own `kv` tokens with its
      own online softmax; larger tiles share one KV tile among all warps.
    * `warps`: warps per CTA (1..16).
    * `stages`: depth of the cp.async pipeline that gathers KV (1..8), per
      warp for decode tiles.
    * `gqa_pack`: query heads sharing a KV head that are packed as rows of
      one tile (1 = no packing; at most `q`).

    ```mlir
    #decode = #attn.tile<q = 16, kv = 16, warps = 3, stages = 2, gqa_pack = 4>
    ```
  }];
  let parameters = (ins
    "int64_t":$q,
    "int64_t":$kv,
    "int64_t":$warps,
    DefaultValuedParameter<"int64_t", "2">:$stages,
    DefaultValuedParameter<"int64_t", "1">:$gqa_pack
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
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
