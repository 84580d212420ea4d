//===- KernelSignature.cpp - The argument lists of generated kernels ------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Transforms/KernelSignature.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::attn;

FailureOr<SmallVector<VariantParamArg>>
mlir::attn::getVariantParamArgs(ArrayRef<VariantOp> variants) {
  SmallVector<VariantParamArg> result;
  llvm::StringSet<> seen;
  for (VariantOp variant : variants) {
    for (auto param : variant.getParams().getAsRange<ParamAttr>()) {
      Type declared = param.getType();
      MLIRContext *ctx = declared.getContext();
      Type argType;
      if (declared.isF32() || declared.isInteger(32))
        argType = declared;
      else if (declared.isInteger(1))
        argType = IntegerType::get(ctx, 32); // a kernel ABI has no bool
      else if (auto table = dyn_cast<MemRefType>(declared);
               table && table.getRank() == 1 && table.getElementType().isF32())
        argType = getKernelBufferType(table.getElementType());
      else
        return variant.emitOpError()
               << "parameter '" << param.getName()
               << "' has a type no kernel argument carries: " << declared
               << " (supported: f32, i32, i1, memref<?xf32>)";
      // Two variants may name a parameter alike; the second is qualified.
      std::string name = param.getName().str();
      if (!seen.insert(name).second)
        name = (variant.getSymName() + "_" + name).str();
      seen.insert(name);
      result.push_back({name, argType, declared});
    }
  }
  return result;
}

MemRefType mlir::attn::getKernelBufferType(Type elementType) {
  constexpr int64_t kFlatExtent = int64_t(1) << 40;
  auto global = gpu::AddressSpaceAttr::get(elementType.getContext(),
                                           gpu::AddressSpace::Global);
  return MemRefType::get({kFlatExtent}, elementType,
                         MemRefLayoutAttrInterface{}, global);
}

SmallVector<KernelArgument>
mlir::attn::getAttentionKernelArguments(Type dtype, bool paged,
                                        bool stridedKV, bool customMask,
                                        bool kvTma,
                                        ArrayRef<VariantParamArg> params) {
  MLIRContext *ctx = dtype.getContext();
  Type i32 = IntegerType::get(ctx, 32), f32 = Float32Type::get(ctx);
  Type i8 = IntegerType::get(ctx, 8);
  auto buf = [](Type t) { return getKernelBufferType(t); };
  SmallVector<KernelArgument> args = {
      {"plan", buf(i32), {}},
      {"cta_indptr", buf(i32), {}},  {"work_items", buf(i32), {}},
      {"partial_o", buf(f32), {}},   {"partial_lse", buf(f32), {}},
      {"slot_rows", i32, {}},        {"q", buf(dtype), {}},
      {"k_cache", buf(dtype), {}},   {"v_cache", buf(dtype), {}},
      {"o", buf(dtype), {}},         {"lse", buf(f32), {}},
      {"qo_indptr", buf(i32), {}},   {"kv_indptr", buf(i32), {}},
  };
  if (paged) {
    args.push_back({"kv_indices", buf(i32), {}});
    // Elements from one page to the next: K and V in separate caches, in
    // one interleaved cache, or views of a larger buffer (AttnTileOps.td).
    args.push_back({"page_stride", IntegerType::get(ctx, 64), {}});
    args.push_back({"kv_last_len", buf(i32), {}});
    // Every page index read is checked against the cache's page count; a
    // bad one sets index_error[0] instead of faulting (AttnTileOps.td).
    args.push_back({"num_pages", i32, {}});
    args.push_back({"index_error", buf(i32), {}});
  } else if (stridedKV) {
    // Where key t's row of KV head h starts: t * kv_token_stride + h *
    // kv_head_stride elements into k_cache/v_cache, so NHD, HND and slices
    // of a fused QKV tensor are read in place (AttnTileOps.td).
    args.push_back({"kv_token_stride", IntegerType::get(ctx, 64), {}});
    args.push_back({"kv_head_stride", IntegerType::get(ctx, 64), {}});
  }
  if (customMask) {
    args.push_back({"custom_mask", buf(i8), {}});
    args.push_back({"mask_indptr", buf(i32), {}});
  }
  if (kvTma) {
    // Encoded by the runtime at launch (docs/Manifest.md, tensor maps).
    auto map = LLVM::LLVMPointerType::get(ctx);
    args.push_back({"k_map", map, {}, "k_cache"});
    args.push_back({"v_map", map, {}, "v_cache"});
  }
  args.push_back({"sm_scale", f32, {}});
  for (const VariantParamArg &p : params)
    args.push_back({p.name, p.argType, p.declaredType});
  return args;
}

