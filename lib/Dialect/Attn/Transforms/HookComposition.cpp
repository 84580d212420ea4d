//===- HookComposition.cpp - Variants' hooks as regions of tile ops -------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// An attention applies its variants in order: transforms compose, masks are
// ANDed, at most one variant has a sink. The outline pass writes, for each
// place of the kernel, one region that does all of it: the hooks of every
// variant cloned one after the other, their `attn.param` reads replaced by
// the kernel values of the parameters and their `attn.config` reads by
// constants. The target lowering then inlines each region where the kernel
// computes that element.
//
// A hook runs once per element (per logit, per query or key element), so a
// division by a value that is the same for all of them (a parameter, a
// config value, a constant, or arithmetic on those) is cloned as a
// multiplication by its reciprocal: the reciprocal's copies are the same
// computation, which CSE merges and LICM hoists out of the tile loops, while
// a division per element is an IEEE divide with a slow-path branch each
// (soft-cap's `s / cap` made its sm_90a prefill 2.3x slower than the plain
// kernel, and spilled). The product is within an ulp of the quotient.
//
//===----------------------------------------------------------------------===//

#include "HookComposition.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::attn;

LogicalResult
mlir::attn::resolveVariants(AttentionOp op,
                            SmallVectorImpl<VariantOp> &variants) {
  auto *dialect = op->getContext()->getLoadedDialect<AttnDialect>();
  for (StringRef name : op.getVariantNames()) {
    VariantOp variant;
    for (Operation *scope = op->getParentOp(); scope && !variant;
         scope = scope->getParentOp())
      if (scope->hasTrait<OpTrait::SymbolTable>())
        variant = dyn_cast_or_null<VariantOp>(SymbolTable::lookupSymbolIn(
            scope, StringAttr::get(op->getContext(), name)));
    if (!variant)
      variant =
          dyn_cast_or_null<VariantOp>(dialect->lookupBuiltinVariant(name));
    if (!variant)
      return op.emitOpError() << "uses unknown variant @" << name;
    variants.push_back(variant);
  }
  return success();
}

HookComposer::HookComposer(ArrayRef<VariantOp> variantOps,
                           ArrayRef<Value> paramValues, HookConfig config)
    : variants(variantOps), config(config) {
  // Without values (paramValues empty) the composer only answers questions
  // about the hooks; fill() then needs none of the parameters.
  size_t next = 0;
  for (VariantOp variant : variants) {
    auto &bound = params.emplace_back();
    for (size_t i = 0, e = variant.getParams().size(); i < e; ++i)
      bound.push_back(next < paramValues.size() ? paramValues[next++]
                                                : Value());
  }
  assert((paramValues.empty() || next == paramValues.size()) &&
         "more values than parameters");
}

bool HookComposer::has(HookKind kind) const {
  return llvm::any_of(variants,
                      [&](VariantOp v) { return bool(v.getHook(kind)); });
}

Value HookComposer::getParam(VariantOp variant, StringRef name) const {
  for (auto [v, bound] : llvm::zip(variants, params)) {
    if (v != variant)
      continue;
    for (auto [param, value] :
         llvm::zip(v.getParams().getAsRange<ParamAttr>(), bound))
      if (param.getName() == name)
        return value;
  }
  return {};
}

