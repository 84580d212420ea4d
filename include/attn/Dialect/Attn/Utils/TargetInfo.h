//===- TargetInfo.h - What attn knows of each GPU ----------------*- C++ -*-===//
//
// Part of the attn project.
//
//===----------------------------------------------------------------------===//
//
// The one place for per-chip facts. Tile selection sizes tiles against these
// limits, the verifiers check user-given tiles and head dims against them,
// the target lowerings ask which instructions exist (cp.async, griddepcontrol,
// TMA, wgmma), and the NVPTX back end asks which PTX ISA a chip needs. No other
// file holds a chip name, a shared-memory size or a PTX version.
//
// Free of MLIR so the back end's option checks and the tools can use it.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_DIALECT_ATTN_UTILS_TARGETINFO_H
#define ATTN_DIALECT_ATTN_UTILS_TARGETINFO_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::attn {

/// The chip the tools and passes target when none is named.
inline constexpr const char kDefaultChip[] = "sm_90";

/// Facts about one NVIDIA GPU architecture (compute capability) that the
/// compiler's decisions depend on.
class TargetInfo {
public:
  /// The chip called `name` ("sm_80", "sm_90a", ...), or none when attn does
  /// not know it.
  static std::optional<TargetInfo> lookup(llvm::StringRef name);
  /// The same, or an error that lists the known chips.
  static llvm::Expected<TargetInfo> get(llvm::StringRef name);
  /// Every chip lookup() knows, oldest first.
  static llvm::SmallVector<llvm::StringRef> getKnownChips();

  /// "sm_90a".
  llvm::StringRef getName() const { return name; }
  /// Compute capability times ten (90 for sm_90 and sm_90a).
  int64_t getSMVersion() const { return sm; }
  /// Whether the name carries the arch-specific suffix `a` (sm_90a): such
  /// code runs on that compute capability only.
  bool isArchSpecific() const { return archSpecific; }

  //===--------------------------------------------------------------------===//
  // Resources
  //===--------------------------------------------------------------------===//

  /// Dynamic shared memory one CTA may use once it opts in, in bytes.
  int64_t getSharedMemoryPerBlock() const { return smemPerBlock; }
  /// Shared memory of one SM, in bytes (what resident CTAs share).
  int64_t getSharedMemoryPerSM() const { return smemPerSM; }
  /// 32-bit registers of one SM.
  int64_t getRegistersPerSM() const { return 64 * 1024; }
  /// Registers one thread may use.
  int64_t getMaxRegistersPerThread() const { return 255; }
  /// Threads resident on one SM.
  int64_t getMaxThreadsPerSM() const { return maxThreadsPerSM; }
  /// Threads of one CTA.
  int64_t getMaxThreadsPerBlock() const { return 1024; }

  //===--------------------------------------------------------------------===//
  // Instructions
  //===--------------------------------------------------------------------===//

  /// mma.sync m16n8k16 on bf16/f16 and cp.async: every chip attn generates
  /// kernels for has them (sm_80+).
  bool hasMmaSync() const { return sm >= 80; }
  bool hasCpAsync() const { return sm >= 80; }
  /// griddepcontrol (programmatic dependent launch).
  bool hasPDL() const { return sm >= 90; }
  /// The bulk tensor copy engine (cp.async.bulk.tensor) with mbarriers.
  bool hasTMA() const { return sm >= 90; }
  /// wgmma.mma_async and setmaxnreg: sm_90a only.
  bool hasWgmma() const { return sm == 90 && archSpecific; }

  //===--------------------------------------------------------------------===//
  // Shapes the generated kernels support on this chip
  //===--------------------------------------------------------------------===//

  /// Head dims are multiples of the mma k-step, up to what the register
  /// budget of a 16-row tile holds.
  static constexpr int64_t kHeadDimGranule = 16;
  static constexpr int64_t kMaxHeadDim = 256;
  /// Bytes of a q/k/v/o element: bf16 and f16.
  static constexpr int64_t kElementBytes = 2;
  /// Whether kernels can be generated for `headDim` (a multiple of 16 in
  /// [16, 256]); the message says which rule fails.
  static llvm::Error checkHeadDim(int64_t headDim);

  //===--------------------------------------------------------------------===//
  // PTX
  //===--------------------------------------------------------------------===//

  /// The oldest PTX ISA version (times ten) that knows this chip.
  int64_t getMinPTXVersion() const { return minPTX; }
  /// The PTX version the back end targets by default (at least 8.0).
  int64_t getDefaultPTXVersion() const { return minPTX > 80 ? minPTX : 80; }

private:
  TargetInfo() = default;

  std::string name;
  int64_t sm = 0;
  bool archSpecific = false;
  int64_t smemPerBlock = 0, smemPerSM = 0, maxThreadsPerSM = 0, minPTX = 0;
};

} // namespace mlir::attn

#endif // ATTN_DIALECT_ATTN_UTILS_TARGETINFO_H
