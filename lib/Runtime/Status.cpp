//===- Status.cpp - Status code names -------------------------------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/Status.h"

namespace attnrt {

const char *statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::Ok: return "Ok";
  case StatusCode::InvalidArgument: return "InvalidArgument";
  case StatusCode::NonMonotoneIndptr: return "NonMonotoneIndptr";
  case StatusCode::BlockIndexOutOfRange: return "BlockIndexOutOfRange";
  case StatusCode::LastBlockLenOutOfRange: return "LastBlockLenOutOfRange";
  case StatusCode::HeadCountMismatch: return "HeadCountMismatch";
  case StatusCode::WorkspaceTooSmall: return "WorkspaceTooSmall";
  case StatusCode::GraphMaximaExceeded: return "GraphMaximaExceeded";
  case StatusCode::ManifestMismatch: return "ManifestMismatch";
  case StatusCode::ManifestParseError: return "ManifestParseError";
  case StatusCode::CudaUnavailable: return "CudaUnavailable";
  case StatusCode::CudaError: return "CudaError";
  case StatusCode::NotFound: return "NotFound";
  case StatusCode::Unsupported: return "Unsupported";
  }
  return "Unknown";
}

} // namespace attnrt
