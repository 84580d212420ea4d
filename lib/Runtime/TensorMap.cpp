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
/// 2^40, box sides at most 256; coordinates are signed 32-bit.
static constexpr uint64_t kStrideLimit = uint64_t(1) << 40;
static constexpr uint64_t kTokenLimit = (uint64_t(1) << 31) - 1;

Status describeKVTensorMap(const KernelManifest &k, const ManifestArg &a,
                           uint64_t address, const KVRowAddressing &rows,
                           KVTensorMapDesc *out) {
  auto invalid = [&](const std::string &what) {
    return Status(StatusCode::InvalidArgument,
                  "kernel \"" + k.name + "\" tensor map \"" + a.name +
                      "\" (K/V by TMA): " + what);
  };
  if (k.dtype != "bf16" && k.dtype != "f16")
    return invalid("K/V of " + k.dtype + "; tensor maps are built for bf16 "
                   "and f16");
  if (k.head_dim <= 0 || k.head_dim % kPanelElements || k.num_kv_heads <= 0 ||
      a.box_rows <= 0 || a.box_rows > 256)
    return invalid("head_dim " + std::to_string(k.head_dim) + " and " +
                   std::to_string(a.box_rows) + " rows make no box (head_dim "
                   "a multiple of 64, box_rows in [1, 256])");
  const bool paged = k.indexing == KVIndexing::Paged;
  if (paged && (k.block_cols <= 0 || k.block_cols > int32_t(kTokenLimit)))
    return invalid("page size " + std::to_string(k.block_cols));
  const uint64_t elt = 2, D = uint64_t(k.head_dim), H = uint64_t(k.num_kv_heads);
  if (address % 16)
    return invalid("the K/V buffer's address " + std::to_string(address) +
                   " is not a multiple of 16 bytes");
  auto checkStride = [&](const char *what, int64_t elements) -> Status {
    if (elements <= 0 || (uint64_t(elements) * elt) % 16)
      return invalid(std::string(what) + " " + std::to_string(elements) +
                     " elements is not a positive multiple of 8 (16 bytes)");
    if (uint64_t(elements) * elt >= kStrideLimit)
      return invalid(std::string(what) + " " + std::to_string(elements) +
                     " elements reaches 2^40 bytes");
    return Status::success();
  };
  *out = KVTensorMapDesc();
  out->f16 = k.dtype == "f16";
  out->address = address;
  out->dims[0] = D;
  out->box[0] = kPanelElements;
  const uint32_t boxRows = uint32_t(a.box_rows);
  if (!paged) {
    int64_t tokenStride = rows.strided ? rows.tokenStride : int64_t(H * D);
    int64_t headStride = rows.strided ? rows.headStride : int64_t(D);
    if (Status s = checkStride("the token stride", tokenStride); !s.ok())
      return s;
    if (Status s = checkStride("the head stride", headStride); !s.ok())
      return s;
    out->rank = 3;
    out->dims[1] = H;
    out->dims[2] = kTokenLimit;
    out->strides[0] = uint64_t(headStride) * elt;
    out->strides[1] = uint64_t(tokenStride) * elt;
    out->box[1] = 1;
    out->box[2] = boxRows;
    return Status::success();
  }
  if (Status s = checkStride("the page stride", rows.pageStride); !s.ok())
    return s;
  const uint64_t P = uint64_t(k.block_cols);
  out->rank = 4;
  out->dims[3] = uint64_t(rows.numPages > 0 ? rows.numPages : 1);
  out->strides[2] = uint64_t(rows.pageStride) * elt;
  out->box[3] = 1;
  if (k.layout == KVLayout::NHD) {
    out->dims[1] = H;
    out->dims[2] = P;
    out->strides[0] = D * elt;
    out->strides[1] = H * D * elt;
    out->box[1] = 1;
    out->box[2] = boxRows;
  } else {
    out->dims[1] = P;
    out->dims[2] = H;
    out->strides[0] = D * elt;
    out->strides[1] = P * D * elt;
    out->box[1] = boxRows;
    out->box[2] = 1;
  }
  return Status::success();
}

} // namespace attnrt
