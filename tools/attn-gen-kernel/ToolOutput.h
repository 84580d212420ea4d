//===- ToolOutput.h - attn-gen-kernel's error and file helpers --*- C++ -*-===//
//
// The two helpers both halves of attn-gen-kernel (decode in
// attn-gen-kernel.cpp, prefill in GenPrefill.cpp) report and write with.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_TOOLS_ATTN_GEN_KERNEL_TOOLOUTPUT_H
#define ATTN_TOOLS_ATTN_GEN_KERNEL_TOOLOUTPUT_H

#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace attn {

/// Prints `message` as the tool's error; returns the exit status 1.
inline int fail(const llvm::Twine &message) {
  llvm::errs() << "attn-gen-kernel: " << message << "\n";
  return 1;
}

/// Writes `bytes` to `path` ("-" is stdout); returns an exit status.
inline int writeFile(llvm::StringRef path, llvm::StringRef bytes) {
  std::string err;
  auto file = mlir::openOutputFile(path, &err);
  if (!file)
    return fail(err);
  file->os() << bytes;
  file->keep();
  return 0;
}

} // namespace attn

#endif // ATTN_TOOLS_ATTN_GEN_KERNEL_TOOLOUTPUT_H
