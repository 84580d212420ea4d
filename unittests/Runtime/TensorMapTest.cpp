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
  k.indexing = KVIndexing::Ragged;
  k.block_cols = 1;
  return k;
}

ManifestArg kMap(int32_t boxRows = 128) {
  ManifestArg a;
  a.name = "k_map";
  a.kind = ArgKind::TensorMap;
  a.source = "k_cache";
  a.box_rows = boxRows;
  return a;
}

KVRowAddressing strided(int64_t token, int64_t head) {
  return {/*strided=*/true, token, head, /*pageStride=*/0, /*numPages=*/0};
}

KVRowAddressing pages(int64_t stride, int32_t count) {
  return {/*strided=*/false, 0, 0, stride, count};
}

TEST(TensorMap, DenseRaggedRowsAreNHD) {
  KVTensorMapDesc m;
  ASSERT_TRUE(describeKVTensorMap(tmaKernel(), kMap(), 0x10000, {}, &m).ok());
  EXPECT_FALSE(m.f16);
  EXPECT_EQ(m.address, 0x10000u);
  EXPECT_EQ(m.rank, 3u);
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

TEST(TensorMap, StridedRaggedRowsTakeTheCallsStrides) {
  KVTensorMapDesc m;
  // HND: heads are tokens x dim apart, tokens dim apart.
  ASSERT_TRUE(describeKVTensorMap(tmaKernel("f16", 64), kMap(256), 0x20000,
                                  strided(64, 1000 * 64), &m)
                  .ok());
  EXPECT_TRUE(m.f16);
  EXPECT_EQ(m.dims[0], 64u);
  EXPECT_EQ(m.strides[0], 1000u * 64 * 2);
  EXPECT_EQ(m.strides[1], 64u * 2);
  EXPECT_EQ(m.box[2], 256u);
  // A fused QKV projection's K slice: (32 + 8 + 8) heads x 128 a token.
  ASSERT_TRUE(describeKVTensorMap(tmaKernel(), kMap(), 0x20000,
                                  strided(48 * 128, 128), &m)
                  .ok());
  EXPECT_EQ(m.strides[1], 48u * 128 * 2);
}

TEST(TensorMap, PagesAreBoxesOfTheirLayout) {
  KernelManifest k = tmaKernel();
  k.indexing = KVIndexing::Paged;
  k.block_cols = 16;
  k.layout = KVLayout::NHD;
  KVTensorMapDesc m;
  // K and V interleaved page by page: two pages' worth between pages.
  const int64_t page = 16 * 8 * 128;
  ASSERT_TRUE(
      describeKVTensorMap(k, kMap(16), 0x40000, pages(2 * page, 1000), &m).ok());
  EXPECT_EQ(m.rank, 4u);
  EXPECT_EQ(m.dims[1], 8u);  // heads
  EXPECT_EQ(m.dims[2], 16u); // a page's rows
  EXPECT_EQ(m.dims[3], 1000u);
  EXPECT_EQ(m.strides[0], 128u * 2);
  EXPECT_EQ(m.strides[1], 8u * 128 * 2);
  EXPECT_EQ(m.strides[2], uint64_t(2 * page) * 2);
  EXPECT_EQ(m.box[1], 1u);
  EXPECT_EQ(m.box[2], 16u);
  EXPECT_EQ(m.box[3], 1u);
  // HND: a head's rows of a page are contiguous.
  k.layout = KVLayout::HND;
  ASSERT_TRUE(
      describeKVTensorMap(k, kMap(16), 0x40000, pages(page, 7), &m).ok());
  EXPECT_EQ(m.dims[1], 16u);
  EXPECT_EQ(m.dims[2], 8u);
  EXPECT_EQ(m.strides[1], 16u * 128 * 2);
  EXPECT_EQ(m.box[1], 16u);
  EXPECT_EQ(m.box[2], 1u);
  // An empty cache still makes a map (no box is ever issued into it).
  ASSERT_TRUE(describeKVTensorMap(k, kMap(16), 0x40000, pages(page, 0), &m).ok());
  EXPECT_EQ(m.dims[3], 1u);
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
           {0x10000, 1028, 128, "multiple of 8"},
           {0x10000, 1024, 0, "positive"},
           {0x10000, int64_t(1) << 40, 128, "2^40"}}) {
    Status s = describeKVTensorMap(tmaKernel(), kMap(), b.address,
                                   strided(b.tokenStride, b.headStride), &m);
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument) << b.needle;
    EXPECT_NE(s.message().find(b.needle), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("attn_prefill_tma"), std::string::npos);
    EXPECT_NE(s.message().find("k_map"), std::string::npos);
  }
  Status s = describeKVTensorMap(tmaKernel("f32"), kMap(), 0x10000, {}, &m);
  EXPECT_NE(s.message().find("bf16 and f16"), std::string::npos) << s.message();
  s = describeKVTensorMap(tmaKernel("bf16", 96), kMap(), 0x10000, {}, &m);
  EXPECT_NE(s.message().find("multiple of 64"), std::string::npos)
      << s.message();
  KernelManifest paged = tmaKernel();
  paged.indexing = KVIndexing::Paged;
  paged.block_cols = 16;
  s = describeKVTensorMap(paged, kMap(16), 0x10000, pages(1001, 10), &m);
  EXPECT_NE(s.message().find("page stride"), std::string::npos) << s.message();
}

} // namespace
