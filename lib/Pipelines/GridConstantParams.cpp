//===- GridConstantParams.cpp - by-value kernel parameters -----------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// A tensor map (CUtensorMap, 128 bytes) reaches a kernel by value, as a
// `.param .align 64 .b8 name[128]` parameter that cp.async.bulk.tensor reads
// in place through its generic address (`__grid_constant__`): no copy in
// global memory to upload at every launch, and a CUDA graph captures it
// with the launch. The gpu.func carries such an argument as an `!llvm.ptr`
// and lists its index in `attn.grid_constant_args` (KernelSignature.h);
// convert-gpu-to-nvvm keeps neither the argument's attributes nor accepts
// nvvm.grid_constant on a gpu.func, so this pass marks the llvm.func's
// arguments after it: `llvm.byval = !llvm.array<128 x i8>`, `llvm.align =
// 64`, `nvvm.grid_constant`.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Transforms/KernelSignature.h"
#include "attn/Pipelines/Pipelines.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;

/// Bytes and alignment of a CUtensorMap.
static constexpr int64_t kTensorMapBytes = 128, kTensorMapAlign = 64;

namespace {

struct GridConstantParamsPass
    : public PassWrapper<GridConstantParamsPass,
                         OperationPass<gpu::GPUModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GridConstantParamsPass)

  StringRef getArgument() const final { return "attn-grid-constant-params"; }
  StringRef getDescription() const final {
    return "Pass the kernel arguments listed in attn.grid_constant_args by "
           "value, read in place (tensor maps)";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<NVVM::NVVMDialect>();
  }

  void runOnOperation() override {
    Builder b(&getContext());
    auto bytes = LLVM::LLVMArrayType::get(b.getI8Type(), kTensorMapBytes);
    WalkResult result = getOperation().walk([&](LLVM::LLVMFuncOp func) {
      auto indices =
          func->getAttrOfType<DenseI64ArrayAttr>(attn::kGridConstantArgsAttr);
      if (!indices)
        return WalkResult::advance();
      for (int64_t i : indices.asArrayRef()) {
        if (i < 0 || i >= int64_t(func.getNumArguments()) ||
            !isa<LLVM::LLVMPointerType>(func.getArgument(i).getType())) {
          func.emitError() << "attn.grid_constant_args names argument " << i
                           << ", which is not a pointer argument";
          return WalkResult::interrupt();
        }
        func.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                        TypeAttr::get(bytes));
        func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                        b.getI64IntegerAttr(kTensorMapAlign));
        func.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                        b.getUnitAttr());
      }
      func->removeAttr(attn::kGridConstantArgsAttr);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<Pass> mlir::attn::createGridConstantParamsPass() {
  return std::make_unique<GridConstantParamsPass>();
}
