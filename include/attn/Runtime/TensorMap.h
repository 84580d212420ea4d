//===- TensorMap.h - The tensor maps of kv_tma kernels ----------*- C++ -*-===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// A kernel whose tile loads K/V by TMA (manifest tile "kv_tma") takes, for
// each of k_cache and v_cache, a tensor map (manifest kind "tensormap",
// "source" the buffer): a 128-byte CUtensorMap passed by value. Callers never
// pass one; the launcher encodes it at each launch from the source pointer
// and the rows' strides the call binds, so the kernel reads whatever buffer
// the call names and a CUDA graph captures the map with the launch.
//
// The map is 3-D, innermost first: head_dim elements, num_kv_heads heads
// (kv_head_stride elements apart), tokens (kv_token_stride apart); without
// stride arguments the rows are dense NHD (num_kv_heads * head_dim, head_dim).
// Its box is 64 elements x 1 head x tile_kv tokens, swizzled 128 bytes: one
// 64-column panel of a tile, the layout the kernel's wgmma operands read.
// The kernel issues only boxes inside the request's keys (a tile reaching
// past them is copied by cp.async), so the token extent only has to cover
// every row the buffer can have; it is the largest the address arithmetic
// allows, independent of any one call's buffers.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_RUNTIME_TENSORMAP_H
#define ATTN_RUNTIME_TENSORMAP_H

#include "attn/Runtime/Manifest.h"
#include "attn/Runtime/Status.h"

#include <cstdint>

namespace attnrt {

/// The arguments of cuTensorMapEncodeTiled for one K or V map.
struct KVTensorMapDesc {
  bool f16 = false;         ///< element type: f16, else bf16
  uint64_t address = 0;     ///< the source buffer
  uint64_t dims[3] = {};    ///< head_dim, num_kv_heads, tokens
  uint64_t strides[2] = {}; ///< bytes between heads, between tokens
  uint32_t box[3] = {};     ///< 64, 1, tile_kv
};

/// The map of the buffer at `address` for kernel `k` (an attention kernel of
/// bf16/f16 with kv_tma): rows `tokenStride` / `headStride` elements apart
/// when the kernel takes strides (`strided`), dense NHD otherwise.
/// InvalidArgument, naming the rule, when the buffer cannot be described
/// (misaligned address or strides, a stride past 2^40 bytes).
Status describeKVTensorMap(const KernelManifest &k, uint64_t address,
                           bool strided, int64_t tokenStride,
                           int64_t headStride, KVTensorMapDesc *out);

} // namespace attnrt

#endif // ATTN_RUNTIME_TENSORMAP_H
