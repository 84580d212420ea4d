//===- InitAllDialects.h - every dialect attn tools load ---------*- C++ -*-===//
//
// One place that registers the attn dialect and the upstream dialects its
// pipeline produces, for attn-opt, the compile driver and the C API.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_INITALLDIALECTS_H
#define ATTN_INITALLDIALECTS_H

#include "attn/Dialect/Attn/IR/Attn.h"
#include "attn/Dialect/Attn/IR/BufferizableOpInterfaceImpl.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/DialectRegistry.h"

namespace mlir::attn {

inline void registerAllDialects(DialectRegistry &registry) {
  registry.insert<AttnDialect, affine::AffineDialect, arith::ArithDialect,
                  cf::ControlFlowDialect, func::FuncDialect, gpu::GPUDialect,
                  LLVM::LLVMDialect, NVVM::NVVMDialect, math::MathDialect,
                  memref::MemRefDialect, nvgpu::NVGPUDialect, scf::SCFDialect,
                  tensor::TensorDialect, vector::VectorDialect>();
  registerBufferizableOpInterfaceExternalModels(registry);
}

} // namespace mlir::attn

#endif // ATTN_INITALLDIALECTS_H
