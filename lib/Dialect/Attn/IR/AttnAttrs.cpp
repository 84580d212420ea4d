//===- AttnAttrs.cpp - KV formats, tiles and variant params ---------------===//
//
// Verifiers of the attn attributes and the format arithmetic that the
// passes, the verifiers and the kernel generator share: how many blocks a
// request occupies, how full its last block is, which index arrays a view
// takes.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/IR/Attn.h"
#include "attn/Dialect/Attn/IR/TileLayout.h"
#include "attn/Dialect/Attn/Utils/TargetInfo.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::attn;

#include "attn/Dialect/Attn/IR/AttnEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "attn/Dialect/Attn/IR/AttnAttrs.cpp.inc"

void AttnDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "attn/Dialect/Attn/IR/AttnAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Custom parameters
//===----------------------------------------------------------------------===//

FailureOr<int64_t> mlir::attn::parseBlockRows(AsmParser &parser) {
  if (succeeded(parser.parseOptionalQuestion()))
    return ShapedType::kDynamic;
  int64_t rows = 0;
  if (parser.parseInteger(rows))
    return failure();
  return rows;
}

void mlir::attn::printBlockRows(AsmPrinter &printer, int64_t blockRows) {
  if (ShapedType::isDynamic(blockRows))
    printer << "?";
  else
    printer << blockRows;
}

FailureOr<bool> mlir::attn::parseFlag(AsmParser &parser) {
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (succeeded(parser.parseOptionalKeyword("false")))
    return false;
  return parser.emitError(parser.getCurrentLocation(),
                          "expected 'true' or 'false'");
}

//===----------------------------------------------------------------------===//
// BsrAttr
//===----------------------------------------------------------------------===//

/// The largest page the planner and kernels index (a block's token offset
/// and the page index times the page size stay far inside 32 bits); vLLM and
/// FlashInfer use 1 to 256.
static constexpr int64_t kMaxBlockCols = 1 << 16;

LogicalResult BsrAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                              int64_t blockRows, int64_t blockCols,
                              KVLayout layout, KVIndexing indexing,
                              bool strided) {
  if (!ShapedType::isDynamic(blockRows) && blockRows < 1)
    return emitError() << "block_rows must be at least 1 (or ? when it "
                          "varies), got "
                       << blockRows;
  if (blockCols < 1 || blockCols > kMaxBlockCols)
    return emitError() << "block_cols (the page size) must be in [1, "
                       << kMaxBlockCols << "], got " << blockCols;
  if (indexing == KVIndexing::ragged && blockCols != 1)
    return emitError() << "a ragged format indexes tokens: block_cols must be "
                          "1, got "
                       << blockCols;
  if (strided && indexing != KVIndexing::ragged)
    return emitError() << "strided = true is for ragged formats: a paged "
                          "cache's pages are found by a page stride at "
                          "launch and are dense inside";
  return success();
}

unsigned BsrAttr::getNumIndexArrays() const {
  return getIndexArrayNames().size();
}

SmallVector<StringRef> BsrAttr::getIndexArrayNames() const {
  if (isRagged())
    return {"qo_indptr", "kv_indptr"};
  if (isColumnVector())
    return {"qo_indptr", "kv_indptr", "kv_indices"};
  return {"qo_indptr", "kv_indptr", "kv_indices", "kv_last_len"};
}

int64_t BsrAttr::getNumBlocks(int64_t kvLen) const {
  return kvLen <= 0 ? 0 : llvm::divideCeil(kvLen, getBlockCols());
}

int64_t BsrAttr::getLastBlockLen(int64_t kvLen) const {
  if (kvLen <= 0)
    return 0;
  return kvLen - (getNumBlocks(kvLen) - 1) * getBlockCols();
}

int64_t BsrAttr::getKVLen(int64_t numBlocks, int64_t lastBlockLen) const {
  if (numBlocks <= 0)
    return 0;
  return (numBlocks - 1) * getBlockCols() + lastBlockLen;
}


//===----------------------------------------------------------------------===//
// ComposedAttr
//===----------------------------------------------------------------------===//

LogicalResult
ComposedAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     ArrayRef<BsrAttr> views) {
  if (views.size() < 2)
    return emitError() << "a composed format needs at least two views, got "
                       << views.size();
  BsrAttr first = views.front();
  for (auto [i, view] : llvm::enumerate(views.drop_front())) {
    // The views see one physical cache: only their row blocking may differ.
    if (view.getBlockCols() != first.getBlockCols())
      return emitError() << "view " << i + 1 << " has block_cols "
                         << view.getBlockCols() << " but view 0 has "
                         << first.getBlockCols()
                         << "; the views of one cache share block_cols";
    if (view.getLayout() != first.getLayout())
      return emitError() << "view " << i + 1 << " has layout "
                         << stringifyKVLayout(view.getLayout())
                         << " but view 0 has "
                         << stringifyKVLayout(first.getLayout())
                         << "; the views of one cache share a layout";
    if (view.getIndexing() != first.getIndexing())
      return emitError() << "view " << i + 1 << " is "
                         << stringifyKVIndexing(view.getIndexing())
                         << " but view 0 is "
                         << stringifyKVIndexing(first.getIndexing())
                         << "; the views of one cache share their indexing";
  }
  return success();
}

