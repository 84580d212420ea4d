//===- AttnAttrs.cpp - KV formats, tiles and variant params ---------------===//
//
// Verifiers of the attn attributes and the format arithmetic that the
// passes, the verifiers and the kernel generator share: how many blocks a
// request occupies, how full its last block is, which index arrays a view
// takes.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/IR/Attn.h"

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
// BsrAttr
//===----------------------------------------------------------------------===//

/// The largest page a kernel gathers as one block; vLLM and FlashInfer use 1
/// to 256.
static constexpr int64_t kMaxBlockCols = 1024;

LogicalResult BsrAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                              int64_t blockRows, int64_t blockCols,
                              KVLayout layout, KVIndexing indexing) {
  if (blockRows < 1)
    return emitError() << "block_rows must be at least 1, got " << blockRows;
  if (blockCols < 1 || blockCols > kMaxBlockCols ||
      !llvm::isPowerOf2_64(blockCols))
    return emitError() << "block_cols must be a power of two in [1, "
                       << kMaxBlockCols << "], got " << blockCols;
  if (indexing == KVIndexing::ragged && blockCols != 1)
    return emitError() << "a ragged format indexes tokens: block_cols must be "
                          "1, got "
                       << blockCols;
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
                               int64_t stages, int64_t gqaPack) {
  if (!llvm::is_contained({1, 16, 64, 128}, q))
    return emitError() << "query tile q must be 1, 16, 64 or 128, got " << q;
  if (kv < 16 || kv > 256 || !llvm::isPowerOf2_64(kv))
    return emitError() << "KV tile kv must be a power of two in [16, 256], got "
                       << kv;
  if (warps < 1 || warps > 16)
    return emitError() << "warps must be in [1, 16], got " << warps;
  if (stages < 1 || stages > 8)
    return emitError() << "stages must be in [1, 8], got " << stages;
  if (gqaPack < 1 || !llvm::isPowerOf2_64(gqaPack))
    return emitError() << "gqa_pack must be a power of two, got " << gqaPack;
  if (q > 1 && gqaPack > q)
    return emitError() << "gqa_pack " << gqaPack
                       << " packs more heads than the query tile has rows ("
                       << q << ")";
  return success();
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
