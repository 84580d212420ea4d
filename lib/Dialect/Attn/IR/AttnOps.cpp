//===- AttnOps.cpp - attention, merge_states, append_kv -------------------===//
//
// The attention op family. The verifiers check everything a kernel relies
// on (head counts, head dims, dtypes, that the cache tensors match the
// format, the number of index arrays, the variants and their parameters) and
// name the problem in the message.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/IR/Attn.h"
#include "attn/Dialect/Attn/Utils/TargetInfo.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::attn;

namespace mlir::attn {
void attachResultNames(MLIRContext *ctx);
} // namespace mlir::attn

#define GET_OP_CLASSES
#include "attn/Dialect/Attn/IR/AttnOps.cpp.inc"

/// Prints a dimension, `?` when dynamic.
static std::string dimStr(int64_t dim) {
  return ShapedType::isDynamic(dim) ? "?" : std::to_string(dim);
}

/// The positions of (tokens, heads, dim) in a cache tensor of `view`: paged
/// NHD is [page, token, head, dim], paged HND [page, head, token, dim],
/// ragged NHD [token, head, dim], ragged HND [head, token, dim].
struct CacheAxes {
  unsigned token, head, dim;
};
static CacheAxes getCacheAxes(BsrAttr view) {
  unsigned base = view.isPaged() ? 1 : 0;
  if (view.getLayout() == KVLayout::NHD)
    return {base, base + 1, base + 2};
  return {base + 1, base, base + 2};
}

/// Checks that `type` is a K/V cache tensor of `view` with `numKVHeads`
/// (or dynamic, filled in) heads of `headDim`.
/// `dynamicHeads`: the head count may be `?` (append_kv: its kernel takes
/// the head count as an argument; attention kernels are built for theirs).
static LogicalResult verifyCacheType(Operation *op, StringRef what,
                                     ShapedType type, BsrAttr view,
                                     int64_t headDim,
                                     bool dynamicHeads = false) {
  if (type.getRank() != view.getCacheRank())
    return op->emitOpError()
           << what << " has rank " << type.getRank() << " but a "
           << stringifyKVIndexing(view.getIndexing()) << " "
           << stringifyKVLayout(view.getLayout()) << " cache has rank "
           << view.getCacheRank() << " ("
           << (view.isPaged()
                   ? (view.getLayout() == KVLayout::NHD
                          ? "[pages, block_cols, heads, dim]"
                          : "[pages, heads, block_cols, dim]")
                   : (view.getLayout() == KVLayout::NHD ? "[tokens, heads, dim]"
                                                        : "[heads, tokens, dim]"))
           << ")";
  CacheAxes axes = getCacheAxes(view);
  if (type.getDimSize(axes.dim) != headDim)
    return op->emitOpError() << what << " has head dim "
                             << dimStr(type.getDimSize(axes.dim))
                             << " but the query has " << headDim;
  if (!dynamicHeads && ShapedType::isDynamic(type.getDimSize(axes.head)))
    return op->emitOpError() << what << " needs a static number of KV heads";
  if (view.isPaged() && type.getDimSize(axes.token) != view.getBlockCols())
    return op->emitOpError()
           << what << " holds blocks of " << dimStr(type.getDimSize(axes.token))
           << " tokens but the format's block_cols is " << view.getBlockCols();
  return success();
}

//===----------------------------------------------------------------------===//
// The destination form, shared by the four ops
//===----------------------------------------------------------------------===//

/// Checks that `operands` are all tensors or all memrefs, like `first`
/// (named `firstName`); the message names the first one that is not.
static LogicalResult
verifySameKind(Operation *op, Value first, StringRef firstName,
               ArrayRef<std::pair<Value, StringRef>> operands) {
  bool tensor = isa<RankedTensorType>(first.getType());
  for (auto [value, name] : operands) {
    if (!value || isa<RankedTensorType>(value.getType()) == tensor)
      continue;
    return op->emitOpError()
           << name << " is a " << (tensor ? "memref" : "tensor") << " but "
           << firstName << " is a " << (tensor ? "tensor" : "memref")
           << ": the operands are all tensors (value form) or all memrefs "
              "(destination form)";
  }
  return success();
}