SmallVector<KernelArgument>
mlir::attn::getMergeKernelArguments(Type dtype, bool outputTransform,
                                    bool paged,
                                    ArrayRef<VariantParamArg> params) {
  MLIRContext *ctx = dtype.getContext();
  Type i32 = IntegerType::get(ctx, 32), f32 = Float32Type::get(ctx);
  auto buf = [](Type t) { return getKernelBufferType(t); };
  SmallVector<KernelArgument> args = {
      {"plan", buf(i32), {}},        {"merge_indptr", buf(i32), {}},
      {"merge_units", buf(i32), {}}, {"partial_o", buf(f32), {}},
      {"partial_lse", buf(f32), {}}, {"slot_rows", i32, {}},
      {"o", buf(dtype), {}},         {"lse", buf(f32), {}},
      {"qo_indptr", buf(i32), {}},
  };
  if (!outputTransform)
    return args;
  // The output transform sees the query's position, from the KV length.
  args.push_back({"kv_indptr", buf(i32), {}});
  if (paged)
    args.push_back({"kv_last_len", buf(i32), {}});
  for (const VariantParamArg &p : params)
    args.push_back({p.name, p.argType, p.declaredType});
  return args;
}

SmallVector<KernelArgument>
mlir::attn::getMergeStatesKernelArguments(Type dtype, int64_t numStates,
                                          bool masked) {
  MLIRContext *ctx = dtype.getContext();
  Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
  Type f32 = Float32Type::get(ctx), i8 = IntegerType::get(ctx, 8);
  auto buf = [](Type t) { return getKernelBufferType(t); };
  SmallVector<KernelArgument> args = {{"num_rows", i32, {}},
                                      {"heads", i32, {}}};
  for (int64_t i = 0; i < numStates; ++i)
    args.push_back({"v" + std::to_string(i), buf(dtype), {}});
  args.push_back({"v_stride", i64, {}});
  for (int64_t i = 0; i < numStates; ++i)
    args.push_back({"s" + std::to_string(i), buf(f32), {}});
  args.push_back({"s_stride", i64, {}});
  args.push_back({"o", buf(dtype), {}});
  args.push_back({"o_stride", i64, {}});
  args.push_back({"lse", buf(f32), {}});
  args.push_back({"lse_stride", i64, {}});
  if (masked)
    args.push_back({"mask", buf(i8), {}});
  return args;
}

SmallVector<KernelArgument> mlir::attn::getAppendKVKernelArguments(Type dtype) {
  MLIRContext *ctx = dtype.getContext();
  Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
  auto buf = [](Type t) { return getKernelBufferType(t); };
  return {{"num_rows", i32, {}},        {"heads", i32, {}},
          {"batch", i32, {}},           {"num_pages", i32, {}},
          {"key", buf(dtype), {}},      {"value", buf(dtype), {}},
          {"key_stride", i64, {}},      {"value_stride", i64, {}},
          {"batch_indices", buf(i32), {}}, {"positions", buf(i32), {}},
          {"kv_indptr", buf(i32), {}},  {"kv_indices", buf(i32), {}},
          {"k_cache", buf(dtype), {}},  {"v_cache", buf(dtype), {}},
          {"page_stride", i64, {}},     {"slot_stride", i64, {}},
          {"head_stride", i64, {}},     {"dropped", buf(i32), {}}};
}

SmallVector<KernelArgument>
mlir::attn::getCopyIndicesKernelArguments(MLIRContext *ctx, int64_t pairs) {
  Type i32 = IntegerType::get(ctx, 32);
  Type buf = getKernelBufferType(i32);
  SmallVector<KernelArgument> args = {{"num_rows", i32, {}}};
  for (int64_t i = 0; i < pairs; ++i) {
    std::string n = std::to_string(i);
    args.push_back({"n" + n, i32, {}});
    args.push_back({"src" + n, buf, {}});
    args.push_back({"dst" + n, buf, {}});
  }
  return args;
}

SmallVector<KernelArgument>
mlir::attn::getCopyByTableKernelArguments(MLIRContext *ctx) {
  return {{"num_rows", IntegerType::get(ctx, 32), {}},
          {"table", getKernelBufferType(IntegerType::get(ctx, 64)), {}}};
}

gpu::GPUFuncOp mlir::attn::createKernel(OpBuilder &b, Location loc,
                                        gpu::GPUModuleOp gpuModule,
                                        StringRef name,
                                        ArrayRef<KernelArgument> args,
                                        LaunchAttr launch) {
  SmallVector<Type> types;
  for (const KernelArgument &arg : args)
    types.push_back(arg.type);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(gpuModule.getBody());
  auto func =
      gpu::GPUFuncOp::create(b, loc, name, b.getFunctionType(types, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr(
      {static_cast<int32_t>(launch.getThreads()), 1, 1}));
  func->setAttr(LaunchAttr::getAttrName(), launch);
  SmallVector<int64_t> byValue;
  for (auto [i, arg] : llvm::enumerate(args)) {
    func.setArgAttr(i, kArgNameAttr, b.getStringAttr(arg.name));
    if (arg.paramType)
      func.setArgAttr(i, kArgParamTypeAttr, TypeAttr::get(arg.paramType));
    if (!arg.tensorMapOf.empty()) {
      func.setArgAttr(i, kTensorMapOfAttr, b.getStringAttr(arg.tensorMapOf));
      byValue.push_back(i);
    }
  }
  if (!byValue.empty())
    func->setAttr(kGridConstantArgsAttr, b.getDenseI64ArrayAttr(byValue));
  return func;
}

BlockArgument mlir::attn::getKernelArgument(FunctionOpInterface func,
                                            StringRef name) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (auto attr = func.getArgAttrOfType<StringAttr>(i, kArgNameAttr);
        attr && attr.getValue() == name)
      return func.getArgument(i);
  return {};
}