unsigned ComposedAttr::getNumIndexArrays() const {
  unsigned n = 0;
  for (BsrAttr view : getViewList())
    n += view.getNumIndexArrays();
  return n;
}

SmallVector<BsrAttr> mlir::attn::getFormatViews(Attribute format) {
  if (auto composed = dyn_cast<ComposedAttr>(format))
    return SmallVector<BsrAttr>(composed.getViewList());
  return {cast<BsrAttr>(format)};
}

//===----------------------------------------------------------------------===//
// TileAttr
//===----------------------------------------------------------------------===//

LogicalResult TileAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t q, int64_t kv, int64_t warps,
                               int64_t stages, int64_t gqaPack,
                               int64_t ctasPerSM, bool kvTma) {
  if (!llvm::is_contained({16, 64, 128, 192}, q))
    return emitError() << "query tile q must be 16, 64, 128 or 192, got " << q;
  if (kv < 16 || kv > 256 || kv % 16)
    return emitError() << "KV tile kv must be a multiple of 16 in [16, 256], "
                          "got "
                       << kv;
  if (warps < 1 || warps > 16)
    return emitError() << "warps must be in [1, 16], got " << warps;
  if (q > 16 && warps != q / 16)
    return emitError() << "a " << q << "-row tile gives each warp 16 rows: "
                       << "warps must be " << q / 16 << ", got " << warps;
  if (stages < 1 || stages > 8)
    return emitError() << "stages must be in [1, 8], got " << stages;
  if (gqaPack < 1 || gqaPack > q)
    return emitError() << "gqa_pack must be in [1, " << q
                       << "] (the tile's rows), got " << gqaPack;
  if (ctasPerSM < 1 || ctasPerSM > 32)
    return emitError() << "ctas_per_sm must be in [1, 32], got " << ctasPerSM;
  if (kvTma && q == 16)
    return emitError() << "kv_tma loads the K/V tiles all warps share; a "
                          "16-row decode tile gives each warp its own";
  return success();
}

//===----------------------------------------------------------------------===//
// BandAttr
//===----------------------------------------------------------------------===//

LogicalResult BandAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               std::optional<int64_t> lower,
                               std::optional<int64_t> upper,
                               StringAttr lowerParam, StringAttr upperParam) {
  if (lower && lowerParam)
    return emitError() << "a band's lower bound is a constant or a parameter, "
                          "not both";
  if (upper && upperParam)
    return emitError() << "a band's upper bound is a constant or a parameter, "
                          "not both";
  if ((lowerParam && lowerParam.getValue().empty()) ||
      (upperParam && upperParam.getValue().empty()))
    return emitError() << "a band bound names a parameter: the name is empty";
  return success();
}

BandAttr BandAttr::intersect(BandAttr other) const {
  if (!other)
    return *this;
  auto tighter = [](std::optional<int64_t> a, std::optional<int64_t> b) {
    if (a && b)
      return std::optional<int64_t>(std::min(*a, *b));
    return a ? a : b;
  };
  std::optional<int64_t> lower = tighter(getLower(), other.getLower());
  std::optional<int64_t> upper = tighter(getUpper(), other.getUpper());
  StringAttr lowerParam = getLowerParam() ? getLowerParam() : other.getLowerParam();
  StringAttr upperParam = getUpperParam() ? getUpperParam() : other.getUpperParam();
  // A constant bound and a parameter bound on one side: keep the constant,
  // the parameter's mask still applies element by element.
  if (lower)
    lowerParam = {};
  if (upper)
    upperParam = {};
  return BandAttr::get(getContext(), lower, upper, lowerParam, upperParam);
}

//===----------------------------------------------------------------------===//
// LaunchAttr
//===----------------------------------------------------------------------===//