/// Checks the destinations (`outs`) against the results: the memref form
/// needs both and has no results; the tensor form's results are the outs'
/// types when outs are given.
static LogicalResult verifyDestinations(Operation *op, bool tensorForm,
                                        ValueRange outs, TypeRange results) {
  if (!outs.empty() && outs.size() != 2)
    return op->emitOpError() << "takes two destinations, outs(%output, %lse), "
                                "got "
                             << outs.size();
  if (!tensorForm) {
    if (outs.empty())
      return op->emitOpError() << "on memrefs needs destinations: "
                                  "outs(%output, %lse : memref<...>, memref<...>)";
    if (!results.empty())
      return op->emitOpError() << "on memrefs has no results, got "
                               << results.size();
    return success();
  }
  if (results.size() != 2)
    return op->emitOpError() << "on tensors has two results (output, lse), got "
                             << results.size();
  for (auto [i, out, result] : llvm::enumerate(outs, results))
    if (out.getType() != result)
      return op->emitOpError()
             << "result #" << i << " " << result
             << " must have the type of its destination " << out.getType();
  return success();
}

/// Memory effects of the destination form: reads of the memref operands,
/// writes of the destinations. The value form has none.
static void
getDestinationFormEffects(Operation *op, MutableOperandRange inits,
                          bool initsRead,
                          SmallVectorImpl<SideEffects::EffectInstance<
                              MemoryEffects::Effect>> &effects) {
  auto isInit = [&](OpOperand &operand) {
    return llvm::any_of(inits,
                        [&](OpOperand &init) { return &init == &operand; });
  };
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    if (!isInit(operand) || initsRead)
      effects.emplace_back(MemoryEffects::Read::get(), &operand,
                           SideEffects::DefaultResource::get());
    if (isInit(operand))
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
  }
}

/// Names the tensor results as the ops did before the destination form made
/// them variadic (ODS names only fixed results): the printed value form stays
/// as it was. The memref form has no results to name.
template <typename OpTy>
struct ResultNames
    : public OpAsmOpInterface::ExternalModel<ResultNames<OpTy>, OpTy> {
  ResultNames() = default;
  void getAsmResultNames(Operation *op, OpAsmSetValueNameFn setNameFn) const {
    bool append = isa<AppendKVOp>(op);
    if (op->getNumResults() != 2)
      return;
    setNameFn(op->getResult(0), append ? "new_key_cache" : "output");
    setNameFn(op->getResult(1), append ? "new_value_cache" : "lse");
  }
};

void mlir::attn::attachResultNames(MLIRContext *ctx) {
  AttentionOp::attachInterface<ResultNames<AttentionOp>>(*ctx);
  MergeStatesOp::attachInterface<ResultNames<MergeStatesOp>>(*ctx);
  AppendKVOp::attachInterface<ResultNames<AppendKVOp>>(*ctx);
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

int64_t AttentionOp::getNumQoHeads() {
  return getQuery().getType().getDimSize(1);
}

int64_t AttentionOp::getHeadDim() { return getQuery().getType().getDimSize(2); }

int64_t AttentionOp::getNumKVHeads() {
  BsrAttr view = getViews().front();
  return getKeyCache().getType().getDimSize(getCacheAxes(view).head);
}

OperandRange AttentionOp::getViewIndices(unsigned view) {
  SmallVector<BsrAttr> views = getViews();
  assert(view < views.size() && "view out of range");
  unsigned begin = 0;
  for (unsigned i = 0; i < view; ++i)
    begin += views[i].getNumIndexArrays();
  return getIndices().slice(begin, views[view].getNumIndexArrays());
}

SmallVector<StringRef> AttentionOp::getVariantNames() {
  SmallVector<StringRef> names;
  if (std::optional<ArrayAttr> variants = getVariants())
    for (auto ref : variants->getAsRange<FlatSymbolRefAttr>())
      names.push_back(ref.getValue());
  return names;
}

/// Checks the tile attribute against the head configuration.
static LogicalResult verifyTile(AttentionOp op, TileAttr tile) {
  int64_t group = op.getGroupSize();
  if (tile.getGqaPack() > group || group % tile.getGqaPack() != 0)
    return op.emitOpError() << "packs " << tile.getGqaPack()
                            << " query heads per tile but the GQA group is "
                            << group << " (" << op.getNumQoHeads() << " / "
                            << op.getNumKVHeads() << ")";
  return success();
}

void AttentionOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getDestinationFormEffects(*this, getOutsMutable(), /*initsRead=*/false,
                            effects);
}

