//===- AttnVariantOps.td - attention variants as hooks -----*- tablegen -*-===//
//
// A variant is a symbol holding small hook regions that the kernel generator
// inlines at fixed places of the attention kernel. Each hook kind has a fixed
// signature the verifier checks, and hooks may not write memory.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_IR_ATTNVARIANTOPS_TD
#define ATTN_DIALECT_ATTN_IR_ATTNVARIANTOPS_TD

include "attn/Dialect/Attn/IR/AttnDialect.td"
include "attn/Dialect/Attn/IR/AttnAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Attn_VariantOp : Attn_Op<"variant", [
    Symbol, IsolatedFromAbove, NoTerminator, SingleBlock,
    NoRegionArguments]> {
  let summary = "an attention variant: a named set of hooks";
  let description = [{
    A variant changes attention at fixed places of the kernel through hooks
    (`attn.hook`), at most one of each kind; a missing hook is the identity.
    Its parameters are runtime arguments of the kernel, read in hooks with
    `attn.param`, so one compiled kernel serves every value. Several variants
    compose: transforms apply in the order the attention op lists the
    variants, masks are ANDed, and at most one variant may define a sink.
    A hook runs for every element it transforms, so the kernel generator
    compiles a division by a value that is the same for all of them (a
    parameter, a config value, a constant, or arithmetic on those) as a
    product with its reciprocal, computed once per kernel (within an ulp of
    the quotient): `s / cap` below costs a multiplication per logit.

    ```mlir
    attn.variant @soft_cap(cap : f32) {
      attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
        %cap = attn.param "cap" : f32
        %x = arith.divf %s, %cap : f32
        %t = math.tanh %x : f32
        %r = arith.mulf %cap, %t : f32
        attn.yield %r : f32
      }
    }
    ```
  }];
  let arguments = (ins
    SymbolNameAttr:$sym_name,
    DefaultValuedAttr<TypedArrayAttrBase<Attn_ParamAttr, "variant parameters">, "{}">:$params
  );
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$name, "::llvm::ArrayRef<ParamAttr>":$params)>
  ];
  let extraClassDeclaration = [{
    /// The hook of `kind`, or null when the variant leaves that place alone.
    HookOp getHook(HookKind kind);
    /// The declared parameter called `name`, or null.
    ParamAttr getParam(::llvm::StringRef name);
  }];
}

def Attn_HookOp : Attn_Op<"hook", [
    HasParent<"VariantOp">, IsolatedFromAbove, SingleBlock,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "a small function inlined at one place of the attention kernel";
  let description = [{
    The block arguments and the yielded value are fixed by the hook's kind
    (positions and heads are `i32`, values `f32`):

    | kind | arguments | yields |
    | --- | --- | --- |
    | `query_transform`, `key_transform` | `%x, %x_pair : f32, %dim, %pos, %head : i32` | f32 |
    | `logits_transform` | `%s : f32, %q_pos, %k_pos, %head : i32` | f32 |
    | `logits_mask` | `%q_pos, %k_pos, %head : i32` | i1 (true keeps the key) |
    | `output_transform` | `%o : f32, %dim, %q_pos, %head : i32` | f32 |
    | `sink` | `%head : i32` | f32 |

    `%x_pair` is the element half a head away (`(dim + D/2) mod D`), what a
    rotate-half (NeoX) RoPE pairs `%x` with. `%pos`, `%q_pos` and `%k_pos`
    are absolute positions in the request; `%head` is the query head (the KV
    head for `key_transform`). `logits_transform` sees the logits after
    `sm_scale`. A `sink` yields a logit, in scaled-logit units, that joins
    the softmax denominator only.

    Hooks compute values: their ops must be free of memory writes (reads of
    a parameter table are allowed).

    A `logits_mask` may declare `band`, the keys it can ever keep relative
    to the query (`#attn.band`); its bounds name constants or the variant's
    `i32` parameters. The kernel then skips KV tiles outside the band and
    masks only the tiles crossing its edges, and the planner leaves the keys
    outside it out of the work.

    ```mlir
    attn.hook logits_mask(%q_pos : i32, %k_pos : i32, %head : i32) band <upper = 0> {
      %keep = arith.cmpi sle, %k_pos, %q_pos : i32
      attn.yield %keep : i1
    }
    ```
  }];
  let arguments = (ins Attn_HookKindAttr:$kind, OptionalAttr<Attn_BandAttr>:$band);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The argument types every hook of `kind` takes.
    static ::llvm::SmallVector<::mlir::Type> getExpectedArgumentTypes(
        ::mlir::MLIRContext *ctx, HookKind kind);
    /// The type a hook of `kind` yields.
    static ::mlir::Type getExpectedResultType(::mlir::MLIRContext *ctx,
                                              HookKind kind);
    /// The names the printer gives the block arguments of `kind`.
    static ::llvm::SmallVector<::llvm::StringRef> getArgumentNames(HookKind kind);
  }];
}

def Attn_YieldOp : Attn_Op<"yield", [
    Pure, ReturnLike, Terminator,
    ParentOneOf<["HookOp", "TileLoadQueryOp", "TileKVNextOp",
                 "TileOnlineSoftmaxOp", "TileStoreOp", "TileMergeOp"]>]> {
  let summary = "the value a hook produces";
  let description = [{
    Ends a hook, and the hook regions of the tile-level ops.

    ```mlir
    attn.yield %r : f32
    ```
  }];
  let arguments = (ins AnyType:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def Attn_ParamOp : Attn_Op<"param", [Pure]> {
  let summary = "read a runtime parameter of the enclosing variant";
  let description = [{
    The value of the enclosing variant's parameter `name`, passed to the
    kernel at run time.

    ```mlir
    %w = attn.param "window_left" : i32
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs AnyType:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Attn_ConfigOp : Attn_Op<"config", [Pure]> {
  let summary = "read a shape constant of the attention a hook is inlined into";
  let description = [{
    The head dimension or a head count of the attention the hook is inlined
    into; a compile-time constant of each generated kernel.

    ```mlir
    %d = attn.config head_dim : i32
    ```
  }];
  let arguments = (ins Attn_ConfigKeyAttr:$key);
  let results = (outs I32:$result);
  let assemblyFormat = "$key attr-dict `:` type($result)";
}

#endif // ATTN_DIALECT_ATTN_IR_ATTNVARIANTOPS_TD
