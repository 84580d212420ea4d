//===- HookComposition.h - Variants' hooks as regions of tile ops -*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Private to the attn transforms: the outline pass composes the hooks of an
// attention's variants into the regions of the tile ops that apply them.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_LIB_DIALECT_ATTN_TRANSFORMS_HOOKCOMPOSITION_H
#define ATTN_LIB_DIALECT_ATTN_TRANSFORMS_HOOKCOMPOSITION_H

#include "attn/Dialect/Attn/IR/Attn.h"

namespace mlir::attn {

/// The variants `op` lists (module definitions first, then the built-in
/// library), in order. Fails, with a diagnostic at `op`, on an unknown name.
LogicalResult resolveVariants(AttentionOp op,
                              SmallVectorImpl<VariantOp> &variants);

/// The shape constants `attn.config` reads.
struct HookConfig {
  int64_t headDim = 0, numQoHeads = 0, numKVHeads = 0;
};

/// The hooks of one attention's variants, with their parameters bound to
/// kernel values.
class HookComposer {
public:
  /// `params` binds every parameter of every variant, variant after variant
  /// in declaration order, to a value in the kernel (an f32/i32/i1 scalar,
  /// or a buffer for a table parameter).
  HookComposer(ArrayRef<VariantOp> variants, ArrayRef<Value> params,
               HookConfig config);

  /// Whether any variant has a hook of `kind`.
  bool has(HookKind kind) const;

  /// Fills `region` (empty) with the composition of every variant's hook of
  /// `kind`: one block with the hook's arguments ending in attn.yield. Leaves
  /// it empty and returns false when no variant has such a hook.
  bool fill(OpBuilder &b, Location loc, Region &region, HookKind kind) const;

  /// Whether every logits mask declares its band: then the band covers the
  /// masks, and tiles inside it need no element mask.
  bool masksAreBanded() const;
  /// The intersection of the masks' bands, or null when none declares one.
  BandAttr getBand(MLIRContext *ctx) const;
  /// The kernel value of the parameter a band bound names.
  Value getBandParam(StringAttr name) const;

private:
  Value getParam(VariantOp variant, StringRef name) const;
  Value cloneHook(OpBuilder &b, Location loc, unsigned index, HookKind kind,
                  ValueRange args) const;

  /// Op handles: their accessors are non-const, reading them mutates nothing.
  mutable SmallVector<VariantOp> variants;
  /// params[i][j]: the value of parameter j of variant i.
  SmallVector<SmallVector<Value>> params;
  HookConfig config;
};

} // namespace mlir::attn

#endif // ATTN_LIB_DIALECT_ATTN_TRANSFORMS_HOOKCOMPOSITION_H