Speculation::Speculatability AttentionOp::getSpeculatability() {
  return hasTensorSemantics() ? Speculation::Speculatable
                              : Speculation::NotSpeculatable;
}

LogicalResult AttentionOp::verify() {
  ShapedType qType = getQuery().getType();
  SmallVector<std::pair<Value, StringRef>> operands = {
      {getKeyCache(), "key cache"}, {getValueCache(), "value cache"},
      {getMask(), "mask"}};
  for (Value index : getIndices())
    operands.push_back({index, "index array"});
  for (Value out : getOuts())
    operands.push_back({out, "destination"});
  if (failed(verifySameKind(*this, getQuery(), "the query", operands)) ||
      failed(verifyDestinations(*this, hasTensorSemantics(), getOuts(),
                                getTensorResults().getTypes())))
    return failure();
  if (qType.getRank() != 3)
    return emitOpError() << "query must be [rows, qo_heads, head_dim], got rank "
                         << qType.getRank();
  int64_t numQoHeads = qType.getDimSize(1), headDim = qType.getDimSize(2);
  if (ShapedType::isDynamic(numQoHeads) || ShapedType::isDynamic(headDim))
    return emitOpError() << "query needs static head count and head dim, got "
                         << qType;
  if (llvm::Error err = TargetInfo::checkHeadDim(headDim))
    return emitOpError() << llvm::toString(std::move(err));

  Type elementType = qType.getElementType();
  if (getKeyCache().getType() != getValueCache().getType())
    return emitOpError() << "key cache " << getKeyCache().getType()
                         << " and value cache " << getValueCache().getType()
                         << " must have the same type";
  if (getKeyCache().getType().getElementType() != elementType)
    return emitOpError() << "KV cache element type "
                         << getKeyCache().getType().getElementType()
                         << " differs from the query's " << elementType;

  SmallVector<BsrAttr> views = getViews();
  if (failed(verifyCacheType(*this, "key cache", getKeyCache().getType(),
                             views.front(), headDim)))
    return failure();
  int64_t numKVHeads = getNumKVHeads();
  if (numKVHeads < 1 || numQoHeads % numKVHeads != 0)
    return emitOpError() << "query heads (" << numQoHeads
                         << ") must be a multiple of KV heads (" << numKVHeads
                         << ")";

  unsigned expectedIndices = 0;
  for (BsrAttr view : views)
    expectedIndices += view.getNumIndexArrays();
  if (getIndices().size() != expectedIndices) {
    InFlightDiagnostic diag = emitOpError()
                              << "the format takes " << expectedIndices
                              << " index arrays (";
    SmallVector<std::string> names;
    for (auto [i, view] : llvm::enumerate(views))
      for (StringRef name : view.getIndexArrayNames())
        names.push_back(views.size() > 1
                            ? ("view" + std::to_string(i) + "." + name).str()
                            : name.str());
    llvm::interleaveComma(names, diag);
    return diag << "), got " << getIndices().size();
  }

  ShapedType oType = getOutputType();
  if (hasTensorSemantics() ? oType != qType
                           : oType.getElementType() != elementType ||
                                 failed(verifyCompatibleShape(oType, qType)))
    return emitOpError() << "output type " << oType
                         << " must equal the query type " << qType;
  ShapedType lseType = getLseType();
  if (lseType.getRank() != 2 || lseType.getDimSize(1) != numQoHeads ||
      !lseType.getElementType().isF32() ||
      failed(verifyCompatibleShape(ArrayRef<int64_t>{lseType.getDimSize(0)},
                                   ArrayRef<int64_t>{qType.getDimSize(0)})))
    return emitOpError() << "lse must be [rows, qo_heads] = ["
                         << dimStr(qType.getDimSize(0)) << ", " << numQoHeads
                         << "] of f32, got " << lseType;

  if (getMask()) {
    if (getMask().getType().getRank() != 1)
      return emitOpError() << "mask must be a flat array of i1, or of i8 "
                              "bit-packed; got "
                           << getMask().getType();
    if (llvm::is_contained(getVariantNames(), "causal"))
      return emitOpError() << "a custom mask replaces causal masking; drop "
                              "the 'causal' variant or the mask";
  }

  if (std::optional<TileAttr> tile = getTile())
    if (failed(verifyTile(*this, *tile)))
      return failure();
  if (std::optional<ArrayAttr> candidates = getTileCandidates())
    for (auto tile : candidates->getAsRange<TileAttr>())
      if (failed(verifyTile(*this, tile)))
        return failure();
  return success();
}

