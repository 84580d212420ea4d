//===- AttnDialect.td - the attn dialect -------------------*- tablegen -*-===//
//
// The attn dialect models attention as LLM serving runs it: ragged queries,
// a KV cache in a block-sparse-row (BSR) format, attention variants written as
// small hook regions, and the tile choices the passes make.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_IR_ATTNDIALECT_TD
#define ATTN_DIALECT_ATTN_IR_ATTNDIALECT_TD

include "mlir/IR/OpBase.td"

def Attn_Dialect : Dialect {
  let name = "attn";
  let cppNamespace = "::mlir::attn";
  let summary = "Attention for LLM inference serving";
  let description = [{
    The `attn` dialect describes the attention of a serving batch:

    * `attn.attention` computes softmax attention for ragged queries against
      a KV cache held in a block-sparse-row format (`#attn.bsr`), or in
      several BSR views of one cache (`#attn.composed`, cascade attention).
    * Attention variants are `attn.variant` symbols made of `attn.hook`
      regions with fixed signatures (query/key transform, logits transform,
      logits mask, output transform, sink). The compiler inlines them into
      the generated kernel. Built-in variants (causal, sliding window,
      soft-cap, ALiBi, RoPE, sinks, ...) are written in the same form and
      shipped as a library.
    * `attn.merge_states` combines partial results by their log-sum-exp;
      `attn.append_kv` writes new tokens into the pages of a cache.
    * `#attn.tile` records the tile the passes chose for the kernel.
    * The tile-level form (`attn.tile.*` ops on `!attn.*` tile values) is
      what a tiled attention becomes inside its generated kernel, before a
      target lowering turns it into gpu/nvgpu/nvvm code; `#attn.launch` is
      the kernel's launch contract.

    Semantics (positions, masks, the LSE base) are documented in
    docs/Semantics.md; they match FlashInfer where FlashInfer is defined and
    say where attn differs.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::tensor::TensorDialect"
  ];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Registers the attributes and types; defined beside their storage
    /// classes.
    void registerAttributes();
    void registerTypes();

    /// Parses the built-in variant library (once per context) and returns the
    /// definition of `name`, or null when no built-in has that name.
    ::mlir::Operation *lookupBuiltinVariant(::llvm::StringRef name);
    /// The names of all built-in variants, in library order.
    ::llvm::SmallVector<::llvm::StringRef> getBuiltinVariantNames();

  private:
    ::mlir::OwningOpRef<::mlir::ModuleOp> builtinLibrary;
    bool builtinLibraryParsed = false;
  public:
  }];
}

class Attn_Op<string mnemonic, list<Trait> traits = []>
    : Op<Attn_Dialect, mnemonic, traits>;

#endif // ATTN_DIALECT_ATTN_IR_ATTNDIALECT_TD
