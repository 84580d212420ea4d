//===- TensorMap.h - The tensor maps of kv_tma kernels ----------*- C++ -*-===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// A kernel whose tile loads K/V by TMA (manifest tile "kv_tma") takes, for
// each of k_cache and v_cache, a tensor map (manifest kind "tensormap", with
// its "source" buffer and "box_rows"): a 128-byte CUtensorMap passed by
// value. Callers never pass one; the launcher encodes it at each launch from
// the source pointer and the row addressing the call binds, so the kernel
// reads whatever buffer the call names and a CUDA graph captures the map
// with the launch.
//
// Dimensions, innermost first (elements; strides in bytes):
//   ragged      head_dim, num_kv_heads (kv_head_stride apart), tokens
//               (kv_token_stride apart); without stride arguments dense NHD
//   paged NHD   head_dim, num_kv_heads, page_size, pages (page_stride apart)
//   paged HND   head_dim, page_size, num_kv_heads, pages
// The box is 64 elements (one 64-column panel, 128 bytes: the swizzle span
// the kernel's wgmma operands read) x 1 head x box_rows keys (x 1 page).
// The kernel issues only boxes inside the request's keys (a tile reaching
// past them is copied by cp.async), so the token extent only has to cover
// every row the buffer can have: the largest the coordinates allow,
// independent of any one call's buffers; the page extent is num_pages.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_RUNTIME_TENSORMAP_H
#define ATTN_RUNTIME_TENSORMAP_H

#include "attn/Runtime/Manifest.h"
#include "attn/Runtime/Status.h"

#include <cstdint>

namespace attnrt {

/// Where a call's K/V rows lie besides the buffer's address: the strided
/// ragged formats' strides (elements), the paged formats' page stride
/// (elements) and page count.
struct KVRowAddressing {
  bool strided = false;
  int64_t tokenStride = 0, headStride = 0;
  int64_t pageStride = 0;
  int32_t numPages = 0;
};

/// The arguments of cuTensorMapEncodeTiled for one K or V map.
struct KVTensorMapDesc {
  bool f16 = false;         ///< element type: f16, else bf16
  uint64_t address = 0;     ///< the source buffer
  uint32_t rank = 0;        ///< 3 (ragged) or 4 (paged)
  uint64_t dims[4] = {};    ///< innermost first (see above)
  uint64_t strides[3] = {}; ///< bytes, of dims 1..rank-1
  uint32_t box[4] = {};
};

/// The map `a` (a tensormap argument) of kernel `k` over the buffer at
/// `address`. InvalidArgument, naming the rule, when TMA cannot address the
/// buffer (an address or stride not a multiple of 16 bytes, a stride past
/// 2^40 bytes) or the manifest describes no box.
Status describeKVTensorMap(const KernelManifest &k, const ManifestArg &a,
                           uint64_t address, const KVRowAddressing &rows,
                           KVTensorMapDesc *out);

} // namespace attnrt

#endif // ATTN_RUNTIME_TENSORMAP_H