/// Finds the variant `name` for `op`: defined in an enclosing symbol table,
/// or else a built-in.
static VariantOp lookupVariant(Operation *op, StringRef name) {
  auto nameAttr = StringAttr::get(op->getContext(), name);
  for (Operation *scope = op->getParentOp(); scope;
       scope = scope->getParentOp())
    if (scope->hasTrait<OpTrait::SymbolTable>())
      if (auto variant = dyn_cast_or_null<VariantOp>(
              SymbolTable::lookupSymbolIn(scope, nameAttr)))
        return variant;
  auto *dialect = op->getContext()->getLoadedDialect<AttnDialect>();
  return dyn_cast_or_null<VariantOp>(dialect->lookupBuiltinVariant(name));
}

LogicalResult
AttentionOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  llvm::StringSet<> seen;
  SmallVector<ParamAttr> params;
  VariantOp sinkVariant;
  for (StringRef name : getVariantNames()) {
    if (!seen.insert(name).second)
      return emitOpError() << "lists variant @" << name << " twice";
    VariantOp variant = lookupVariant(*this, name);
    if (!variant) {
      auto *dialect = getContext()->getLoadedDialect<AttnDialect>();
      InFlightDiagnostic diag =
          emitOpError() << "uses unknown variant @" << name
                        << "; define it with attn.variant or use a built-in (";
      llvm::interleaveComma(dialect->getBuiltinVariantNames(), diag);
      return diag << ")";
    }
    if (variant.getHook(HookKind::sink)) {
      if (sinkVariant)
        return emitOpError() << "variants @" << sinkVariant.getSymName()
                             << " and @" << name
                             << " both define a sink; at most one may";
      sinkVariant = variant;
    }
    for (auto param : variant.getParams().getAsRange<ParamAttr>())
      params.push_back(param);
  }

  auto printParams = [&](InFlightDiagnostic &diag) {
    diag << " (";
    llvm::interleaveComma(params, diag, [&](ParamAttr param) {
      diag << param.getName() << " : " << param.getType();
    });
    diag << ")";
  };
  if (getParams().size() != params.size()) {
    InFlightDiagnostic diag = emitOpError()
                              << "the variants take " << params.size()
                              << " parameters";
    printParams(diag);
    return diag << ", got " << getParams().size();
  }
  for (auto [i, value, param] : llvm::enumerate(getParams(), params))
    if (value.getType() != param.getType())
      return emitOpError() << "parameter #" << i << " ('" << param.getName()
                           << "') must be " << param.getType() << ", got "
                           << value.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// MergeStatesOp
