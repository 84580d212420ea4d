//===- AttnVariantOps.cpp - variants, hooks and their values --------------===//
//
// attn.variant, attn.hook, attn.param, attn.config and attn.yield: the
// pieces a variant is written with. The verifiers here are what a model
// author sees when a custom variant is wrong, so they name the hook, the
// argument and the expected type.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::attn;

//===----------------------------------------------------------------------===//
// VariantOp
//===----------------------------------------------------------------------===//

void VariantOp::build(OpBuilder &builder, OperationState &state,
                      StringRef name, ArrayRef<ParamAttr> params) {
  state.addAttribute(getSymNameAttrName(state.name),
                     builder.getStringAttr(name));
  SmallVector<Attribute> paramAttrs(params.begin(), params.end());
  state.addAttribute(getParamsAttrName(state.name),
                     builder.getArrayAttr(paramAttrs));
  Region *body = state.addRegion();
  body->push_back(new Block());
}

/// variant ::= `attn.variant` @name (`(` name `:` type (`,` ...)* `)`)?
///             attr-dict-with-keyword region
ParseResult VariantOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name),
                             result.attributes))
    return failure();
  SmallVector<Attribute> params;
  if (succeeded(parser.parseOptionalLParen()) &&
      failed(parser.parseOptionalRParen())) {
    do {
      std::string paramName;
      Type type;
      SMLoc loc = parser.getCurrentLocation();
      if (parser.parseKeywordOrString(&paramName) || parser.parseColon() ||
          parser.parseType(type))
        return failure();
      auto emitError = [&] { return parser.emitError(loc); };
      if (failed(ParamAttr::verify(emitError, paramName, type)))
        return failure();
      params.push_back(ParamAttr::get(parser.getContext(), paramName, type));
    } while (succeeded(parser.parseOptionalComma()));
    if (parser.parseRParen())
      return failure();
  }
  result.addAttribute(getParamsAttrName(result.name),
                      parser.getBuilder().getArrayAttr(params));
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Region *body = result.addRegion();
  if (parser.parseRegion(*body))
    return failure();
  if (body->empty())
    body->push_back(new Block());
  return success();
}

void VariantOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  if (!getParams().empty()) {
    p << '(';
    llvm::interleaveComma(getParams().getAsRange<ParamAttr>(), p,
                          [&](ParamAttr param) {
                            p.printKeywordOrString(param.getName());
                            p << " : " << param.getType();
                          });
    p << ')';
  }
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(),
      {getSymNameAttrName(), getParamsAttrName()});
  p << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false,
                /*printBlockTerminators=*/false);
}

LogicalResult VariantOp::verifyRegions() {
  llvm::StringSet<> names;
  for (auto param : getParams().getAsRange<ParamAttr>())
    if (!names.insert(param.getName()).second)
      return emitOpError() << "declares parameter '" << param.getName()
                           << "' twice";
  SmallVector<HookOp> seen(getMaxEnumValForHookKind() + 1);
  for (Operation &op : getBody().front()) {
    auto hook = dyn_cast<HookOp>(op);
    if (!hook)
      return op.emitOpError()
             << "is not a hook; a variant body holds only attn.hook ops";
    HookOp &slot = seen[static_cast<unsigned>(hook.getKind())];
    if (slot)
      return hook.emitOpError()
             << "defines a second '" << stringifyHookKind(hook.getKind())
             << "' hook in variant @" << getSymName();
    slot = hook;
  }
  return success();
}

HookOp VariantOp::getHook(HookKind kind) {
  for (auto hook : getBody().getOps<HookOp>())
    if (hook.getKind() == kind)
      return hook;
  return nullptr;
}

ParamAttr VariantOp::getParam(StringRef name) {
  for (auto param : getParams().getAsRange<ParamAttr>())
    if (param.getName() == name)
      return param;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// HookOp
//===----------------------------------------------------------------------===//

SmallVector<Type> HookOp::getExpectedArgumentTypes(MLIRContext *ctx,
                                                   HookKind kind) {
  Type f32 = Float32Type::get(ctx);
  Type i32 = IntegerType::get(ctx, 32);
  switch (kind) {
  case HookKind::query_transform:
  case HookKind::key_transform:
    return {f32, f32, i32, i32, i32};
  case HookKind::logits_transform:
    return {f32, i32, i32, i32};
  case HookKind::logits_mask:
    return {i32, i32, i32};
  case HookKind::output_transform:
    return {f32, i32, i32, i32};
  case HookKind::sink:
    return {i32};
  }
  llvm_unreachable("unknown hook kind");
}

Type HookOp::getExpectedResultType(MLIRContext *ctx, HookKind kind) {
  if (kind == HookKind::logits_mask)
    return IntegerType::get(ctx, 1);
  return Float32Type::get(ctx);
}

SmallVector<StringRef> HookOp::getArgumentNames(HookKind kind) {
  switch (kind) {
  case HookKind::query_transform:
  case HookKind::key_transform:
    return {"x", "x_pair", "dim", "pos", "head"};
  case HookKind::logits_transform:
    return {"s", "q_pos", "k_pos", "head"};
  case HookKind::logits_mask:
    return {"q_pos", "k_pos", "head"};
  case HookKind::output_transform:
    return {"o", "dim", "q_pos", "head"};
  case HookKind::sink:
    return {"head"};
  }
  llvm_unreachable("unknown hook kind");
}

/// hook ::= `attn.hook` kind `(` (%arg `:` type),* `)` attr-dict-with-keyword
///          region
ParseResult HookOp::parse(OpAsmParser &parser, OperationState &result) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<HookKind> kind = symbolizeHookKind(keyword);
  if (!kind)
    return parser.emitError(loc)
           << "unknown hook kind '" << keyword
           << "'; expected query_transform, key_transform, logits_transform, "
              "logits_mask, output_transform or sink";
  result.addAttribute(getKindAttrName(result.name),
                      HookKindAttr::get(parser.getContext(), *kind));
  SmallVector<OpAsmParser::Argument> args;
  if (parser.parseArgumentList(args, OpAsmParser::Delimiter::Paren,
                               /*allowType=*/true))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("band"))) {
    BandAttr band;
    if (parser.parseCustomAttributeWithFallback(band))
      return failure();
    result.addAttribute(getBandAttrName(result.name), band);
  }
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Region *body = result.addRegion();
  return parser.parseRegion(*body, args);
}

