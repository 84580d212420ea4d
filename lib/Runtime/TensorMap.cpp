//===- TensorMap.cpp - The tensor maps of kv_tma kernels ------------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/TensorMap.h"

#include <string>

namespace attnrt {

/// Elements of one box row: a 64-column panel, 128 bytes of 16-bit elements.
static constexpr uint32_t kPanelElements = 64;
/// cuTensorMapEncodeTiled's limits: strides multiples of 16 bytes and under
/// 2^40, dimensions at most 2^32, coordinates signed 32-bit.
static constexpr uint64_t kStrideLimit = uint64_t(1) << 40;
static constexpr uint64_t kTokenLimit = (uint64_t(1) << 31) - 1;

Status describeKVTensorMap(const KernelManifest &k, uint64_t address,
                           bool strided, int64_t tokenStride,
                           int64_t headStride, KVTensorMapDesc *out) {
  auto invalid = [&](const std::string &what) {
    return Status(StatusCode::InvalidArgument,
                  "kernel \"" + k.name + "\" (K/V by TMA): " + what);
  };
  if (k.dtype != "bf16" && k.dtype != "f16")
    return invalid("K/V of " + k.dtype + "; tensor maps are built for bf16 "
                   "and f16");
  if (k.head_dim <= 0 || k.head_dim % kPanelElements || k.num_kv_heads <= 0 ||
      k.tile_kv <= 0 || k.tile_kv > 256)
    return invalid("head_dim " + std::to_string(k.head_dim) + " and tile kv " +
                   std::to_string(k.tile_kv) + " make no box (head_dim a "
                   "multiple of 64, kv in [1, 256])");
  const uint64_t elt = 2;
  if (!strided) {
    tokenStride = int64_t(k.num_kv_heads) * k.head_dim;
    headStride = k.head_dim;
  }
  if (address % 16)
    return invalid("the K/V buffer's address " + std::to_string(address) +
                   " is not a multiple of 16 bytes");
  if (tokenStride <= 0 || headStride <= 0 ||
      (uint64_t(tokenStride) * elt) % 16 || (uint64_t(headStride) * elt) % 16)
    return invalid("row strides " + std::to_string(tokenStride) + " (token) "
                   "and " + std::to_string(headStride) + " (head) elements "
                   "must be positive multiples of 8 (16 bytes)");
  if (uint64_t(tokenStride) * elt >= kStrideLimit ||
      uint64_t(headStride) * elt >= kStrideLimit)
    return invalid("a row stride reaches 2^40 bytes");
  out->f16 = k.dtype == "f16";
  out->address = address;
  out->dims[0] = uint64_t(k.head_dim);
  out->dims[1] = uint64_t(k.num_kv_heads);
  out->dims[2] = kTokenLimit;
  out->strides[0] = uint64_t(headStride) * elt;
  out->strides[1] = uint64_t(tokenStride) * elt;
  out->box[0] = kPanelElements;
  out->box[1] = 1;
  out->box[2] = uint32_t(k.tile_kv);
  return Status::success();
}

} // namespace attnrt
