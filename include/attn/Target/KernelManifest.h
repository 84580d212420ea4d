//===- KernelManifest.h - Writing the JSON kernel manifest ------*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The compiler side of the manifest the runtime reads (include/attn/Runtime/
// Manifest.h, docs/Manifest.md): one JSON document per cubin naming each
// kernel's arguments in order, threads, dynamic shared memory, tile, format,
// dtype and heads, written from the kernel's `attn.launch` contract, plus
// what ptxas reported.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_TARGET_KERNELMANIFEST_H
#define ATTN_TARGET_KERNELMANIFEST_H

#include "attn/Dialect/Attn/Utils/NVPTXOptions.h"
#include "attn/Target/Serialization.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/Support/JSON.h"

namespace mlir::attn {

/// Adds what ptxas reported (`usage`, may be null) as the kernel's
/// `resources`.
void addManifestResources(llvm::json::Object &kernel,
                          const KernelResourceUsage *usage);

/// The ptxas report of `kernelName` in `usage`, or null.
const KernelResourceUsage *
findResourceUsage(llvm::ArrayRef<KernelResourceUsage> usage,
                  llvm::StringRef kernelName);

/// The manifest entry of one generated kernel, written from what the
/// gpu.func carries alone: its `attn.launch` contract and its arguments'
/// names (`attn.name`), types and declared parameter types
/// (`attn.param_type`); `usage` (what ptxas reported) may be null. An error
/// names the kernel and what it lacks.
llvm::Expected<llvm::json::Object>
getKernelManifest(mlir::gpu::GPUFuncOp kernel,
                  const KernelResourceUsage *usage);

/// The whole document: version, arch, compiler version, kernels, and the file
/// names of the binaries it describes.
llvm::json::Object getManifest(const NVPTXOptions &options,
                               llvm::json::Array kernels,
                               llvm::StringRef cubinFile,
                               llvm::StringRef ptxFile);

} // namespace mlir::attn

#endif // ATTN_TARGET_KERNELMANIFEST_H
