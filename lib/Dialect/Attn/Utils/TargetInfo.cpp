//===- TargetInfo.cpp - What attn knows of each GPU -----------------------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// One row per chip: shared memory per CTA (opt-in maximum) and per SM and
// resident threads per SM from the CUDA programming guide's table of compute
// capabilities, and the first PTX ISA version that names the chip (PTX ISA
// release notes). LLVM aborts the process when asked for a PTX version older
// than the chip needs, which is why the back end checks against this table
// before it calls LLVM.
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Utils/TargetInfo.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir::attn;

namespace {
struct ChipRow {
  const char *name;
  int64_t sm;
  int64_t smemPerBlockKiB, smemPerSMKiB, threadsPerSM, minPTX;
};
} // namespace

static constexpr ChipRow kChips[] = {
    {"sm_80", 80, 163, 164, 2048, 70},   {"sm_86", 86, 99, 100, 1536, 71},
    {"sm_87", 87, 163, 164, 2048, 74},   {"sm_89", 89, 99, 100, 1536, 78},
    {"sm_90", 90, 227, 228, 2048, 78},   {"sm_90a", 90, 227, 228, 2048, 80},
    {"sm_100", 100, 227, 228, 2048, 86}, {"sm_100a", 100, 227, 228, 2048, 86},
    {"sm_120", 120, 99, 100, 1536, 87},  {"sm_120a", 120, 99, 100, 1536, 87},
};

std::optional<TargetInfo> TargetInfo::lookup(llvm::StringRef name) {
  for (const ChipRow &row : kChips) {
    if (name != row.name)
      continue;
    TargetInfo info;
    info.name = row.name;
    info.sm = row.sm;
    info.archSpecific = name.ends_with("a");
    info.smemPerBlock = row.smemPerBlockKiB * 1024;
    info.smemPerSM = row.smemPerSMKiB * 1024;
    info.maxThreadsPerSM = row.threadsPerSM;
    info.minPTX = row.minPTX;
    return info;
  }
  return std::nullopt;
}

llvm::SmallVector<llvm::StringRef> TargetInfo::getKnownChips() {
  llvm::SmallVector<llvm::StringRef> names;
  for (const ChipRow &row : kChips)
    names.push_back(row.name);
  return names;
}

llvm::Expected<TargetInfo> TargetInfo::get(llvm::StringRef name) {
  if (std::optional<TargetInfo> info = lookup(name))
    return *info;
  std::string known;
  for (llvm::StringRef chip : getKnownChips())
    known += (known.empty() ? "" : ", ") + chip.str();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::formatv("unknown chip '{0}' (attn generates kernels for {1})",
                    name, known));
}

llvm::Error TargetInfo::checkHeadDim(int64_t headDim) {
  if (headDim >= kHeadDimGranule && headDim <= kMaxHeadDim &&
      headDim % kHeadDimGranule == 0)
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::formatv("head dim {0} is not supported: kernels take a multiple of "
                    "{1} in [{1}, {2}]",
                    headDim, kHeadDimGranule, kMaxHeadDim));
}
