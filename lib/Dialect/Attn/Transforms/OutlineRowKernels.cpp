//===- OutlineRowKernels.cpp - The row ops of host code to kernels --------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The row kernels of attn-outline-kernels: an attn.merge_states,
// attn.append_kv, attn.copy_indices or attn.copy_by_table in host code (not
// inside an attention) becomes a kernel whose body is the one tile op of
// the same name, launched over `num_rows` rows: tokens x heads for the
// first two, words for the copies. Row kernels have no plan; their head counts,
// strides and lengths are arguments, so one kernel serves every head count
// and memory layout of its element type and head dim (and, for append_kv,
// page size; copy_indices has one kernel per number of arrays).
//
//===----------------------------------------------------------------------===//

#include "RowKernels.h"
#include "attn/Dialect/Attn/Transforms/KernelSignature.h"
#include "attn/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::attn;

namespace {

/// Threads of a row kernel; a row's head_dim elements are spread over
/// head_dim / 8 of them (16 bytes each at 2-byte elements).
constexpr int64_t kRowThreads = 256;
constexpr int64_t kRowGridPerSM = 32;

/// Rows a thread takes per loop step: their loads are issued together, so
/// twice the bytes are in flight per thread (H200, M1: one row per step
/// 109 us, two 106 us, four 110 us, each with the grid of 32 CTAs per SM).
/// A CTA step covers this many groups of threads / (head_dim / 8) rows: the
/// contract's merge_rows, from which the runtime sizes the grid.
constexpr int64_t kRowsPerThreadStep = 2;

std::string elementName(Type t) {
  return t.isBF16() ? "bf16" : t.isF16() ? "f16" : "f32";
}

/// The head dim of a row kernel, checked against what kernels support.
FailureOr<int64_t> getRowHeadDim(Operation *op, ShapedType rows) {
  int64_t headDim = rows.getDimSize(rows.getRank() - 1);
  if (ShapedType::isDynamic(headDim))
    return op->emitOpError() << "needs a static head dim to generate its "
                                "kernel, got "
                             << rows;
  if (llvm::Error err = TargetInfo::checkHeadDim(headDim))
    return op->emitOpError() << llvm::toString(std::move(err));
  return headDim;
}

/// The rows of a CTA step when a row is head_dim elements over head_dim / 8
/// threads (merge_states, append_kv).
int64_t getHeadRowsPerStep(int64_t headDim) {
  return kRowsPerThreadStep * (kRowThreads / (headDim / 8));
}

/// The contract of a row kernel taking `rows` rows a CTA step (and
/// `sharedBytes` of dynamic shared memory), verified.
FailureOr<LaunchAttr> getRowLaunch(Operation *op, KernelRole role,
                                   const TargetInfo &target, Type dtype,
                                   int64_t headDim, BsrAttr format,
                                   int64_t rows, int64_t sharedBytes = 0) {
  MLIRContext *ctx = op->getContext();
  // The grid holds kRowGridPerSM CTAs per SM (more than fit at once): the
  // hardware starts each as one finishes, so a CTA runs one or two loop
  // steps and the SMs stay full to the end (H200, M1: 91% of copy, against
  // 74% with a grid of the 8 CTAs per SM that fit).
  int64_t ctasPerSM = kRowGridPerSM;
  const int64_t none = 0, unit = 1;
  LaunchAttr launch = LaunchAttr::getChecked(
      [&] { return op->emitOpError(); }, ctx, role,
      StringAttr::get(ctx, target.getName()), kRowThreads,
      sharedBytes, ctasPerSM, dtype, headDim, /*num_qo_heads=*/none,
      /*num_kv_heads=*/none, /*tile=*/TileAttr(), format,
      /*cost_per_item=*/none, /*cost_per_kv_token=*/unit, /*min_chunk=*/none,
      /*band=*/BandAttr(), /*custom_mask=*/false,
      /*merge=*/FlatSymbolRefAttr(), /*merge_rows=*/rows, /*pdl=*/false,
      /*output_transform=*/false, /*variants=*/ArrayAttr());
  if (!launch)
    return failure();
  return launch;
}

void recordKernel(Operation *op, StringRef gpuModuleName, StringRef name) {
  MLIRContext *ctx = op->getContext();
  op->setAttr(kKernelsAttrName,
              ArrayAttr::get(ctx, {SymbolRefAttr::get(
                                      ctx, gpuModuleName,
                                      {FlatSymbolRefAttr::get(ctx, name)})}));
}

} // namespace

