//===- PrefillManifest.h - Manifest entry of a prefill kernel ---*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The docs/Manifest.md entry of one generated work-list prefill kernel
// (role "attention", grid num_ctas), next to the decode and merge entries of
// KernelManifest.h.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_TARGET_PREFILLMANIFEST_H
#define ATTN_TARGET_PREFILLMANIFEST_H

#include "attn/Conversion/AttnToGPU/PrefillKernel.h"
#include "attn/Target/Serialization.h"

#include "llvm/Support/JSON.h"

namespace attn {

/// The manifest entry of the prefill kernel for `spec`; `usage` (what ptxas
/// reported) may be null.
llvm::json::Object getPrefillKernelManifest(const PrefillKernelSpec &spec,
                                            const KernelResourceUsage *usage);

} // namespace attn

#endif // ATTN_TARGET_PREFILLMANIFEST_H
