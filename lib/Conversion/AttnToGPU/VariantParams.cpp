//===- VariantParams.cpp - Variant parameters as kernel arguments ---------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The variant-parameter ABI shared by the decode and prefill generators
// (include/attn/Conversion/AttnToGPU/VariantParams.h).
//
//===----------------------------------------------------------------------===//

#include "attn/Conversion/AttnToGPU/VariantParams.h"
#include "attn/Dialect/Attn/IR/Attn.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/ADT/StringSet.h"

namespace attn {
using namespace mlir;

FailureOr<std::string> getVariantParamKind(Type type) {
  if (type.isF32())
    return std::string("f32");
  if (type.isInteger(32) || type.isInteger(1))
    return std::string("i32");
  if (auto memref = dyn_cast<MemRefType>(type);
      memref && memref.getRank() == 1 && memref.getElementType().isF32())
    return std::string("ptr");
  return failure();
}

FailureOr<SmallVector<VariantParamArg>>
getVariantParamArgs(ArrayRef<mlir::attn::VariantOp> variants) {
  SmallVector<VariantParamArg> result;
  llvm::StringSet<> seen;
  for (mlir::attn::VariantOp variant : variants) {
    for (auto param :
         variant.getParams().getAsRange<mlir::attn::ParamAttr>()) {
      FailureOr<std::string> kind = getVariantParamKind(param.getType());
      if (failed(kind))
        return variant.emitOpError()
               << "parameter '" << param.getName()
               << "' has a type no kernel argument carries: "
               << param.getType()
               << " (supported: f32, i32, i1, memref<?xf32>)";
      // Two variants may name a parameter alike; the second is qualified.
      std::string name = param.getName().str();
      if (!seen.insert(name).second)
        name = (variant.getSymName() + "_" + name).str();
      seen.insert(name);
      result.push_back({name, *kind, param.getType()});
    }
  }
  return result;
}

bool isVariantParamKind(llvm::StringRef kind) {
  return kind == "f32" || kind == "i32" || kind == "ptr";
}

KernelArg getVariantParamKernelArg(llvm::StringRef name,
                                               llvm::StringRef kind) {
  if (kind == "ptr")
    return {name.str(), "ptr", "f32", "[num_qo_heads]"};
  return {name.str(), kind.str(), "", ""};
}

void setVariantParamTypes(gpu::GPUFuncOp func,
                                ArrayRef<VariantParamArg> params) {
  unsigned first = func.getNumArguments() - params.size();
  for (auto [i, p] : llvm::enumerate(params))
    func.setArgAttr(first + i, "attn.param_type", TypeAttr::get(p.type));
}

SmallVector<Value> getVariantParamValues(OpBuilder &b,
                                               gpu::GPUFuncOp func,
                                               size_t count) {
  SmallVector<Value> values;
  unsigned first = func.getNumArguments() - count;
  for (BlockArgument arg : func.getArguments().drop_front(first)) {
    auto declared = func.getArgAttrOfType<TypeAttr>(arg.getArgNumber(),
                                                    "attn.param_type");
    if (declared && declared.getValue().isInteger(1)) {
      // A kernel ABI has no bool: an i1 travels as i32.
      Value zero = arith::ConstantIntOp::create(b, arg.getLoc(), 0, 32);
      values.push_back(arith::CmpIOp::create(b, arg.getLoc(),
                                             arith::CmpIPredicate::ne, arg,
                                             zero));
    } else {
      values.push_back(arg);
    }
  }
  return values;
}

} // namespace attn
