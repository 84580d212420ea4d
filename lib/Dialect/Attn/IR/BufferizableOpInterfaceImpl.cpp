//===- BufferizableOpInterfaceImpl.cpp - bufferizing the attn ops ---------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// attn.append_kv is destination-style (its caches are its inits), so it
// takes the DestinationStyleOpInterface defaults. attn.attention and
// attn.merge_states are not: their value form without `outs` has two
// results and no inits, which DestinationStyleOpInterface's verifier
// rejects, and that form must stay as it is (the Python package writes it
// and it keys the kernel cache). So their BufferizableOpInterface is written
// here by hand: each `outs` operand is written (never read) and is
// equivalent to its result; without `outs` both results are fresh
// allocations shaped like the query (output) and [rows, heads] (LSE).
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/IR/BufferizableOpInterfaceImpl.h"
#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::attn;
using namespace mlir::bufferization;

namespace {

/// The buffer of `value` when it is a tensor; anything else (null, a
/// memref, a scalar) unchanged.
FailureOr<Value> bufferOf(RewriterBase &rewriter, Value value,
                          const BufferizationOptions &options,
                          BufferizationState &state) {
  if (!value || !isa<TensorType>(value.getType()))
    return value;
  return getBuffer(rewriter, value, options, state);
}

FailureOr<SmallVector<Value>> buffersOf(RewriterBase &rewriter,
                                        ValueRange values,
                                        const BufferizationOptions &options,
                                        BufferizationState &state) {
  SmallVector<Value> buffers;
  for (Value v : values) {
    FailureOr<Value> buffer = bufferOf(rewriter, v, options, state);
    if (failed(buffer))
      return failure();
    buffers.push_back(*buffer);
  }
  return buffers;
}

/// The identity-layout memref a fresh destination of `type` gets.
MemRefType getDestinationType(RankedTensorType type) {
  return MemRefType::get(type.getShape(), type.getElementType());
}

/// A fresh destination for result `type`, its dynamic dims (the rows, dim 0)
/// taken from `rowsFrom`, a buffer of as many rows.
FailureOr<Value> allocateDestination(RewriterBase &rewriter, Location loc,
                                     RankedTensorType type, Value rowsFrom,
                                     const BufferizationOptions &options) {
  SmallVector<Value> dynamicSizes;
  for (int64_t i = 0, e = type.getRank(); i < e; ++i) {
    if (!type.isDynamicDim(i))
      continue;
    if (i != 0)
      return failure(); // heads and head dims are static (verifier)
    dynamicSizes.push_back(memref::DimOp::create(rewriter, loc, rowsFrom, 0));
  }
  return options.createAlloc(rewriter, loc, getDestinationType(type),
                             dynamicSizes);
}

/// The two-destination ops (attention, merge_states): `outs` or fresh
/// allocations. `Derived` supplies bufferize().
template <typename Derived, typename OpTy>
struct OutsBufferizationModel
    : public BufferizableOpInterface::ExternalModel<Derived, OpTy> {
  static bool isOut(OpTy op, OpOperand &operand) {
    return llvm::any_of(op.getOutsMutable(), [&](OpOperand &out) {
      return &out == &operand;
    });
  }

  bool bufferizesToAllocation(Operation *op, Value) const {
    return cast<OpTy>(op).getOuts().empty();
  }

  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &) const {
    return !isOut(cast<OpTy>(op), operand);
  }

  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand,
                               const AnalysisState &) const {
    return isOut(cast<OpTy>(op), operand);
  }

  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    auto typed = cast<OpTy>(op);
    if (!isOut(typed, operand))
      return {};
    unsigned index =
        operand.getOperandNumber() - typed.getOuts().getBeginOperandIndex();
    return {{op->getResult(index), BufferRelation::Equivalent}};
  }

  FailureOr<BufferLikeType>
  getBufferType(Operation *op, Value value, const BufferizationOptions &options,
                const BufferizationState &state,
                SmallVector<Value> &invocationStack) const {
    auto typed = cast<OpTy>(op);
    unsigned index = cast<OpResult>(value).getResultNumber();
    if (!typed.getOuts().empty())
      return bufferization::getBufferType(typed.getOuts()[index], options,
                                          state, invocationStack);
    return cast<BufferLikeType>(
        getDestinationType(cast<RankedTensorType>(value.getType())));
  }

  /// The destinations: the buffers of `outs`, else two allocations with
  /// the rows of `rowsFrom`.
  static FailureOr<SmallVector<Value>>
  getDestinations(RewriterBase &rewriter, OpTy op, Value rowsFrom,
                  const BufferizationOptions &options,
                  BufferizationState &state) {
    if (!op.getOuts().empty())
      return buffersOf(rewriter, op.getOuts(), options, state);
    SmallVector<Value> destinations;
    for (Value result : op->getResults()) {
      FailureOr<Value> alloc =
          allocateDestination(rewriter, op.getLoc(),
                              cast<RankedTensorType>(result.getType()),
                              rowsFrom, options);
      if (failed(alloc))
        return failure();
      destinations.push_back(*alloc);
    }
    return destinations;
  }
};