LogicalResult mlir::attn::outlineMergeStates(MergeStatesOp op,
                                             gpu::GPUModuleOp gm,
                                             const TargetInfo &target) {
  auto states = cast<ShapedType>(op.getOutputs().front().getType());
  Type dtype = states.getElementType();
  if (op.getOutputType().getElementType() != dtype)
    return op.emitOpError()
           << "merges " << dtype << " states into "
           << op.getOutputType().getElementType()
           << "; the generated merge_states kernel writes the states' element "
              "type (merge, then convert)";
  FailureOr<int64_t> headDim = getRowHeadDim(op, states);
  if (failed(headDim))
    return failure();
  int64_t n = op.getOutputs().size();
  bool masked = bool(op.getMask());
  std::string name = llvm::formatv("attn_merge_states_{0}_d{1}_n{2}{3}",
                                   elementName(dtype), *headDim, n,
                                   masked ? "_masked" : "")
                         .str();
  if (!gm.lookupSymbol(name)) {
    FailureOr<LaunchAttr> launch =
        getRowLaunch(op, KernelRole::merge_states, target, dtype, *headDim,
                     BsrAttr(), getHeadRowsPerStep(*headDim));
    if (failed(launch))
      return failure();
    OpBuilder b(op.getContext());
    gpu::GPUFuncOp func =
        createKernel(b, op.getLoc(), gm, name,
                     getMergeStatesKernelArguments(dtype, n, masked), *launch);
    auto arg = [&](StringRef argName) {
      return getKernelArgument(func, argName);
    };
    SmallVector<Value> vs, ss;
    for (int64_t i = 0; i < n; ++i) {
      vs.push_back(arg("v" + std::to_string(i)));
      ss.push_back(arg("s" + std::to_string(i)));
    }
    b.setInsertionPointToStart(&func.getBody().front());
    TileMergeStatesOp::create(b, op.getLoc(), arg("num_rows"), arg("heads"),
                              vs, arg("v_stride"), ss, arg("s_stride"),
                              arg("o"), arg("o_stride"), arg("lse"),
                              arg("lse_stride"),
                              masked ? Value(arg("mask")) : Value());
    gpu::ReturnOp::create(b, op.getLoc());
  }
  recordKernel(op, gm.getName(), name);
  return success();
}

LogicalResult mlir::attn::outlineCopyIndices(CopyIndicesOp op,
                                             gpu::GPUModuleOp gm,
                                             const TargetInfo &target) {
  const int64_t pairs = op.getSources().size();
  std::string name = llvm::formatv("attn_copy_indices_n{0}", pairs).str();
  if (!gm.lookupSymbol(name)) {
    MLIRContext *ctx = op.getContext();
    // A row is one word (head_dim 1), a thread's per loop step.
    FailureOr<LaunchAttr> launch =
        getRowLaunch(op, KernelRole::copy_indices, target,
                     IntegerType::get(ctx, 32), /*headDim=*/1, BsrAttr(),
                     /*rows=*/kRowThreads);
    if (failed(launch))
      return failure();
    OpBuilder b(ctx);
    gpu::GPUFuncOp func =
        createKernel(b, op.getLoc(), gm, name,
                     getCopyIndicesKernelArguments(ctx, pairs), *launch);
    auto arg = [&](StringRef argName) {
      return getKernelArgument(func, argName);
    };
    SmallVector<Value> counts, sources, destinations;
    for (int64_t i = 0; i < pairs; ++i) {
      std::string n = std::to_string(i);
      counts.push_back(arg("n" + n));
      sources.push_back(arg("src" + n));
      destinations.push_back(arg("dst" + n));
    }
    b.setInsertionPointToStart(&func.getBody().front());
    TileCopyIndicesOp::create(b, op.getLoc(), arg("num_rows"), counts, sources,
                              destinations);
    gpu::ReturnOp::create(b, op.getLoc());
  }
  recordKernel(op, gm.getName(), name);
  return success();
}

