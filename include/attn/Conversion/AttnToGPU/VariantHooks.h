//===- VariantHooks.h - inline variant hooks into a kernel -------*- C++ -*-===//
//
// A kernel generator calls these at the fixed places of its attention loop;
// each call clones the matching hook of every variant of the attention, in
// order, at the builder's insertion point. Missing hooks are the identity, so
// a kernel without variants pays nothing.
//
//   * query/key transform and logits transform compose in variant order;
//   * logits masks are ANDed (true keeps the key);
//   * at most one variant has a sink.
//
// Hook values are f32 and i32: callers pass positions and heads as i32 or
// index (converted here). `attn.param` reads become the kernel values bound
// to the parameters; `attn.config` reads become constants.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_CONVERSION_ATTNTOGPU_VARIANTHOOKS_H
#define ATTN_CONVERSION_ATTNTOGPU_VARIANTHOOKS_H

#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/IR/Builders.h"

namespace mlir::attn {

/// The shape constants `attn.config` reads.
struct HookConfig {
  int64_t headDim = 0;
  int64_t numQoHeads = 0;
  int64_t numKVHeads = 0;
};

/// The hooks of one attention's variants, ready to be inlined.
class VariantHooks {
public:
  VariantHooks() = default;
  /// `variants` in application order; `params` binds every parameter of every
  /// variant, variant after variant, in declaration order (the order of
  /// attn.attention's `params` operands), to a kernel value: an f32/i32/i1
  /// scalar, or a rank-1 f32 memref for a table parameter.
  VariantHooks(llvm::ArrayRef<mlir::attn::VariantOp> variants,
               llvm::ArrayRef<mlir::Value> params, HookConfig config);

  /// Resolves the variants `op` lists (module definitions first, then the
  /// built-in library) into `variants`. Fails, with a diagnostic at `op`, on
  /// an unknown name.
  static mlir::LogicalResult
  resolve(mlir::attn::AttentionOp op,
          llvm::SmallVectorImpl<mlir::attn::VariantOp> &variants);

  /// Whether any variant defines a hook of `kind`.
  bool has(mlir::attn::HookKind kind) const;
  /// Whether a variant with this name is applied (e.g. "causal", used to skip
  /// fully masked blocks; the element mask still comes from the hook).
  bool uses(llvm::StringRef variantName) const;
  /// The kernel value bound to parameter `name` of variant `variantName`.
  mlir::Value getParam(llvm::StringRef variantName, llvm::StringRef name) const;

  /// x -> transformed element of q (`pos` the query's position).
  mlir::Value emitQueryTransform(mlir::OpBuilder &b, mlir::Location loc,
                                 mlir::Value x, mlir::Value xPair,
                                 mlir::Value dim, mlir::Value pos,
                                 mlir::Value head) const;
  /// x -> transformed element of k (`head` the KV head).
  mlir::Value emitKeyTransform(mlir::OpBuilder &b, mlir::Location loc,
                               mlir::Value x, mlir::Value xPair,
                               mlir::Value dim, mlir::Value pos,
                               mlir::Value head) const;
  /// Scaled logit -> transformed logit.
  mlir::Value emitLogitsTransform(mlir::OpBuilder &b, mlir::Location loc,
                                  mlir::Value s, mlir::Value qPos,
                                  mlir::Value kPos, mlir::Value head) const;
  /// An i1, true when every mask keeps the key (a constant true without
  /// masks).
  mlir::Value emitLogitsMask(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value qPos, mlir::Value kPos,
                             mlir::Value head) const;
  /// Output element -> transformed output element.
  mlir::Value emitOutputTransform(mlir::OpBuilder &b, mlir::Location loc,
                                  mlir::Value o, mlir::Value dim,
                                  mlir::Value qPos, mlir::Value head) const;
  /// The sink logit of `head`, or null when no variant has a sink.
  mlir::Value emitSink(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value head) const;

private:
  /// Clones hook `kind` of `variant` with `args` bound to its block
  /// arguments; returns the yielded value.
  mlir::Value inlineHook(mlir::OpBuilder &b, mlir::Location loc,
                         unsigned variantIndex, mlir::attn::HookKind kind,
                         llvm::ArrayRef<mlir::Value> args) const;
  /// Folds a value through every variant's hook of `kind`; `valueArg` is the
  /// position of the folded value among `args`.
  mlir::Value chain(mlir::OpBuilder &b, mlir::Location loc,
                    mlir::attn::HookKind kind,
                    llvm::SmallVector<mlir::Value> args) const;

  /// Op handles: their accessors are non-const, reading them mutates nothing.
  mutable llvm::SmallVector<mlir::attn::VariantOp> variants;
  /// params[i][j]: the value of parameter j of variant i.
  llvm::SmallVector<llvm::SmallVector<mlir::Value>> params;
  HookConfig config;
};

} // namespace mlir::attn

#endif // ATTN_CONVERSION_ATTNTOGPU_VARIANTHOOKS_H
