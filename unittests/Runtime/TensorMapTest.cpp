//===- TensorMapTest.cpp - The tensor maps of kv_tma kernels --------------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//
//
// What the launcher hands cuTensorMapEncodeTiled for a kernel that loads K/V
// by TMA (describeKVTensorMap): CPU only; the encoding itself and the loads
// run in the GPU suite with ATTN_KV_TMA=1.
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/TensorMap.h"

#include <gtest/gtest.h>

using namespace attnrt;

namespace {

KernelManifest tmaKernel(const char *dtype = "bf16", int32_t headDim = 128) {
  KernelManifest k;
  k.name = "attn_prefill_tma";
  k.dtype = dtype;
  k.head_dim = headDim;
  k.num_qo_heads = 32;
  k.num_kv_heads = 8;
  k.tile_q = 128;
  k.tile_kv = 128;
  k.kv_tma = true;
  return k;
}

TEST(TensorMap, DenseRowsAreNHD) {
  KVTensorMapDesc m;
  ASSERT_TRUE(describeKVTensorMap(tmaKernel(), 0x10000, false, 0, 0, &m).ok());
  EXPECT_FALSE(m.f16);
  EXPECT_EQ(m.address, 0x10000u);
  EXPECT_EQ(m.dims[0], 128u);
  EXPECT_EQ(m.dims[1], 8u);
  EXPECT_EQ(m.dims[2], (uint64_t(1) << 31) - 1); // never the bound of a box
  EXPECT_EQ(m.strides[0], 128u * 2);             // head to head
  EXPECT_EQ(m.strides[1], 8u * 128 * 2);         // token to token
  // One 64-column panel (128 bytes, the swizzle span) of one head's tile.
  EXPECT_EQ(m.box[0], 64u);
  EXPECT_EQ(m.box[1], 1u);
  EXPECT_EQ(m.box[2], 128u);
}

TEST(TensorMap, StridedRowsTakeTheCallsStrides) {
  KVTensorMapDesc m;
  // HND: heads are tokens x dim apart, tokens dim apart.
  ASSERT_TRUE(
      describeKVTensorMap(tmaKernel("f16", 64), 0x20000, true, 64, 1000 * 64, &m)
          .ok());
  EXPECT_TRUE(m.f16);
  EXPECT_EQ(m.dims[0], 64u);
  EXPECT_EQ(m.strides[0], 1000u * 64 * 2);
  EXPECT_EQ(m.strides[1], 64u * 2);
  // A fused QKV projection's K slice: (32 + 8 + 8) heads x 128 a token.
  ASSERT_TRUE(
      describeKVTensorMap(tmaKernel(), 0x20000, true, 48 * 128, 128, &m).ok());
  EXPECT_EQ(m.strides[1], 48u * 128 * 2);
}

TEST(TensorMap, RefusesWhatTMACannotAddress) {
  KVTensorMapDesc m;
  struct Bad {
    uint64_t address;
    int64_t tokenStride, headStride;
    const char *needle;
  };
  for (const Bad &b : std::initializer_list<Bad>{
           {0x10008, 1024, 128, "multiple of 16 bytes"},
           {0x10000, 1028, 128, "multiples of 8"},
           {0x10000, 1024, 0, "positive"},
           {0x10000, int64_t(1) << 40, 128, "2^40"}}) {
    Status s = describeKVTensorMap(tmaKernel(), b.address, true, b.tokenStride,
                                   b.headStride, &m);
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument) << b.needle;
    EXPECT_NE(s.message().find(b.needle), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("attn_prefill_tma"), std::string::npos);
  }
  Status s = describeKVTensorMap(tmaKernel("f32"), 0x10000, false, 0, 0, &m);
  EXPECT_NE(s.message().find("bf16 and f16"), std::string::npos) << s.message();
  s = describeKVTensorMap(tmaKernel("bf16", 96), 0x10000, false, 0, 0, &m);
  EXPECT_NE(s.message().find("multiple of 64"), std::string::npos)
      << s.message();
}

} // namespace