LogicalResult LaunchAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, KernelRole role,
    StringAttr chip, int64_t threads, int64_t sharedBytes, int64_t ctasPerSM,
    Type dtype, int64_t headDim, int64_t numQoHeads, int64_t numKVHeads,
    TileAttr tile, BsrAttr format, int64_t costPerItem, int64_t costPerKVToken,
    int64_t minChunk, BandAttr band, bool customMask, FlatSymbolRefAttr merge,
    int64_t mergeRows, bool pdl, bool outputTransform, ArrayAttr variants) {
  std::optional<TargetInfo> target =
      chip ? TargetInfo::lookup(chip.getValue()) : std::nullopt;
  if (!target)
    return emitError() << "launch contract for unknown chip "
                       << (chip ? chip.getValue() : StringRef("(none)"));
  if (threads < 32 || threads > target->getMaxThreadsPerBlock() ||
      threads % 32)
    return emitError() << "threads must be a multiple of 32 in [32, "
                       << target->getMaxThreadsPerBlock() << "], got "
                       << threads;
  if (sharedBytes < 0 || sharedBytes > target->getSharedMemoryPerBlock())
    return emitError() << "dynamic shared memory of " << sharedBytes
                       << " bytes is more than " << chip.getValue()
                       << " gives one CTA ("
                       << target->getSharedMemoryPerBlock() << ")";
  if (ctasPerSM < 1 || ctasPerSM * sharedBytes > target->getSharedMemoryPerSM())
    return emitError() << ctasPerSM << " CTAs of " << sharedBytes
                       << " bytes of shared memory do not fit one SM of "
                       << chip.getValue() << " ("
                       << target->getSharedMemoryPerSM() << " bytes)";
  if (role == KernelRole::copy_indices) {
    // Rows of one 32-bit word: a thread copies one word per loop step.
    if (!dtype || !dtype.isInteger(32) || headDim != 1)
      return emitError() << "a copy_indices kernel copies words: dtype i32 "
                            "and head_dim 1";
    if (numQoHeads != 0 || numKVHeads != 0 || tile || format || pdl)
      return emitError() << "a copy_indices kernel has no heads, tile, "
                            "format or pdl";
    if (mergeRows < 1 || mergeRows % threads)
      return emitError() << "merge_rows (" << mergeRows
                         << ", the words of a CTA step) must be a positive "
                            "multiple of threads ("
                         << threads << ")";
    return success();
  }
  const bool rowKernel =
      role == KernelRole::merge_states || role == KernelRole::append_kv;
  const bool f32Allowed = role == KernelRole::merge_states;
  if (!dtype || !(dtype.isBF16() || dtype.isF16() || (f32Allowed && dtype.isF32())))
    return emitError() << "dtype must be bf16 or f16"
                       << (f32Allowed ? " or f32" : "");
  if (llvm::Error err = TargetInfo::checkHeadDim(headDim))
    return emitError() << llvm::toString(std::move(err));
  if (rowKernel) {
    // The head count is a kernel argument.
    if (numQoHeads != 0 || numKVHeads != 0)
      return emitError() << "a row kernel's head counts are arguments: "
                            "num_qo_heads and num_kv_heads must be 0";
    const int64_t threadRows = threads / (headDim / 8);
    if (threadRows < 1 || mergeRows < 1 || mergeRows % threadRows)
      return emitError() << "a row kernel spreads a row's " << headDim
                         << " elements over head_dim / 8 threads: merge_rows ("
                         << mergeRows
                         << ", the rows of a CTA step) must be a positive "
                            "multiple of threads / (head_dim / 8) = "
                         << threadRows;
    if (role == KernelRole::append_kv && (!format || !format.isPaged()))
      return emitError() << "an append_kv kernel's contract needs its paged "
                            "format";
  } else if (numQoHeads < 1 || numKVHeads < 1 || numQoHeads % numKVHeads)
    return emitError() << "num_qo_heads (" << numQoHeads
                       << ") must be a positive multiple of num_kv_heads ("
                       << numKVHeads << ")";
  if (role == KernelRole::attention) {
    if (!tile || !format)
      return emitError() << "an attention kernel's contract needs its tile and "
                            "format";
    TileMMA mma = getTileMMA(tile, headDim, *target);
    if (threads != getTileThreads(tile, mma))
      return emitError() << "threads (" << threads << ") must be the tile's "
                         << tile.getWarps() << " warps and "
                         << getProducerWarps(tile, mma) << " producer warps";
    if (costPerItem < 0 || costPerKVToken < 1 || minChunk < 0)
      return emitError() << "the cost model needs cost_per_item >= 0, "
                            "cost_per_kv_token >= 1 and min_chunk >= 0";
  } else if (mergeRows < 1) {
    return emitError() << "merge_rows must be at least 1, got " << mergeRows;
  }
  if (pdl && !target->hasPDL())
    return emitError() << chip.getValue()
                       << " has no griddepcontrol: pdl must be false";
  return success();
}

LaunchAttr mlir::attn::getEnclosingLaunch(Operation *op) {
  for (Operation *parent = op; parent; parent = parent->getParentOp())
    if (auto launch =
            parent->getAttrOfType<LaunchAttr>(LaunchAttr::getAttrName()))
      return launch;
  return {};
}

//===----------------------------------------------------------------------===//
// ParamAttr
//===----------------------------------------------------------------------===//

/// Whether `type` can be a variant parameter: an f32/i32/i1 scalar, or a
/// per-head f32 table.
static bool isValidParamType(Type type) {
  if (type.isF32() || type.isInteger(32) || type.isInteger(1))
    return true;
  auto memref = dyn_cast<MemRefType>(type);
  return memref && memref.getRank() == 1 && memref.getElementType().isF32();
}

LogicalResult ParamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                StringRef name, Type type) {
  if (name.empty())
    return emitError() << "a variant parameter needs a name";
  if (!isValidParamType(type))
    return emitError() << "parameter '" << name << "' has type " << type
                       << "; parameters are f32, i32, i1 or memref<?xf32>";
  return success();
}