void HookOp::print(OpAsmPrinter &p) {
  p << ' ' << stringifyHookKind(getKind()) << '(';
  Block &block = getBody().front();
  llvm::interleaveComma(block.getArguments(), p, [&](BlockArgument arg) {
    p.printRegionArgument(arg);
  });
  p << ')';
  if (BandAttr band = getBandAttr()) {
    p << " band ";
    p.printStrippedAttrOrType(band);
  }
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs(),
                                     {getKindAttrName(), getBandAttrName()});
  p << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false);
}

void HookOp::getAsmBlockArgumentNames(Region &region,
                                      OpAsmSetValueNameFn setNameFn) {
  if (region.empty())
    return;
  SmallVector<StringRef> names = getArgumentNames(getKind());
  for (auto [arg, name] : llvm::zip(region.front().getArguments(), names))
    setNameFn(arg, name);
}

LogicalResult HookOp::verifyRegions() {
  HookKind kind = getKind();
  StringRef kindName = stringifyHookKind(kind);
  Block &block = getBody().front();
  SmallVector<Type> expected = getExpectedArgumentTypes(getContext(), kind);
  SmallVector<StringRef> names = getArgumentNames(kind);
  if (block.getNumArguments() != expected.size()) {
    InFlightDiagnostic diag = emitOpError()
                              << "'" << kindName << "' hook takes "
                              << expected.size() << " arguments (";
    llvm::interleaveComma(llvm::zip(names, expected), diag, [&](auto pair) {
      diag << std::get<0>(pair) << " : " << std::get<1>(pair);
    });
    return diag << "), got " << block.getNumArguments();
  }
  for (auto [i, arg, type] : llvm::enumerate(block.getArguments(), expected))
    if (arg.getType() != type)
      return emitOpError() << "'" << kindName << "' hook argument #" << i
                           << " (" << names[i] << ") must be " << type
                           << ", got " << arg.getType();

  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return emitOpError() << "'" << kindName
                         << "' hook must end with attn.yield";
  Type resultType = getExpectedResultType(getContext(), kind);
  if (yield.getValue().getType() != resultType)
    return yield.emitOpError()
           << "'" << kindName << "' hook must yield " << resultType
           << ", got " << yield.getValue().getType();

  if (BandAttr band = getBandAttr()) {
    if (kind != HookKind::logits_mask)
      return emitOpError() << "declares a band, but only a logits_mask hook "
                              "may (the keys it can keep)";
    auto variant = (*this)->getParentOfType<VariantOp>();
    for (StringAttr name : {band.getLowerParam(), band.getUpperParam()}) {
      if (!name)
        continue;
      ParamAttr param = variant ? variant.getParam(name.getValue()) : nullptr;
      if (!param || !param.getType().isInteger(32))
        return emitOpError() << "band bound '" << name.getValue()
                             << "' must name an i32 parameter of the variant";
    }
  }

  // Hooks are inlined into every lane of the kernel: they compute values and
  // may read a parameter table, but never write, allocate or free memory.
  for (Operation &op : block.without_terminator()) {
    std::optional<SmallVector<MemoryEffects::EffectInstance>> effects =
        getEffectsRecursively(&op);
    if (!effects)
      return op.emitOpError()
             << "has unknown side effects; a hook may only compute values";
    for (const MemoryEffects::EffectInstance &effect : *effects)
      if (!isa<MemoryEffects::Read>(effect.getEffect()))
        return op.emitOpError()
               << "writes, allocates or frees memory; a hook may only compute "
                  "values and read parameters";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  auto variant = (*this)->getParentOfType<VariantOp>();
  if (!variant)
    return emitOpError() << "reads a variant parameter outside a variant";
  ParamAttr param = variant.getParam(getName());
  if (!param)
    return emitOpError() << "reads parameter '" << getName()
                         << "' that variant @" << variant.getSymName()
                         << " does not declare";
  if (param.getType() != getType())
    return emitOpError() << "reads parameter '" << getName() << "' as "
                         << getType() << " but it is declared "
                         << param.getType();
  return success();
}
