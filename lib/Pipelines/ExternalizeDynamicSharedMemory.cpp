//===- ExternalizeDynamicSharedMemory.cpp - .extern .shared fix -----------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// convert-gpu-to-nvvm lowers gpu.dynamic_shared_memory to an internal
// zero-sized `!llvm.array<0 x i8>` global in address space 3. NVPTX demotes
// such a global to a 1-byte `.shared` array, so every access past byte 0
// overlaps nothing the driver reserved. With external linkage it becomes the
// `.extern .shared .align 1024 .b8 name[]` that the dynamic shared memory
// size given at launch backs; 1024 bytes is the alignment of the 128-byte
// swizzle atoms that wgmma descriptors address (the kernels lay their tiles
// out from that base, TileSharedMemory).
//
//===----------------------------------------------------------------------===//

#include "attn/Pipelines/Pipelines.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/Pass.h"

#define DEBUG_TYPE "attn-externalize-dynamic-shared-memory"

using namespace mlir;

/// NVPTX's shared (workgroup) address space.
static constexpr unsigned kNVPTXSharedAddressSpace = 3;

namespace {

struct ExternalizeDynamicSharedMemoryPass
    : public PassWrapper<ExternalizeDynamicSharedMemoryPass,
                         OperationPass<gpu::GPUModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(
      ExternalizeDynamicSharedMemoryPass)

  StringRef getArgument() const final {
    return "attn-externalize-dynamic-shared-memory";
  }
  StringRef getDescription() const final {
    return "Give zero-sized workgroup globals external linkage";
  }

  void runOnOperation() override {
    getOperation().walk([](LLVM::GlobalOp global) {
      auto array = dyn_cast<LLVM::LLVMArrayType>(global.getType());
      if (!array || array.getNumElements() != 0 ||
          global.getAddrSpace() != kNVPTXSharedAddressSpace ||
          global.getInitializerRegion().getBlocks().size() != 0 ||
          global.getValueAttr())
        return;
      global.setLinkage(LLVM::Linkage::External);
      global.setAlignment(1024);
      global.setVisibility_(LLVM::Visibility::Default);
    });
  }
};

} // namespace

std::unique_ptr<Pass> mlir::attn::createExternalizeDynamicSharedMemoryPass() {
  return std::make_unique<ExternalizeDynamicSharedMemoryPass>();
}
