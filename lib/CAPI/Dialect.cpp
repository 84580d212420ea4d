//===- Dialect.cpp - C API of the attn dialect ------------------------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// attn-c/Dialect.h over the C++ dialect: registration of the dialect, of the
// dialects its pipelines need and of its passes, the #attn.bsr /
// #attn.composed / #attn.tile builders and getters, and the op builders.
// Attribute builders go through getChecked and op builders through the op's
// verifier, so invalid parameters are a diagnostic and a null result, never
// an assertion.
//
//===----------------------------------------------------------------------===//

#include "attn-c/Dialect.h"

#include "attn/Conversion/AttnToGPU/AttnToGPU.h"
#include "attn/Dialect/Attn/IR/Attn.h"
#include "attn/InitAllDialects.h"
#include "attn/InitAllPasses.h"
#include "attn/Target/Serialization.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <functional>
#include <mutex>

using namespace mlir;
namespace attn = mlir::attn;

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Attn, attn, attn::AttnDialect)

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

void attnRegisterAllDialects(MlirDialectRegistry registry) {
  DialectRegistry &r = *unwrap(registry);
  attn::registerAllDialects(r);
  attn::registerKernelDialects(r);
  attn::registerTargetDialectsAndInterfaces(r);
}

void attnContextLoadAllDialects(MlirContext context) {
  DialectRegistry registry;
  attnRegisterAllDialects(wrap(&registry));
  MLIRContext *ctx = unwrap(context);
  ctx->appendDialectRegistry(registry);
  ctx->loadAllAvailableDialects();
}