/// Clones the body of `variant`'s hook of `kind` at `b`, its block
/// arguments bound to `args`; returns the yielded value.
Value HookComposer::cloneHook(OpBuilder &b, Location loc, unsigned index,
                              HookKind kind, ValueRange args) const {
  VariantOp variant = variants[index];
  Block &body = variant.getHook(kind).getBody().front();
  IRMapping mapping;
  mapping.map(body.getArguments(), args);
  // The hook's values that are the same for every element it runs for.
  llvm::SmallPtrSet<Value, 16> invariant;
  for (Operation &op : body.without_terminator()) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      mapping.map(param.getResult(), getParam(variant, param.getName()));
      invariant.insert(param.getResult());
      continue;
    }
    if (isa<ConfigOp>(op) ||
        (isPure(&op) && op.getNumRegions() == 0 &&
         llvm::all_of(op.getOperands(),
                      [&](Value v) { return invariant.contains(v); })))
      for (Value r : op.getResults())
        invariant.insert(r);
    if (auto div = dyn_cast<arith::DivFOp>(op);
        div && invariant.contains(div.getRhs()) &&
        !invariant.contains(div.getLhs())) {
      // x / y with y invariant: x * (1 / y).
      Type type = div.getType();
      Value one = arith::ConstantOp::create(b, loc, type,
                                            b.getFloatAttr(type, 1.0));
      Value inv = arith::DivFOp::create(b, loc, one,
                                        mapping.lookup(div.getRhs()),
                                        div.getFastmath());
      mapping.map(div.getResult(),
                  arith::MulFOp::create(b, loc, mapping.lookup(div.getLhs()),
                                        inv, div.getFastmath())
                      .getResult());
      continue;
    }
    if (auto cfg = dyn_cast<ConfigOp>(op)) {
      int64_t value = 0;
      switch (cfg.getKey()) {
      case ConfigKey::head_dim:
        value = config.headDim;
        break;
      case ConfigKey::num_qo_heads:
        value = config.numQoHeads;
        break;
      case ConfigKey::num_kv_heads:
        value = config.numKVHeads;
        break;
      }
      mapping.map(cfg.getResult(),
                  arith::ConstantIntOp::create(b, loc, value, 32).getResult());
      continue;
    }
    b.clone(op, mapping);
  }
  return mapping.lookup(cast<YieldOp>(body.getTerminator()).getValue());
}

bool HookComposer::fill(OpBuilder &b, Location loc, Region &region,
                        HookKind kind) const {
  if (!has(kind))
    return false;
  MLIRContext *ctx = b.getContext();
  SmallVector<Type> types = HookOp::getExpectedArgumentTypes(ctx, kind);
  OpBuilder::InsertionGuard guard(b);
  Block *block = b.createBlock(&region, {}, types,
                               SmallVector<Location>(types.size(), loc));
  SmallVector<Value> args(block->getArguments());
  Value result;
  for (unsigned i = 0; i < variants.size(); ++i) {
    if (!variants[i].getHook(kind))
      continue;
    switch (kind) {
    case HookKind::logits_mask: {
      // Masks are ANDed: a key survives when every variant keeps it.
      Value keep = cloneHook(b, loc, i, kind, args);
      result = result ? arith::AndIOp::create(b, loc, result, keep).getResult()
                      : keep;
      break;
    }
    case HookKind::sink:
      // At most one variant has a sink (the attention op's verifier).
      result = cloneHook(b, loc, i, kind, args);
      break;
    default:
      // Transforms compose: each sees the previous one's value.
      args[0] = cloneHook(b, loc, i, kind, args);
      result = args[0];
      break;
    }
  }
  YieldOp::create(b, loc, result);
  return true;
}

bool HookComposer::masksAreBanded() const {
  return llvm::all_of(variants, [](VariantOp v) {
    HookOp mask = v.getHook(HookKind::logits_mask);
    return !mask || mask.getBandAttr();
  });
}

BandAttr HookComposer::getBand(MLIRContext *ctx) const {
  BandAttr band;
  for (VariantOp v : variants)
    if (HookOp mask = v.getHook(HookKind::logits_mask))
      if (BandAttr b = mask.getBandAttr())
        band = band ? band.intersect(b) : b;
  return band;
}

Value HookComposer::getBandParam(StringAttr name) const {
  if (!name)
    return {};
  for (VariantOp v : variants)
    if (HookOp mask = v.getHook(HookKind::logits_mask))
      if (BandAttr b = mask.getBandAttr();
          b && (b.getLowerParam() == name || b.getUpperParam() == name))
        return getParam(v, name.getValue());
  return {};
}