//===----------------------------------------------------------------------===//

/// merge ::= `attn.merge_states` %o (`,` %o)* `lse` %s (`,` %s)*
///           (`mask` %m)? (`outs` `(` %out `,` %lse `:` type `,` type `)`)?
///           attr-dict `:` partial-type `,` lse-type (`,` mask-type)?
///           (`->` output-type)?
/// Tensor states have results (output-type, lse-type); memref states none.
ParseResult MergeStatesOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand> outputs, lses, outs;
  SmallVector<Type> outsTypes;
  OpAsmParser::UnresolvedOperand mask;
  Type partialType, lseType, maskType, outputType;
  if (parser.parseOperandList(outputs) || parser.parseKeyword("lse") ||
      parser.parseOperandList(lses))
    return failure();
  bool hasMask = succeeded(parser.parseOptionalKeyword("mask"));
  if (hasMask && parser.parseOperand(mask))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("outs")) &&
      (parser.parseLParen() || parser.parseOperandList(outs) ||
       parser.parseColonTypeList(outsTypes) || parser.parseRParen()))
    return failure();
  if (parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseType(partialType) || parser.parseComma() ||
      parser.parseType(lseType) ||
      (hasMask && (parser.parseComma() || parser.parseType(maskType))))
    return failure();
  bool hasResults = succeeded(parser.parseOptionalArrow());
  if (hasResults && parser.parseType(outputType))
    return failure();
  if (parser.resolveOperands(outputs, partialType, result.operands) ||
      parser.resolveOperands(lses, lseType, result.operands) ||
      (hasMask && parser.resolveOperand(mask, maskType, result.operands)) ||
      parser.resolveOperands(outs, outsTypes, parser.getCurrentLocation(),
                             result.operands))
    return failure();
  result.addAttribute(getOperandSegmentSizesAttrName(result.name),
                      parser.getBuilder().getDenseI32ArrayAttr(
                          {static_cast<int32_t>(outputs.size()),
                           static_cast<int32_t>(lses.size()),
                           hasMask ? 1 : 0,
                           static_cast<int32_t>(outs.size())}));
  if (hasResults)
    result.addTypes({outputType, lseType});
  return success();
}

void MergeStatesOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  getDestinationFormEffects(*this, getOutsMutable(), /*initsRead=*/false,
                            effects);
}

Speculation::Speculatability MergeStatesOp::getSpeculatability() {
  return hasTensorSemantics() ? Speculation::Speculatable
                              : Speculation::NotSpeculatable;
}

void MergeStatesOp::print(OpAsmPrinter &p) {
  p << ' ' << getOutputs() << " lse " << getLses();
  if (getMask())
    p << " mask " << getMask();
  if (!getOuts().empty())
    p << " outs(" << getOuts() << " : " << getOuts().getTypes() << ")";
  p.printOptionalAttrDict((*this)->getAttrs(),
                          {getOperandSegmentSizesAttrName()});
  p << " : " << getOutputs().front().getType() << ", "
    << getLses().front().getType();
  if (getMask())
    p << ", " << getMask().getType();
  if (!getTensorResults().empty())
    p << " -> " << getTensorResults().front().getType();
}

