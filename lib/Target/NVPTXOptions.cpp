//===- NVPTXOptions.cpp - Validation of PTX / cubin target options --------===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// Chip and PTX-version rules. The table lists the first PTX ISA version that
// knows each SM (from the PTX ISA release notes); LLVM aborts the process when
// asked for an older one, so every option set is checked here first.
//
//===----------------------------------------------------------------------===//

#include "attn/Target/NVPTXOptions.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Process.h"

#include <algorithm>

using namespace mlir::attn;
using llvm::createStringError;

unsigned mlir::attn::getSMVersion(llvm::StringRef chip) {
  if (!chip.consume_front("sm_"))
    return 0;
  if (chip.ends_with("a") || chip.ends_with("f"))
    chip = chip.drop_back();
  unsigned sm = 0;
  if (chip.getAsInteger(10, sm))
    return 0;
  return sm;
}

unsigned mlir::attn::getMinPTXVersion(llvm::StringRef chip) {
  return llvm::StringSwitch<unsigned>(chip)
      .Case("sm_75", 63)
      .Case("sm_80", 70)
      .Case("sm_86", 71)
      .Case("sm_87", 74)
      .Case("sm_89", 78)
      .Case("sm_90", 78)
      .Case("sm_90a", 80)
      .Cases({"sm_100", "sm_100a", "sm_101", "sm_101a"}, 86)
      .Cases({"sm_120", "sm_120a"}, 87)
      .Cases({"sm_100f", "sm_103", "sm_103a", "sm_103f", "sm_121", "sm_121a"},
             88)
      .Default(0);
}

unsigned mlir::attn::getMaxPTXVersion() { return 90; }

std::string mlir::attn::getDefaultFeatures(llvm::StringRef chip) {
  unsigned ptx = std::max(getMinPTXVersion(chip), 80u);
  return "+ptx" + std::to_string(ptx);
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
  unsigned minPTX = getMinPTXVersion(chip);
  if (minPTX == 0)
    return createStringError(
        "unknown chip '%s' (expected one of sm_75, sm_80, sm_86, sm_87, "
        "sm_89, sm_90, sm_90a, sm_100[a], sm_101[a], sm_103[a], sm_120[a], "
        "sm_121[a])",
        chip.c_str());
  if (optLevel > 3)
    return createStringError("opt level must be 0-3, got %u", optLevel);
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