struct AttentionOpInterface
    : public OutsBufferizationModel<AttentionOpInterface, AttentionOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto attention = cast<AttentionOp>(op);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(op);
    FailureOr<Value> query =
        bufferOf(rewriter, attention.getQuery(), options, state);
    FailureOr<Value> keys =
        bufferOf(rewriter, attention.getKeyCache(), options, state);
    FailureOr<Value> values =
        bufferOf(rewriter, attention.getValueCache(), options, state);
    FailureOr<Value> mask =
        bufferOf(rewriter, attention.getMask(), options, state);
    FailureOr<SmallVector<Value>> indices =
        buffersOf(rewriter, attention.getIndices(), options, state);
    FailureOr<SmallVector<Value>> params =
        buffersOf(rewriter, attention.getParams(), options, state);
    if (failed(query) || failed(keys) || failed(values) || failed(mask) ||
        failed(indices) || failed(params))
      return failure();
    FailureOr<SmallVector<Value>> outs =
        getDestinations(rewriter, attention, *query, options, state);
    if (failed(outs))
      return op->emitOpError("cannot allocate its destinations");
    auto bufferized = AttentionOp::create(
        rewriter, op->getLoc(), TypeRange{}, *query, *keys, *values, *indices,
        *mask, attention.getSmScale(), *params, *outs, attention.getFormat(),
        attention.getVariantsAttr(), attention.getTileAttr(),
        attention.getTileCandidatesAttr());
    // attn.kernels and whatever else the passes recorded travel along.
    bufferized->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    replaceOpWithBufferizedValues(rewriter, op, *outs);
    return success();
  }
};

struct MergeStatesOpInterface
    : public OutsBufferizationModel<MergeStatesOpInterface, MergeStatesOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto merge = cast<MergeStatesOp>(op);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(op);
    FailureOr<SmallVector<Value>> states =
        buffersOf(rewriter, merge.getOutputs(), options, state);
    FailureOr<SmallVector<Value>> lses =
        buffersOf(rewriter, merge.getLses(), options, state);
    FailureOr<Value> mask = bufferOf(rewriter, merge.getMask(), options, state);
    if (failed(states) || failed(lses) || failed(mask))
      return failure();
    FailureOr<SmallVector<Value>> outs =
        getDestinations(rewriter, merge, states->front(), options, state);
    if (failed(outs))
      return op->emitOpError("cannot allocate its destinations");
    auto bufferized = MergeStatesOp::create(rewriter, op->getLoc(), TypeRange{},
                                            *states, *lses, *mask, *outs);
    bufferized->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    replaceOpWithBufferizedValues(rewriter, op, *outs);
    return success();
  }
};

/// append_kv reads its new tokens and reads and writes its caches (the
/// pages it does not touch stay): the destination-style defaults.
struct AppendKVOpInterface
    : public DstBufferizableOpInterfaceExternalModel<AppendKVOpInterface,
                                                     AppendKVOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto append = cast<AppendKVOp>(op);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(op);
    FailureOr<SmallVector<Value>> buffers = buffersOf(
        rewriter,
        {append.getKey(), append.getValue(), append.getKeyCache(),
         append.getValueCache()},
        options, state);
    FailureOr<SmallVector<Value>> indices =
        buffersOf(rewriter, append.getIndices(), options, state);
    if (failed(buffers) || failed(indices))
      return failure();
    auto bufferized = AppendKVOp::create(
        rewriter, op->getLoc(), TypeRange{}, (*buffers)[0], (*buffers)[1],
        (*buffers)[2], (*buffers)[3], *indices, append.getFormat());
    bufferized->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    replaceOpWithBufferizedValues(rewriter, op,
                                  {(*buffers)[2], (*buffers)[3]});
    return success();
  }
};

/// copy_indices reads its sources and reads and writes its destinations
/// (a destination's tail past its source stays).
struct CopyIndicesOpInterface
    : public DstBufferizableOpInterfaceExternalModel<CopyIndicesOpInterface,
                                                     CopyIndicesOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto copy = cast<CopyIndicesOp>(op);
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(op);
    FailureOr<SmallVector<Value>> sources =
        buffersOf(rewriter, copy.getSources(), options, state);
    FailureOr<SmallVector<Value>> destinations =
        buffersOf(rewriter, copy.getDestinations(), options, state);
    if (failed(sources) || failed(destinations))
      return failure();
    auto bufferized = CopyIndicesOp::create(rewriter, op->getLoc(), TypeRange{},
                                            *sources, *destinations);
    bufferized->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    replaceOpWithBufferizedValues(rewriter, op, *destinations);
    return success();
  }
};

} // namespace

void mlir::attn::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, AttnDialect *) {
    AttentionOp::attachInterface<AttentionOpInterface>(*ctx);
    MergeStatesOp::attachInterface<MergeStatesOpInterface>(*ctx);
    AppendKVOp::attachInterface<AppendKVOpInterface>(*ctx);
    CopyIndicesOp::attachInterface<CopyIndicesOpInterface>(*ctx);
  });
}