LogicalResult MergeStatesOp::verify() {
  if (getOutputs().size() < 2)
    return emitOpError() << "merges at least two states, got "
                         << getOutputs().size();
  if (getOutputs().size() != getLses().size())
    return emitOpError() << "has " << getOutputs().size() << " outputs but "
                         << getLses().size() << " LSEs";
  Type partialType = getOutputs().front().getType();
  Type lseType = getLses().front().getType();
  for (Value v : getOutputs())
    if (v.getType() != partialType)
      return emitOpError() << "partial outputs must share one type, got "
                           << partialType << " and " << v.getType();
  for (Value v : getLses())
    if (v.getType() != lseType)
      return emitOpError() << "LSEs must share one type, got " << lseType
                           << " and " << v.getType();
  SmallVector<std::pair<Value, StringRef>> operands;
  for (Value v : getLses())
    operands.push_back({v, "LSE"});
  operands.push_back({getMask(), "mask"});
  for (Value v : getOuts())
    operands.push_back({v, "destination"});
  if (failed(verifySameKind(*this, getOutputs().front(), "the first state",
                            operands)) ||
      failed(verifyDestinations(*this, hasTensorSemantics(), getOuts(),
                                getTensorResults().getTypes())))
    return failure();
  auto partial = cast<ShapedType>(partialType);
  auto lse = cast<ShapedType>(lseType);
  if (partial.getRank() != 3 || lse.getRank() != 2)
    return emitOpError() << "states are [rows, heads, dim] outputs with "
                            "[rows, heads] LSEs, got "
                         << partial << " and " << lse;
  if (failed(verifyCompatibleShape(partial.getShape().take_front(2),
                                   lse.getShape())))
    return emitOpError() << "output " << partial << " and LSE " << lse
                         << " disagree on [rows, heads]";
  if (failed(verifyCompatibleShape(getOutputType().getShape(),
                                   partial.getShape())))
    return emitOpError() << "merged output " << getOutputType()
                         << " must have the shape of the partial outputs "
                         << partial;
  if (hasTensorSemantics() ? getLseType() != lseType
                           : failed(verifyCompatibleShape(getLseType(), lse)) ||
                                 !getLseType().getElementType().isF32())
    return emitOpError() << "merged LSE must have type " << lseType;
  if (Value mask = getMask()) {
    auto maskType = cast<ShapedType>(mask.getType());
    if (maskType.getRank() != 1 ||
        failed(verifyCompatibleShape(maskType.getShape(),
                                     partial.getShape().take_front(1))))
      return emitOpError() << "mask " << maskType
                           << " must have one byte per row of " << partial;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// AppendKVOp
//===----------------------------------------------------------------------===//

LogicalResult AppendKVOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  // Tensor caches come back updated; memref caches are written in place.
  if (operands.size() > 3 && isa<RankedTensorType>(operands[2].getType()))
    inferredReturnTypes.append({operands[2].getType(), operands[3].getType()});
  return success();
}

void AppendKVOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  // Tokens are written into pages: the rest of each cache is kept.
  getDestinationFormEffects(*this, getDpsInitsMutable(), /*initsRead=*/true,
                            effects);
}

Speculation::Speculatability AppendKVOp::getSpeculatability() {
  return hasTensorSemantics() ? Speculation::Speculatable
                              : Speculation::NotSpeculatable;
}

LogicalResult AppendKVOp::verify() {
  BsrAttr format = getFormat();
  if (!format.isPaged())
    return emitOpError() << "appends into pages; the format must be paged";
  SmallVector<std::pair<Value, StringRef>> operands = {
      {getValue(), "the value"},
      {getKeyCache(), "key cache"},
      {getValueCache(), "value cache"}};
  for (Value index : getIndices())
    operands.push_back({index, "index array"});
  if (failed(verifySameKind(*this, getKey(), "the key", operands)))
    return failure();
  ShapedType keyType = getKey().getType();
  if (keyType.getRank() != 3 || ShapedType::isDynamic(keyType.getDimSize(2)))
    return emitOpError() << "new keys must be [tokens, kv_heads, head_dim] "
                            "with a static head dim, got "
                         << keyType;
  int64_t headDim = keyType.getDimSize(2);
  if (keyType.getElementType() != getKeyCache().getType().getElementType())
    return emitOpError() << "new keys are " << keyType.getElementType()
                         << " but the cache holds "
                         << getKeyCache().getType().getElementType();
  if (failed(verifyCacheType(*this, "key cache", getKeyCache().getType(),
                             format, headDim, /*dynamicHeads=*/true)))
    return failure();
  int64_t cacheHeads =
      getKeyCache().getType().getDimSize(getCacheAxes(format).head);
  if (failed(verifyCompatibleShape({cacheHeads}, {keyType.getDimSize(1)})))
    return emitOpError() << "new keys have " << keyType.getDimSize(1)
                         << " heads but the cache has " << cacheHeads;
  if (getIndices().size() != 4)
    return emitOpError() << "takes 4 index arrays (batch_indices, positions, "
                            "kv_indptr, kv_indices), got "
                         << getIndices().size();
  return success();
}

