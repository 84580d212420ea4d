//===- AttnTileOps.cpp - the tile-level form of attention -----------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The tile value types and the verifiers of the attn.tile ops. A tile op
// reads its tile, format and heads from the launch contract of its kernel,
// so the verifiers check each op's types against that contract, and each
// hook region against the signature of its hook kind.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::attn;

#define GET_TYPEDEF_CLASSES
#include "attn/Dialect/Attn/IR/AttnOpsTypes.cpp.inc"

void AttnDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "attn/Dialect/Attn/IR/AttnOpsTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Type syntax: `<16x128xbf16>`, `<16x16>`, `<64>`
//===----------------------------------------------------------------------===//

/// Parses `<` d0 `x` ... `x` dn-1 [`x` type] `>` with `n` dimensions.
static ParseResult parseShape(AsmParser &parser, unsigned n,
                              SmallVectorImpl<int64_t> &dims, Type *elt) {
  if (parser.parseLess() ||
      parser.parseDimensionList(dims, /*allowDynamic=*/false,
                                /*withTrailingX=*/elt != nullptr))
    return failure();
  if (dims.size() != n)
    return parser.emitError(parser.getCurrentLocation())
           << "expected " << n << " dimensions, got " << dims.size();
  if (elt && parser.parseType(*elt))
    return failure();
  return parser.parseGreater();
}

static void printShape(AsmPrinter &printer, ArrayRef<int64_t> dims,
                       Type elt = {}) {
  printer << "<";
  llvm::interleave(dims, printer, "x");
  if (elt)
    printer << "x" << elt;
  printer << ">";
}

Type QueryType::parse(AsmParser &parser) {
  SmallVector<int64_t> d;
  Type elt;
  if (failed(parseShape(parser, 2, d, &elt)))
    return {};
  return get(parser.getContext(), d[0], d[1], elt);
}
void QueryType::print(AsmPrinter &p) const {
  printShape(p, {getRows(), getDim()}, getElementType());
}

Type KVRangeType::parse(AsmParser &parser) {
  SmallVector<int64_t> d;
  if (failed(parseShape(parser, 1, d, nullptr)))
    return {};
  return get(parser.getContext(), d[0]);
}
void KVRangeType::print(AsmPrinter &p) const { printShape(p, {getKeys()}); }

Type KVPipeType::parse(AsmParser &parser) {
  SmallVector<int64_t> d;
  Type elt;
  if (failed(parseShape(parser, 2, d, &elt)))
    return {};
  return get(parser.getContext(), d[0], d[1], elt);
}
void KVPipeType::print(AsmPrinter &p) const {
  printShape(p, {getKeys(), getDim()}, getElementType());
}

Type KVTileType::parse(AsmParser &parser) {
  SmallVector<int64_t> d;
  Type elt;
  if (failed(parseShape(parser, 2, d, &elt)))
    return {};
  return get(parser.getContext(), d[0], d[1], elt);
}
void KVTileType::print(AsmPrinter &p) const {
  printShape(p, {getKeys(), getDim()}, getElementType());
}

Type ScoresType::parse(AsmParser &parser) {
  SmallVector<int64_t> d;
  if (failed(parseShape(parser, 2, d, nullptr)))
    return {};
  return get(parser.getContext(), d[0], d[1]);
}
void ScoresType::print(AsmPrinter &p) const {
  printShape(p, {getRows(), getKeys()});
}

Type ProbsType::parse(AsmParser &parser) {
  SmallVector<int64_t> d;
  Type elt;
  if (failed(parseShape(parser, 2, d, &elt)))
    return {};
  return get(parser.getContext(), d[0], d[1], elt);
}
void ProbsType::print(AsmPrinter &p) const {
  printShape(p, {getRows(), getKeys()}, getElementType());
}

Type SoftmaxType::parse(AsmParser &parser) {
  SmallVector<int64_t> d;
  if (failed(parseShape(parser, 2, d, nullptr)))
    return {};
  return get(parser.getContext(), d[0], d[1]);
}
void SoftmaxType::print(AsmPrinter &p) const {
  printShape(p, {getRows(), getDim()});
}

//===----------------------------------------------------------------------===//
// Shared checks
//===----------------------------------------------------------------------===//

/// The launch contract of `op`'s kernel, or an error: every tile op lives in
/// a kernel outlined by attn-outline-kernels.
static FailureOr<LaunchAttr> getLaunchOrFail(Operation *op) {
  LaunchAttr launch = getEnclosingLaunch(op);
  if (!launch || !launch.isAttention())
    return op->emitOpError()
           << "must be inside an attention kernel (a function with an "
              "attn.launch contract of role attention)";
  return launch;
}

