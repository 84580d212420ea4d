//===- NVPTXOptions.cpp - Validation of PTX / cubin target options --------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Chip and PTX-version rules. TargetInfo knows each chip and the first PTX
// ISA version that names it; LLVM aborts the process when asked for an older
// one, so every option set is checked here first (and a toolkit path given
// outright, which LLVM would pass over until ptxas failed).
//
//===----------------------------------------------------------------------===//

#include "attn/Dialect/Attn/Utils/NVPTXOptions.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"

using namespace mlir::attn;
using llvm::createStringError;

unsigned mlir::attn::getMaxPTXVersion() { return 90; }

std::string mlir::attn::getDefaultFeatures(llvm::StringRef chip) {
  std::optional<TargetInfo> info = TargetInfo::lookup(chip);
  return info ? "+ptx" + std::to_string(info->getDefaultPTXVersion()) : "";
}

std::string NVPTXOptions::getFeatures() const {
  return features.empty() ? getDefaultFeatures(chip) : features;
}

std::string NVPTXOptions::getCudaPath() const {
  if (!cudaPath.empty())
    return cudaPath;
  if (std::optional<std::string> env = llvm::sys::Process::GetEnv("CUDA_HOME"))
    if (!env->empty())
      return *env;
  return "/usr/local/cuda";
}

llvm::Error NVPTXOptions::validate() const {
  llvm::Expected<TargetInfo> info = TargetInfo::get(chip);
  if (!info)
    return info.takeError();
  unsigned minPTX = info->getMinPTXVersion();
  if (optLevel > 3)
    return createStringError("opt level must be 0-3, got %u", optLevel);
  // A toolkit named outright must exist: LLVM would go on without libdevice
  // and ptxas fail later on its unresolved functions.
  if (!cudaPath.empty() && !llvm::sys::fs::is_directory(cudaPath))
    return createStringError("CUDA toolkit path '%s' is not a directory",
                             cudaPath.c_str());
  std::string feats = getFeatures();
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(feats).split(parts, ',', -1, /*KeepEmpty=*/false);
  bool sawPTX = false;
  for (llvm::StringRef part : parts) {
    part = part.trim();
    llvm::StringRef ver = part;
    if (!ver.consume_front("+ptx"))
      return createStringError("unsupported feature '%s' (expected +ptxNN)",
                               part.str().c_str());
    if (sawPTX)
      return createStringError("features '%s' name more than one PTX version",
                               feats.c_str());
    unsigned ptx = 0;
    if (ver.getAsInteger(10, ptx))
      return createStringError("malformed PTX feature '%s'",
                               part.str().c_str());
    if (ptx < minPTX)
      return createStringError(
          "%s needs PTX ISA %u.%u or newer (+ptx%u), got %s", chip.c_str(),
          minPTX / 10, minPTX % 10, minPTX, part.str().c_str());
    if (ptx > getMaxPTXVersion())
      return createStringError("PTX feature %s is newer than this LLVM "
                               "supports (+ptx%u)",
                               part.str().c_str(), getMaxPTXVersion());
    sawPTX = true;
  }
  if (!sawPTX)
    return createStringError("features '%s' name no PTX version (+ptxNN)",
                             feats.c_str());
  return llvm::Error::success();
}
