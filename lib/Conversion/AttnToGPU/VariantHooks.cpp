//===- VariantHooks.cpp - inline variant hooks into a kernel --------------===//
//
// Clones attn.hook bodies into generated kernels. A hook is a small SSA
// function of f32/i32 values; inlining it is a clone with the block
// arguments, parameter reads and config reads replaced by kernel values.
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/VariantHooks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::attn;

VariantHooks::VariantHooks(ArrayRef<VariantOp> variantOps,
                           ArrayRef<Value> paramValues, HookConfig config)
    : variants(variantOps), config(config) {
  size_t next = 0;
  for (VariantOp variant : variants) {
    auto &bound = params.emplace_back();
    for (size_t i = 0, e = variant.getParams().size(); i < e; ++i) {
      assert(next < paramValues.size() && "a variant parameter is unbound");
      bound.push_back(paramValues[next++]);
    }
  }
  assert(next == paramValues.size() && "more values than parameters");
}

LogicalResult VariantHooks::resolve(AttentionOp op,
                                    SmallVectorImpl<VariantOp> &out) {
  auto *dialect = op->getContext()->getLoadedDialect<AttnDialect>();
  for (StringRef name : op.getVariantNames()) {
    VariantOp variant;
    for (Operation *scope = op->getParentOp(); scope && !variant;
         scope = scope->getParentOp())
      if (scope->hasTrait<OpTrait::SymbolTable>())
        variant = dyn_cast_or_null<VariantOp>(SymbolTable::lookupSymbolIn(
            scope, StringAttr::get(op->getContext(), name)));
    if (!variant)
      variant = dyn_cast_or_null<VariantOp>(dialect->lookupBuiltinVariant(name));
    if (!variant)
      return op.emitOpError() << "uses unknown variant @" << name;
    out.push_back(variant);
  }
  return success();
}

bool VariantHooks::has(HookKind kind) const {
  return llvm::any_of(variants,
                      [&](VariantOp v) { return bool(v.getHook(kind)); });
}

bool VariantHooks::uses(StringRef variantName) const {
  return llvm::any_of(
      variants, [&](VariantOp v) { return v.getSymName() == variantName; });
}

Value VariantHooks::getParam(StringRef variantName, StringRef name) const {
  for (auto [variant, bound] : llvm::zip(variants, params)) {
    if (variant.getSymName() != variantName)
      continue;
    for (auto [param, value] :
         llvm::zip(variant.getParams().getAsRange<ParamAttr>(), bound))
      if (param.getName() == name)
        return value;
  }
  return nullptr;
}

/// `v` as an i32: index values are cast, i32 values pass through.
static Value toI32(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isIndex())
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), v);
  assert(v.getType().isInteger(32) && "hook positions and heads are i32");
  return v;
}

Value VariantHooks::inlineHook(OpBuilder &b, Location loc, unsigned index,
                               HookKind kind, ArrayRef<Value> args) const {
  VariantOp variant = variants[index];
  HookOp hook = variant.getHook(kind);
  Block &body = hook.getBody().front();
  IRMapping mapping;
  for (auto [arg, value] : llvm::zip(body.getArguments(), args))
    mapping.map(arg, value);
  for (Operation &op : body.without_terminator()) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      auto declared = variant.getParams().getAsRange<ParamAttr>();
      auto it = llvm::find_if(declared, [&](ParamAttr p) {
        return p.getName() == param.getName();
      });
      mapping.map(param.getResult(),
                  params[index][std::distance(declared.begin(), it)]);
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
  auto yield = cast<YieldOp>(body.getTerminator());
  return mapping.lookup(yield.getValue());
}

Value VariantHooks::chain(OpBuilder &b, Location loc, HookKind kind,
                          SmallVector<Value> args) const {
  for (unsigned i = 0; i < variants.size(); ++i)
    if (variants[i].getHook(kind))
      args[0] = inlineHook(b, loc, i, kind, args);
  return args[0];
}

Value VariantHooks::emitQueryTransform(OpBuilder &b, Location loc, Value x,
                                       Value xPair, Value dim, Value pos,
                                       Value head) const {
  return chain(b, loc, HookKind::query_transform,
               {x, xPair, toI32(b, loc, dim), toI32(b, loc, pos),
                toI32(b, loc, head)});
}

Value VariantHooks::emitKeyTransform(OpBuilder &b, Location loc, Value x,
                                     Value xPair, Value dim, Value pos,
                                     Value head) const {
  return chain(b, loc, HookKind::key_transform,
               {x, xPair, toI32(b, loc, dim), toI32(b, loc, pos),
                toI32(b, loc, head)});
}

Value VariantHooks::emitLogitsTransform(OpBuilder &b, Location loc, Value s,
                                        Value qPos, Value kPos,
                                        Value head) const {
  return chain(b, loc, HookKind::logits_transform,
               {s, toI32(b, loc, qPos), toI32(b, loc, kPos),
                toI32(b, loc, head)});
}

Value VariantHooks::emitLogitsMask(OpBuilder &b, Location loc, Value qPos,
                                   Value kPos, Value head) const {
  Value keep;
  SmallVector<Value> args = {toI32(b, loc, qPos), toI32(b, loc, kPos),
                             toI32(b, loc, head)};
  for (unsigned i = 0; i < variants.size(); ++i) {
    if (!variants[i].getHook(HookKind::logits_mask))
      continue;
    Value k = inlineHook(b, loc, i, HookKind::logits_mask, args);
    keep = keep ? arith::AndIOp::create(b, loc, keep, k).getResult() : k;
  }
  return keep ? keep : arith::ConstantIntOp::create(b, loc, 1, 1).getResult();
}

Value VariantHooks::emitOutputTransform(OpBuilder &b, Location loc, Value o,
                                        Value dim, Value qPos,
                                        Value head) const {
  return chain(b, loc, HookKind::output_transform,
               {o, toI32(b, loc, dim), toI32(b, loc, qPos),
                toI32(b, loc, head)});
}

Value VariantHooks::emitSink(OpBuilder &b, Location loc, Value head) const {
  for (unsigned i = 0; i < variants.size(); ++i)
    if (variants[i].getHook(HookKind::sink))
      return inlineHook(b, loc, i, HookKind::sink, {toI32(b, loc, head)});
  return nullptr;
}
