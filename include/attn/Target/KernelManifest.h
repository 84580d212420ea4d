//===- KernelManifest.h - Writing the JSON kernel manifest ------*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The compiler side of the manifest the runtime reads (include/attn/Runtime/
// Manifest.h, docs/Manifest.md): one JSON document per cubin naming each
// kernel's arguments in order, threads, dynamic shared memory, tile, format,
// dtype and heads, plus what ptxas reported.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_TARGET_KERNELMANIFEST_H
#define ATTN_TARGET_KERNELMANIFEST_H

#include "attn/Conversion/AttnToGPU/KernelSpec.h"
#include "attn/Target/NVPTXOptions.h"
#include "attn/Target/Serialization.h"

#include "llvm/Support/JSON.h"

namespace attn {

/// The manifest entry of one generated decode kernel; `usage` may be null.
llvm::json::Object getDecodeKernelManifest(const DecodeKernelSpec &spec,
                                           const KernelResourceUsage *usage);

/// The whole document: version, arch, compiler version, kernels, and the file
/// names of the binaries it describes.
llvm::json::Object getManifest(const NVPTXOptions &options,
                               llvm::json::Array kernels,
                               llvm::StringRef cubinFile,
                               llvm::StringRef ptxFile);

} // namespace attn

#endif // ATTN_TARGET_KERNELMANIFEST_H
