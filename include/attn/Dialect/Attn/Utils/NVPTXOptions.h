//===- NVPTXOptions.h - Target options for PTX / cubin emission -*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// What a kernel is compiled for: chip, PTX features, optimisation level and
// where the CUDA toolkit lives. `validate` runs before anything reaches LLVM:
// an unknown chip or a PTX version too old for the chip is an LLVM fatal error
// that ends the process, so it must be caught here, with a message.
//
// Free of MLIR includes so that tools, the runtime-facing manifest code and
// the registered pipelines (attn-lower-to-nvvm, attn-to-nvvm-pipeline, which
// check their options with it) can use it.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_UTILS_NVPTXOPTIONS_H
#define ATTN_DIALECT_ATTN_UTILS_NVPTXOPTIONS_H

#include "attn/Dialect/Attn/Utils/TargetInfo.h"

#include "llvm/Support/Error.h"

#include <string>

namespace mlir::attn {

struct NVPTXOptions {
  /// A chip TargetInfo knows: sm_80, sm_86, sm_89, sm_90, sm_90a, ...
  std::string chip = kDefaultChip;
  /// LLVM NVPTX features, e.g. "+ptx80". Empty picks the default for the chip
  /// (see getDefaultFeatures).
  std::string features;
  /// LLVM optimisation level (0-3).
  unsigned optLevel = 3;
  /// CUDA toolkit root (ptxas, libdevice). Empty: $CUDA_HOME, then
  /// /usr/local/cuda.
  std::string cudaPath;
  /// Extra ptxas options (e.g. "-O3"); "-v" is always passed to collect the
  /// resource usage.
  std::string ptxasOptions = "-O3";

  /// Checks chip, features, opt level and a cudaPath given outright (it must
  /// be a directory); the error names the bad field and what would be
  /// accepted.
  llvm::Error validate() const;
  /// features, or the default for the chip when empty.
  std::string getFeatures() const;
  /// cudaPath, or $CUDA_HOME, or /usr/local/cuda.
  std::string getCudaPath() const;
};

/// The newest PTX ISA version (times 10) this LLVM emits.
unsigned getMaxPTXVersion();
/// "+ptxNN" picked for `chip` when no features are given (TargetInfo's
/// default PTX version); empty for a chip TargetInfo does not know.
std::string getDefaultFeatures(llvm::StringRef chip);

} // namespace mlir::attn

#endif // ATTN_DIALECT_ATTN_UTILS_NVPTXOPTIONS_H
