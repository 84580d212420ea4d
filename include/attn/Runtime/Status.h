//===- Status.h - Runtime status codes and messages -------------*- C++ -*-===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// Every runtime entry point returns a Status: a code from a closed enum (the same
// numbers as attnRtStatus in attn-c/Runtime.h) and a message that names the bad
// input. The runtime throws no exceptions; bad input is refused before any launch.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_RUNTIME_STATUS_H
#define ATTN_RUNTIME_STATUS_H

#include <cstdint>
#include <string>
#include <utility>

namespace attnrt {

/// Error categories. The numbers are ABI: they equal attnRtStatus in the C API.
enum class StatusCode : int32_t {
  Ok = 0,
  InvalidArgument = 1,      ///< null pointer, negative size, bad enum value
  NonMonotoneIndptr = 2,    ///< an indptr array decreases or does not start at 0
  BlockIndexOutOfRange = 3, ///< a KV block index outside [0, num_cache_blocks)
  LastBlockLenOutOfRange = 4, ///< a last-block length outside [1, block_size]
  HeadCountMismatch = 5,    ///< head counts or the GQA packing do not divide
  WorkspaceTooSmall = 6,    ///< caller workspace below the sizing function's answer
  GraphMaximaExceeded = 7,  ///< batch or query rows above the configured maxima
  ManifestMismatch = 8,     ///< a kernel's manifest disagrees with the plan or args
  ManifestParseError = 9,   ///< the manifest JSON is malformed or misses fields
  CudaUnavailable = 10,     ///< libcuda.so.1 could not be loaded or has no device
  CudaError = 11,           ///< a CUDA driver call failed
  NotFound = 12,            ///< no kernel of that name or role
  Unsupported = 13,         ///< valid request the runtime does not handle
};

/// Returns the enumerator's name, e.g. "NonMonotoneIndptr".
const char *statusCodeName(StatusCode code);

/// A status code plus a human-readable message. Cheap when Ok (empty string).
class Status {
public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status success() { return Status(); }
  bool ok() const { return code_ == StatusCode::Ok; }
  explicit operator bool() const { return ok(); }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }

private:
  StatusCode code_ = StatusCode::Ok;
  std::string message_;
};

} // namespace attnrt

#endif // ATTN_RUNTIME_STATUS_H