void attnRegisterAllPasses(void) {
  // The pass registry is global and rejects a second registration of a name.
  static std::once_flag once;
  std::call_once(once, [] { attn::registerAllPasses(); });
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {
/// Emits a verifier's message as an error on the context's diagnostic
/// engine (unknown location), for Attr::getChecked.
struct Emitter {
  MLIRContext *context;
  InFlightDiagnostic operator()() const {
    return emitError(UnknownLoc::get(context));
  }
};

MlirAttribute nullAttr() { return MlirAttribute{nullptr}; }
} // namespace

//===----------------------------------------------------------------------===//
// #attn.bsr
//===----------------------------------------------------------------------===//

bool attnAttributeIsABsr(MlirAttribute attr) {
  return isa<attn::BsrAttr>(unwrap(attr));
}

MlirAttribute attnBsrAttrGet(MlirContext ctx, int64_t blockRows,
                             int64_t blockCols, int32_t layout,
                             int32_t indexing) {
  MLIRContext *context = unwrap(ctx);
  std::optional<attn::KVLayout> l = attn::symbolizeKVLayout(uint32_t(layout));
  std::optional<attn::KVIndexing> i =
      attn::symbolizeKVIndexing(uint32_t(indexing));
  if (layout < 0 || !l) {
    emitError(UnknownLoc::get(context))
        << "#attn.bsr: layout " << layout << " is not an AttnKVLayout";
    return nullAttr();
  }
  if (indexing < 0 || !i) {
    emitError(UnknownLoc::get(context))
        << "#attn.bsr: indexing " << indexing << " is not an AttnKVIndexing";
    return nullAttr();
  }
  return wrap(attn::BsrAttr::getChecked(Emitter{context}, context, blockRows,
                                        blockCols, *l, *i, /*strided=*/false));
}

int64_t attnBsrAttrDynamicBlockRows(void) { return ShapedType::kDynamic; }

int64_t attnBsrAttrGetBlockRows(MlirAttribute attr) {
  return cast<attn::BsrAttr>(unwrap(attr)).getBlockRows();
}
int64_t attnBsrAttrGetBlockCols(MlirAttribute attr) {
  return cast<attn::BsrAttr>(unwrap(attr)).getBlockCols();
}
int32_t attnBsrAttrGetLayout(MlirAttribute attr) {
  return int32_t(cast<attn::BsrAttr>(unwrap(attr)).getLayout());
}
int32_t attnBsrAttrGetIndexing(MlirAttribute attr) {
  return int32_t(cast<attn::BsrAttr>(unwrap(attr)).getIndexing());
}
intptr_t attnBsrAttrGetNumIndexArrays(MlirAttribute attr) {
  return cast<attn::BsrAttr>(unwrap(attr)).getNumIndexArrays();
}
MlirStringRef attnBsrAttrGetIndexArrayName(MlirAttribute attr, intptr_t pos) {
  // The names are string literals in BsrAttr::getIndexArrayNames.
  return wrap(cast<attn::BsrAttr>(unwrap(attr)).getIndexArrayNames()[pos]);
}
MlirTypeID attnBsrAttrGetTypeID(void) {
  return wrap(TypeID::get<attn::BsrAttr>());
}

//===----------------------------------------------------------------------===//
// #attn.composed
//===----------------------------------------------------------------------===//

bool attnAttributeIsAComposed(MlirAttribute attr) {
  return isa<attn::ComposedAttr>(unwrap(attr));
}

MlirAttribute attnComposedAttrGet(MlirContext ctx, intptr_t numViews,
                                  MlirAttribute const *views) {
  MLIRContext *context = unwrap(ctx);
  if (numViews < 0 || (numViews > 0 && !views)) {
    emitError(UnknownLoc::get(context))
        << "#attn.composed: no views given";
    return nullAttr();
  }
  SmallVector<attn::BsrAttr> list;
  for (intptr_t i = 0; i < numViews; ++i) {
    auto view = dyn_cast_or_null<attn::BsrAttr>(unwrap(views[i]));
    if (!view) {
      emitError(UnknownLoc::get(context))
          << "#attn.composed: view " << i << " is not an #attn.bsr";
      return nullAttr();
    }
    list.push_back(view);
  }
  return wrap(attn::ComposedAttr::getChecked(Emitter{context}, context,
                                             ArrayRef<attn::BsrAttr>(list)));
}

intptr_t attnComposedAttrGetNumViews(MlirAttribute attr) {
  return cast<attn::ComposedAttr>(unwrap(attr)).getViewList().size();
}
MlirAttribute attnComposedAttrGetView(MlirAttribute attr, intptr_t pos) {
  return wrap(cast<attn::ComposedAttr>(unwrap(attr)).getViewList()[pos]);
}
MlirTypeID attnComposedAttrGetTypeID(void) {
  return wrap(TypeID::get<attn::ComposedAttr>());
}

//===----------------------------------------------------------------------===//
// #attn.tile
//===----------------------------------------------------------------------===//

bool attnAttributeIsATile(MlirAttribute attr) {
  return isa<attn::TileAttr>(unwrap(attr));
}

MlirAttribute attnTileAttrGet(MlirContext ctx, int64_t q, int64_t kv,
                              int64_t warps, int64_t stages, int64_t gqaPack,
                              int64_t ctasPerSM) {
  MLIRContext *context = unwrap(ctx);
  return wrap(attn::TileAttr::getChecked(Emitter{context}, context, q, kv,
                                         warps, stages, gqaPack, ctasPerSM));
}

int64_t attnTileAttrGetQ(MlirAttribute attr) {
  return cast<attn::TileAttr>(unwrap(attr)).getQ();
}
int64_t attnTileAttrGetKv(MlirAttribute attr) {
  return cast<attn::TileAttr>(unwrap(attr)).getKv();
}
int64_t attnTileAttrGetWarps(MlirAttribute attr) {
  return cast<attn::TileAttr>(unwrap(attr)).getWarps();
}
int64_t attnTileAttrGetStages(MlirAttribute attr) {
  return cast<attn::TileAttr>(unwrap(attr)).getStages();
}
int64_t attnTileAttrGetGqaPack(MlirAttribute attr) {
  return cast<attn::TileAttr>(unwrap(attr)).getGqaPack();
}
int64_t attnTileAttrGetCtasPerSM(MlirAttribute attr) {
  return cast<attn::TileAttr>(unwrap(attr)).getCtasPerSm();
}
MlirTypeID attnTileAttrGetTypeID(void) {
  return wrap(TypeID::get<attn::TileAttr>());
}

//===----------------------------------------------------------------------===//
// Operations
//===----------------------------------------------------------------------===//

namespace {
MlirOperation nullOp() { return MlirOperation{nullptr}; }

/// Values of a C array; false (with an error at `loc`) when one is null or
/// the array is missing.
bool unwrapValues(Location loc, StringRef op, StringRef what, intptr_t n,
                  MlirValue const *values, SmallVectorImpl<Value> &out) {
  if (n < 0 || (n > 0 && !values)) {
    emitError(loc) << op << ": no " << what << " given";
    return false;
  }
  for (intptr_t i = 0; i < n; ++i) {
    if (mlirValueIsNull(values[i])) {
      emitError(loc) << op << ": " << what << " " << i << " is null";
      return false;
    }
    out.push_back(unwrap(values[i]));
  }
  return true;
}

/// The built op if it verifies; else erased, its diagnostics emitted.
MlirOperation verified(Operation *op) {
  if (succeeded(verify(op)))
    return wrap(op);
  op->erase();
  return nullOp();
}
} // namespace

MlirOperation attnAttentionOpCreate(
    MlirLocation location, MlirValue query, MlirValue keyCache,
    MlirValue valueCache, MlirAttribute format, intptr_t numIndices,
    MlirValue const *indices, MlirValue mask, MlirValue smScale,
    intptr_t numVariants, MlirStringRef const *variants, intptr_t numParams,
    MlirValue const *params) {
  Location loc = unwrap(location);
  MLIRContext *context = loc.getContext();
  constexpr StringLiteral op = "attn.attention";
  if (mlirValueIsNull(query) || mlirValueIsNull(keyCache) ||
      mlirValueIsNull(valueCache)) {
    emitError(loc) << op << ": the query and both caches are required";
    return nullOp();
  }
  if (mlirAttributeIsNull(format)) {
    emitError(loc) << op << ": no format given";
    return nullOp();
  }
  auto queryType = dyn_cast<RankedTensorType>(unwrap(query).getType());
  if (!queryType || queryType.getRank() != 3) {
    emitError(loc) << op << ": the query must be a tensor<rows x Hq x D>, got "
                   << unwrap(query).getType();
    return nullOp();
  }
  SmallVector<Value> indexValues, paramValues;
  if (!unwrapValues(loc, op, "index array", numIndices, indices,
                    indexValues) ||
      !unwrapValues(loc, op, "variant parameter", numParams, params,
                    paramValues))
    return nullOp();
  if (numVariants < 0 || (numVariants > 0 && !variants)) {
    emitError(loc) << op << ": no variant names given";
    return nullOp();
  }
  OpBuilder builder(context);
  ArrayAttr variantList;
  if (numVariants > 0) {
    SmallVector<Attribute> names;
    for (intptr_t i = 0; i < numVariants; ++i)
      names.push_back(FlatSymbolRefAttr::get(context, unwrap(variants[i])));
    variantList = builder.getArrayAttr(names);
  }
  auto lseType =
      RankedTensorType::get({queryType.getDimSize(0), queryType.getDimSize(1)},
                            Float32Type::get(context));
  Value maskValue = mlirValueIsNull(mask) ? Value() : unwrap(mask);
  Value scaleValue = mlirValueIsNull(smScale) ? Value() : unwrap(smScale);
  auto attention = attn::AttentionOp::create(
      builder, loc, queryType, lseType, unwrap(query), unwrap(keyCache),
      unwrap(valueCache), indexValues, maskValue, scaleValue, paramValues,
      unwrap(format), variantList, attn::TileAttr(), ArrayAttr());
  return verified(attention);
}

MlirOperation attnMergeStatesOpCreate(MlirLocation location,
                                      intptr_t numStates,
                                      MlirValue const *outputs,
                                      MlirValue const *lses,
                                      MlirType outputElementType) {
  Location loc = unwrap(location);
  constexpr StringLiteral op = "attn.merge_states";
  SmallVector<Value> outputValues, lseValues;
  if (!unwrapValues(loc, op, "partial output", numStates, outputs,
                    outputValues) ||
      !unwrapValues(loc, op, "partial LSE", numStates, lses, lseValues))
    return nullOp();
  if (numStates == 0) {
    emitError(loc) << op << ": no states to merge";
    return nullOp();
  }
  auto outputType = dyn_cast<RankedTensorType>(outputValues[0].getType());
  if (!outputType) {
    emitError(loc) << op << ": partial outputs must be ranked tensors, got "
                   << outputValues[0].getType();
    return nullOp();
  }
  if (!mlirTypeIsNull(outputElementType))
    outputType = outputType.clone(unwrap(outputElementType));
  OpBuilder builder(loc.getContext());
  auto merge = attn::MergeStatesOp::create(builder, loc, outputType,
                                           lseValues[0].getType(),
                                           outputValues, lseValues,
                                           /*mask=*/Value());
  return verified(merge);
}

MlirOperation attnAppendKVOpCreate(MlirLocation location, MlirValue key,
                                   MlirValue value, MlirValue keyCache,
                                   MlirValue valueCache, MlirAttribute format,
                                   intptr_t numIndices,
                                   MlirValue const *indices) {
  Location loc = unwrap(location);
  constexpr StringLiteral op = "attn.append_kv";
  if (mlirValueIsNull(key) || mlirValueIsNull(value) ||
      mlirValueIsNull(keyCache) || mlirValueIsNull(valueCache)) {
    emitError(loc) << op << ": the new keys, values and both caches are "
                            "required";
    return nullOp();
  }
  auto bsr = dyn_cast_or_null<attn::BsrAttr>(unwrap(format));
  if (!bsr) {
    emitError(loc) << op << ": the format must be one #attn.bsr view";
    return nullOp();
  }
  SmallVector<Value> indexValues;
  if (!unwrapValues(loc, op, "index array", numIndices, indices, indexValues))
    return nullOp();
  Value cache = unwrap(keyCache);
  OpBuilder builder(loc.getContext());
  auto append = attn::AppendKVOp::create(
      builder, loc, cache.getType(), unwrap(valueCache).getType(), unwrap(key),
      unwrap(value), cache, unwrap(valueCache), indexValues, bsr);
  return verified(append);
}
