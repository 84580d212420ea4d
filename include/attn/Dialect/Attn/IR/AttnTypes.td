//===- AttnTypes.td - values of the tile-level form --------*- tablegen -*-===//
//
// The tile-level form of attention (AttnTileOps.td) computes on values that
// live spread over a CTA's threads: a work item, a query tile, the K/V tiles
// of a pipeline, scores, probabilities and the online-softmax state. Their
// types say what a value holds, at tile granularity; how a value is spread
// over registers, lanes and shared memory is the target lowering's choice
// (its type converter), so one tile-level kernel serves every target.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_IR_ATTNTYPES_TD
#define ATTN_DIALECT_ATTN_IR_ATTNTYPES_TD

include "attn/Dialect/Attn/IR/AttnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

class Attn_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Attn_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

def Attn_ItemType : Attn_Type<"Item", "item"> {
  let summary = "one work item of the planner's work list";
  let description = [{
    Packed query rows `[row_begin, row_begin + row_count)` of one (request,
    head group) against the keys `[kv_begin, kv_end)` of the request, with
    where its output goes (directly, or a partial slot) and what the request
    looks like (query rows, KV length, first page), and its place in the
    CTA's run of items (for `prefetch_query`). See the runtime's plan ABI
    (docs/Runtime.md).

    ```mlir
    ^bb0(%item: !attn.item):
    ```
  }];
}

// Shapes are rows x columns of one tile: `rows` packed query rows (the tile's
// q), `keys` keys of one K/V step, `dim` the head dim.

def Attn_QueryType : Attn_Type<"Query", "query"> {
  let summary = "the query tile of a work item";
  let description = [{
    `rows x dim` query elements (after the query transform), ready to be
    multiplied with keys: `!attn.query<16x128xbf16>`.
  }];
  let parameters = (ins "int64_t":$rows, "int64_t":$dim, "::mlir::Type":$elementType);
  let hasCustomAssemblyFormat = 1;
}

def Attn_KVRangeType : Attn_Type<"KVRange", "kv_range"> {
  let summary = "the keys a work item visits, and where its masks bite";
  let description = [{
    The item's key range clipped to what its rows can see (the variants'
    visible band), split into steps of `keys` keys, and the interior range
    every row sees in full (tiles inside it skip the element mask):
    `!attn.kv_range<64>`.
  }];
  let parameters = (ins "int64_t":$keys);
  let hasCustomAssemblyFormat = 1;
}

def Attn_KVPipeType : Attn_Type<"KVPipe", "kv_pipe"> {
  let summary = "a pipeline of K/V tiles in flight";
  let description = [{
    The state of the pipeline that gathers an item's K/V tiles by their BSR
    indices into shared memory, `stages` deep:
    `!attn.kv_pipe<64x128xbf16>`.
  }];
  let parameters = (ins "int64_t":$keys, "int64_t":$dim, "::mlir::Type":$elementType);
  let hasCustomAssemblyFormat = 1;
}

def Attn_KVTileType : Attn_Type<"KVTile", "kv_tile"> {
  let summary = "one K/V tile that has landed in shared memory";
  let description = [{
    `keys x dim` keys and values (after the key transform):
    `!attn.kv_tile<64x128xbf16>`.
  }];
  let parameters = (ins "int64_t":$keys, "int64_t":$dim, "::mlir::Type":$elementType);
  let hasCustomAssemblyFormat = 1;
}

def Attn_ScoresType : Attn_Type<"Scores", "scores"> {
  let summary = "S = Q Kᵀ of one tile, f32";
  let description = [{
    `rows x keys` raw dot products: `!attn.scores<16x16>`.
  }];
  let parameters = (ins "int64_t":$rows, "int64_t":$keys);
  let hasCustomAssemblyFormat = 1;
}

def Attn_ProbsType : Attn_Type<"Probs", "probs"> {
  let summary = "the unnormalised probabilities of one tile";
  let description = [{
    `rows x keys` values `2^(s - m)` in the element type, the left operand of
    P V: `!attn.probs<16x16xbf16>`.
  }];
  let parameters = (ins "int64_t":$rows, "int64_t":$keys, "::mlir::Type":$elementType);
  let hasCustomAssemblyFormat = 1;
}

def Attn_SoftmaxType : Attn_Type<"Softmax", "softmax"> {
  let summary = "the online-softmax state of a tile's rows";
  let description = [{
    Per row the running maximum `m` and sum `l` of the base-2 exponentials,
    and the unnormalised output accumulator (`rows x dim`, f32):
    `!attn.softmax<16x128>`.
  }];
  let parameters = (ins "int64_t":$rows, "int64_t":$dim);
  let hasCustomAssemblyFormat = 1;
}

#endif // ATTN_DIALECT_ATTN_IR_ATTNTYPES_TD