/// Checks that `region`, when not empty, is a hook of `kind`: one block with
/// the hook's arguments, ending in attn.yield of the hook's result type.
static LogicalResult verifyHookRegion(Operation *op, Region &region,
                                      StringRef name, HookKind kind) {
  if (region.empty())
    return success();
  if (!region.hasOneBlock())
    return op->emitOpError() << "region '" << name << "' must have one block";
  Block &block = region.front();
  SmallVector<Type> expected =
      HookOp::getExpectedArgumentTypes(op->getContext(), kind);
  if (block.getArgumentTypes() != TypeRange(expected)) {
    InFlightDiagnostic diag = op->emitOpError()
                              << "region '" << name << "' takes the arguments "
                              << "of a " << stringifyHookKind(kind)
                              << " hook (";
    llvm::interleaveComma(expected, diag);
    return diag << ")";
  }
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  Type result = HookOp::getExpectedResultType(op->getContext(), kind);
  if (!yield || yield.getValue().getType() != result)
    return op->emitOpError() << "region '" << name << "' must end with "
                             << "attn.yield of " << result;
  return success();
}

/// Checks a tile shape against the contract: `rows` x `dim` of `elt`.
static LogicalResult checkShape(Operation *op, StringRef what, int64_t rows,
                                int64_t expectedRows, int64_t dim,
                                int64_t expectedDim) {
  if (rows != expectedRows || dim != expectedDim)
    return op->emitOpError() << what << " is " << rows << " x " << dim
                             << " but the kernel's tile is " << expectedRows
                             << " x " << expectedDim;
  return success();
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

LogicalResult TileWorkLoopOp::verify() {
  FailureOr<LaunchAttr> launch = getLaunchOrFail(*this);
  if (failed(launch))
    return failure();
  Block &body = getBody().front();
  if (body.getNumArguments() != 1 || !isa<ItemType>(body.getArgument(0).getType()))
    return emitOpError() << "body takes one !attn.item argument";
  bool paged = launch->getFormat().isPaged();
  if (paged != bool(getKvLastLen()))
    return emitOpError() << (paged ? "a paged format needs kv_last_len"
                                   : "a ragged format takes no kv_last_len");
  return success();
}

LogicalResult TileLoadQueryOp::verify() {
  FailureOr<LaunchAttr> launch = getLaunchOrFail(*this);
  if (failed(launch))
    return failure();
  QueryType type = getResult().getType();
  if (failed(checkShape(*this, "the query tile", type.getRows(),
                        launch->getTile().getQ(), type.getDim(),
                        launch->getHeadDim())))
    return failure();
  if (type.getElementType() != launch->getDtype())
    return emitOpError() << "query elements are " << type.getElementType()
                         << " but the kernel's dtype is " << launch->getDtype();
  return verifyHookRegion(*this, getTransform(), "transform",
                          HookKind::query_transform);
}

/// The K/V step a pipeline or tile type must have in `launch`'s kernel.
static LogicalResult checkKVType(Operation *op, StringRef what, int64_t keys,
                                 int64_t dim, Type elt, LaunchAttr launch) {
  if (failed(checkShape(op, what, keys, launch.getTile().getKeysPerStep(), dim,
                        launch.getHeadDim())))
    return failure();
  if (elt != launch.getDtype())
    return op->emitOpError() << what << " holds " << elt
                             << " but the kernel's dtype is "
                             << launch.getDtype();
  return success();
}

/// A paged format gathers through kv_indices at a page stride and checks
/// every index it reads against the cache's page count (bounds); a strided
/// ragged one addresses each key's row by its token and head strides.
static LogicalResult verifyPages(Operation *op, LaunchAttr launch,
                                 Value kvIndices, Value pageStride,
                                 Value tokenStride, Value headStride,
                                 Value numPages, Value indexError) {
  const bool paged = launch.getFormat().isPaged();
  if (paged != bool(kvIndices) || bool(kvIndices) != bool(pageStride))
    return op->emitOpError() << (paged ? "a paged format gathers through "
                                         "kv_indices at a page stride: "
                                         "pages(..., stride ...) is required"
                                       : "a ragged format has no pages");
  if (paged != bool(numPages) || bool(numPages) != bool(indexError))
    return op->emitOpError()
           << (paged ? "a paged format checks its page indices: "
                       "bounds(num_pages, index_error) is required"
                     : "a ragged format has no page bounds");
  const bool strided = launch.getFormat().getStrided();
  if (strided != bool(tokenStride) || bool(tokenStride) != bool(headStride))
    return op->emitOpError()
           << (strided ? "a strided format addresses each key's row by its "
                         "strides: rows(stride token, head) is required"
                       : "only a strided format (strided = true) takes "
                         "rows(stride ...): dense rows have constant strides");
  return success();
}

/// The tensor maps of a K/V pipeline op: present exactly when its kernel's
/// tile loads K/V by TMA (kv_tma), both or neither.
static LogicalResult verifyMaps(Operation *op, LaunchAttr launch,
                                Value keyMap, Value valueMap) {
  const bool tma = launch.getTile() && launch.getTile().getKvTma();
  if (bool(keyMap) != bool(valueMap))
    return op->emitOpError() << "maps(...) names the tensor maps of both K "
                                "and V";
  if (tma != bool(keyMap))
    return op->emitOpError()
           << (tma ? "the kernel's tile loads K/V by TMA (kv_tma): "
                     "maps(k_map, v_map) is required"
                   : "maps(...) is for tiles that load K/V by TMA (kv_tma)");
  return success();
}

LogicalResult TileKVPrologueOp::verify() {
  FailureOr<LaunchAttr> launch = getLaunchOrFail(*this);
  if (failed(launch))
    return failure();
  if (failed(verifyPages(*this, *launch, getKvIndices(), getPageStride(),
                         getTokenStride(), getHeadStride(), getNumPages(),
                         getIndexError())) ||
      failed(verifyMaps(*this, *launch, getKeyMap(), getValueMap())))
    return failure();
  KVPipeType pipe = getPipe().getType();
  return checkKVType(*this, "the pipeline's tile", pipe.getKeys(),
                     pipe.getDim(), pipe.getElementType(), *launch);
}

LogicalResult TileKVNextOp::verify() {
  FailureOr<LaunchAttr> launch = getLaunchOrFail(*this);
  if (failed(launch))
    return failure();
  if (getPipe().getType() != getNext().getType())
    return emitOpError() << "the pipeline keeps its type";
  if (failed(verifyPages(*this, *launch, getKvIndices(), getPageStride(),
                         getTokenStride(), getHeadStride(), getNumPages(),
                         getIndexError())) ||
      failed(verifyMaps(*this, *launch, getKeyMap(), getValueMap())))
    return failure();
  KVTileType tile = getTile().getType();
  if (failed(checkKVType(*this, "the K/V tile", tile.getKeys(), tile.getDim(),
                         tile.getElementType(), *launch)))
    return failure();
  return verifyHookRegion(*this, getKeyTransform(), "key_transform",
                          HookKind::key_transform);
}

LogicalResult TileQKOp::verify() {
  QueryType q = getQuery().getType();
  KVTileType kv = getTile().getType();
  ScoresType s = getScores().getType();
  if (q.getDim() != kv.getDim())
    return emitOpError() << "query dim " << q.getDim() << " and key dim "
                         << kv.getDim() << " differ";
  if (s.getRows() != q.getRows() || s.getKeys() != kv.getKeys())
    return emitOpError() << "scores must be " << q.getRows() << " x "
                         << kv.getKeys();
  return success();
}

LogicalResult TileOnlineSoftmaxOp::verify() {
  FailureOr<LaunchAttr> launch = getLaunchOrFail(*this);
  if (failed(launch))
    return failure();
  SoftmaxType st = getState().getType();
  ScoresType s = getScores().getType();
  ProbsType p = getProbs().getType();
  if (getNewState().getType() != st)
    return emitOpError() << "the state keeps its type";
  if (s.getRows() != st.getRows() || p.getRows() != s.getRows() ||
      p.getKeys() != s.getKeys() || s.getKeys() != getTile().getType().getKeys())
    return emitOpError() << "state, scores, probabilities and tile disagree "
                            "on the tile's rows and keys";
  if (p.getElementType() != launch->getDtype())
    return emitOpError() << "probabilities are " << p.getElementType()
                         << " but the kernel's dtype is " << launch->getDtype();
  if (bool(getCustomMask()) != launch->getCustomMask())
    return emitOpError() << (launch->getCustomMask()
                                 ? "the kernel reads a custom mask: pass it"
                                 : "the kernel's contract has no custom mask");
  if (failed(verifyHookRegion(*this, getLogitsTransform(), "logits_transform",
                              HookKind::logits_transform)))
    return failure();
  return verifyHookRegion(*this, getLogitsMask(), "logits_mask",
                          HookKind::logits_mask);
}

LogicalResult TilePVOp::verify() {
  SoftmaxType st = getState().getType();
  if (getNewState().getType() != st)
    return emitOpError() << "the state keeps its type";
  if (getProbs().getType().getRows() != st.getRows() ||
      getTile().getType().getDim() != st.getDim() ||
      getProbs().getType().getKeys() != getTile().getType().getKeys())
    return emitOpError() << "state, probabilities and tile disagree on rows, "
                            "keys or dim";
  return success();
}

LogicalResult TileStoreOp::verify() {
  FailureOr<LaunchAttr> launch = getLaunchOrFail(*this);
  if (failed(launch))
    return failure();
  SoftmaxType st = getState().getType();
  if (failed(checkShape(*this, "the state", st.getRows(),
                        launch->getTile().getQ(), st.getDim(),
                        launch->getHeadDim())))
    return failure();
  if (failed(verifyHookRegion(*this, getSink(), "sink", HookKind::sink)))
    return failure();
  return verifyHookRegion(*this, getOutputTransform(), "output_transform",
                          HookKind::output_transform);
}

LogicalResult TileMergeOp::verify() {
  LaunchAttr launch = getEnclosingLaunch(*this);
  if (!launch || launch.getRole() != KernelRole::merge)
    return emitOpError() << "must be inside a merge kernel (a function with an "
                            "attn.launch contract of role merge)";
  if (launch.getOutputTransform() != !getOutputTransform().empty())
    return emitOpError() << "has an output_transform region exactly when its "
                            "contract says output_transform";
  if (!getOutputTransform().empty() && !getKvIndptr())
    return emitOpError() << "an output transform needs the query positions: "
                            "positions(kv_indptr[, kv_last_len])";
  return verifyHookRegion(*this, getOutputTransform(), "output_transform",
                          HookKind::output_transform);
}

//===----------------------------------------------------------------------===//
// Row kernels
//===----------------------------------------------------------------------===//

/// The launch contract of a row kernel of `role` around `op`, or an error.
static FailureOr<LaunchAttr> getRowLaunch(Operation *op, KernelRole role) {
  LaunchAttr launch = getEnclosingLaunch(op);
  if (!launch || launch.getRole() != role)
    return op->emitOpError() << "must be inside a " << stringifyKernelRole(role)
                             << " kernel (a function with an attn.launch "
                                "contract of role "
                             << stringifyKernelRole(role) << ")";
  return launch;
}

/// `buffer` holds elements of `type`.
static LogicalResult checkElements(Operation *op, Value buffer, Type type,
                                   StringRef what) {
  Type elt = cast<MemRefType>(buffer.getType()).getElementType();
  if (elt != type)
    return op->emitOpError() << what << " must hold " << type
                             << " elements (the contract's dtype), not " << elt;
  return success();
}

LogicalResult TileMergeStatesOp::verify() {
  FailureOr<LaunchAttr> launch = getRowLaunch(*this, KernelRole::merge_states);
  if (failed(launch))
    return failure();
  if (getStates().empty() || getStates().size() != getLses().size())
    return emitOpError() << "needs one LSE per state and at least one state, "
                            "got "
                         << getStates().size() << " states and "
                         << getLses().size() << " LSEs";
  for (Value state : getStates())
    if (failed(checkElements(*this, state, launch->getDtype(), "a state")))
      return failure();
  return checkElements(*this, getOutput(), launch->getDtype(), "the output");
}

LogicalResult TileAppendKVOp::verify() {
  FailureOr<LaunchAttr> launch = getRowLaunch(*this, KernelRole::append_kv);
  if (failed(launch))
    return failure();
  Type dtype = launch->getDtype();
  std::pair<Value, StringRef> buffers[] = {{getKey(), "key"},
                                           {getValue(), "value"},
                                           {getKeyCache(), "key_cache"},
                                           {getValueCache(), "value_cache"}};
  for (auto [buffer, what] : buffers)
    if (failed(checkElements(*this, buffer, dtype, what)))
      return failure();
  return success();
}

LogicalResult TileCopyByTableOp::verify() {
  if (failed(getRowLaunch(*this, KernelRole::copy_indices)))
    return failure();
  if (getRows() < 1 || getRows() > CopyByTableOp::kMaxRows)
    return emitOpError() << "reads 1 to " << CopyByTableOp::kMaxRows
                         << " table rows, got " << getRows();
  return success();
}

LogicalResult TileCopyIndicesOp::verify() {
  if (failed(getRowLaunch(*this, KernelRole::copy_indices)))
    return failure();
  const int64_t pairs = getCounts().size();
  if (pairs < 1 || pairs > CopyIndicesOp::kMaxPairs)
    return emitOpError() << "copies 1 to " << CopyIndicesOp::kMaxPairs
                         << " arrays, got " << pairs;
  return success();
}
