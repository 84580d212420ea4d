//===- GenPrefill.h - attn-gen-kernel's prefill path ------------*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// `attn-gen-kernel --kind=prefill`: builds the work-list prefill kernel and
// writes it at the requested stage (mlir, nvvm, ptx, cubin + manifest).
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_TOOLS_ATTN_GEN_KERNEL_GENPREFILL_H
#define ATTN_TOOLS_ATTN_GEN_KERNEL_GENPREFILL_H

#include "attn/Conversion/AttnToGPU/PrefillKernel.h"
#include "attn/Target/NVPTXOptions.h"

namespace attn {

/// Builds the prefill kernel of `spec` with the built-in `variants` inlined
/// and writes stage `emit` to `output` (cubin: plus `<output>.json`).
/// Returns the process exit code.
int genPrefillKernel(PrefillKernelSpec spec,
                     llvm::ArrayRef<std::string> variants,
                     const NVPTXOptions &target, llvm::StringRef emit,
                     llvm::StringRef output, bool timing);

} // namespace attn

#endif // ATTN_TOOLS_ATTN_GEN_KERNEL_GENPREFILL_H