LogicalResult mlir::attn::outlineCopyByTable(CopyByTableOp op,
                                             gpu::GPUModuleOp gm,
                                             const TargetInfo &target) {
  const int64_t rows = op.getRows();
  std::string name = llvm::formatv("attn_copy_by_table_n{0}", rows).str();
  if (!gm.lookupSymbol(name)) {
    MLIRContext *ctx = op.getContext();
    // The words of copy_indices: the same contract, and the table in
    // shared memory (every CTA reads it from host memory once).
    FailureOr<LaunchAttr> launch = getRowLaunch(
        op, KernelRole::copy_indices, target, IntegerType::get(ctx, 32),
        /*headDim=*/1, BsrAttr(), /*rows=*/kRowThreads,
        /*sharedBytes=*/8 * CopyByTableOp::kRowWords * rows);
    if (failed(launch))
      return failure();
    OpBuilder b(ctx);
    gpu::GPUFuncOp func = createKernel(b, op.getLoc(), gm, name,
                                       getCopyByTableKernelArguments(ctx),
                                       *launch);
    b.setInsertionPointToStart(&func.getBody().front());
    TileCopyByTableOp::create(b, op.getLoc(),
                              getKernelArgument(func, "num_rows"),
                              getKernelArgument(func, "table"), rows);
    gpu::ReturnOp::create(b, op.getLoc());
  }
  recordKernel(op, gm.getName(), name);
  return success();
}

LogicalResult mlir::attn::outlineAppendKV(AppendKVOp op, gpu::GPUModuleOp gm,
                                          const TargetInfo &target) {
  ShapedType key = op.getKey().getType();
  Type dtype = key.getElementType();
  FailureOr<int64_t> headDim = getRowHeadDim(op, key);
  if (failed(headDim))
    return failure();
  // Page geometry is compile-time (the division by the page size is a
  // constant one); layout and cache strides are arguments.
  int64_t pageSize = op.getFormat().getBlockCols();
  std::string name = llvm::formatv("attn_append_kv_{0}_d{1}_p{2}",
                                   elementName(dtype), *headDim, pageSize)
                         .str();
  if (!gm.lookupSymbol(name)) {
    MLIRContext *ctx = op.getContext();
    FailureOr<LaunchAttr> launch =
        getRowLaunch(op, KernelRole::append_kv, target, dtype, *headDim,
                     op.getFormat(), getHeadRowsPerStep(*headDim));
    if (failed(launch))
      return failure();
    OpBuilder b(ctx);
    gpu::GPUFuncOp func = createKernel(b, op.getLoc(), gm, name,
                                       getAppendKVKernelArguments(dtype),
                                       *launch);
    auto arg = [&](StringRef argName) {
      return getKernelArgument(func, argName);
    };
    b.setInsertionPointToStart(&func.getBody().front());
    TileAppendKVOp::create(
        b, op.getLoc(), arg("num_rows"), arg("heads"), arg("batch"),
        arg("num_pages"), arg("key"), arg("value"), arg("key_stride"),
        arg("value_stride"), arg("batch_indices"), arg("positions"),
        arg("kv_indptr"), arg("kv_indices"), arg("k_cache"), arg("v_cache"),
        arg("page_stride"), arg("slot_stride"), arg("head_stride"),
        arg("dropped"));
    gpu::ReturnOp::create(b, op.getLoc());
  }
  recordKernel(op, gm.getName(), name);
  return success();
}