//===----------------------------------------------------------------------===//
// CopyIndicesOp
//===----------------------------------------------------------------------===//

LogicalResult CopyIndicesOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands,
    DictionaryAttr, OpaqueProperties, RegionRange,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  // Tensor destinations come back updated; memref ones are written in place.
  // The operands are sources then destinations, as many of each.
  if (operands.empty() || operands.size() % 2 ||
      !isa<RankedTensorType>(operands.front().getType()))
    return success();
  for (Value destination : operands.drop_front(operands.size() / 2))
    inferredReturnTypes.push_back(destination.getType());
  return success();
}

void CopyIndicesOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  // A destination longer than its source keeps its tail.
  getDestinationFormEffects(*this, getDpsInitsMutable(), /*initsRead=*/true,
                            effects);
}

Speculation::Speculatability CopyIndicesOp::getSpeculatability() {
  return hasTensorSemantics() ? Speculation::Speculatable
                              : Speculation::NotSpeculatable;
}

LogicalResult CopyIndicesOp::verify() {
  const int64_t pairs = getSources().size();
  if (pairs < 1 || pairs > kMaxPairs)
    return emitOpError() << "copies 1 to " << kMaxPairs
                         << " arrays in one kernel, got " << pairs;
  SmallVector<std::pair<Value, StringRef>> operands;
  for (Value v : getOperands().drop_front())
    operands.push_back({v, "an operand"});
  if (failed(verifySameKind(*this, getSources().front(), "the first source",
                            operands)))
    return failure();
  for (auto [i, source, destination] :
       llvm::enumerate(getSources(), getDestinations())) {
    int64_t from = cast<ShapedType>(source.getType()).getDimSize(0);
    int64_t to = cast<ShapedType>(destination.getType()).getDimSize(0);
    if (!ShapedType::isDynamic(from) && !ShapedType::isDynamic(to) && from > to)
      return emitOpError() << "source #" << i << " holds " << from
                           << " indices but its destination only " << to;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// CopyByTableOp
//===----------------------------------------------------------------------===//

void CopyByTableOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  // The table is read; the memory its rows name is read and written, and
  // nothing says which: the default resource.
  effects.emplace_back(MemoryEffects::Read::get(), &getTableMutable(),
                       SideEffects::DefaultResource::get());
  effects.emplace_back(MemoryEffects::Read::get(),
                       SideEffects::DefaultResource::get());
  effects.emplace_back(MemoryEffects::Write::get(),
                       SideEffects::DefaultResource::get());
}

LogicalResult CopyByTableOp::verify() {
  const int64_t rows = getRows();
  if (rows < 1 || rows > kMaxRows)
    return emitOpError() << "reads 1 to " << kMaxRows
                         << " table rows in one kernel, got " << rows;
  int64_t words = getTable().getType().getDimSize(0);
  if (!ShapedType::isDynamic(words) && words < kRowWords * rows)
    return emitOpError() << "reads " << rows << " rows of " << kRowWords
                         << " words from a table of " << words;
  return success();
}
