//===- ManifestTest.cpp - Kernel manifest parsing and validation ----------===//
//
// Part of attn, an MLIR-based attention compiler for LLM inference serving.
//
//===----------------------------------------------------------------------===//

#include "attn/Runtime/Launcher.h"
#include "attn/Runtime/Manifest.h"

#include <gtest/gtest.h>

using namespace attnrt;

namespace {

/// The example of docs/Manifest.md.
const char *kExample = R"json({
  "attn_manifest_version": 1,
  "compiler_version": "attn 0.1.0",
  "arch": "sm_90a",
  "kernels": [
    {
      "name": "attn_decode_q16_kv64_p4",
      "role": "attention",
      "threads": 128,
      "shared_bytes": 65536,
      "tile": {"q": 16, "kv": 64, "warps": 4, "stages": 2, "gqa_pack": 4},
      "format": {"block_rows": 1, "block_cols": 16, "layout": "NHD", "indexing": "paged"},
      "dtype": "bf16",
      "head_dim": 128, "num_qo_heads": 32, "num_kv_heads": 8,
      "cost": {"per_item": 256, "per_kv_token": 1},
      "variant_params": [{"name": "window_left", "type": "i32"}],
      "args": [
        {"name": "plan", "kind": "ptr"},
        {"name": "cta_indptr", "kind": "ptr"},
        {"name": "work_items", "kind": "ptr"},
        {"name": "partial_o", "kind": "ptr"},
        {"name": "partial_lse", "kind": "ptr"},
        {"name": "slot_rows", "kind": "i32"},
        {"name": "q", "kind": "ptr"},
        {"name": "k_cache", "kind": "ptr"},
        {"name": "v_cache", "kind": "ptr"},
        {"name": "o", "kind": "ptr"},
        {"name": "lse", "kind": "ptr"},
        {"name": "qo_indptr", "kind": "ptr"},
        {"name": "kv_indptr", "kind": "ptr"},
        {"name": "kv_indices", "kind": "ptr"},
        {"name": "kv_last_len", "kind": "ptr"},
        {"name": "sm_scale", "kind": "f32"},
        {"name": "window_left", "kind": "i32"}
      ]
    },
    {
      "name": "attn_merge_d128",
      "role": "merge",
      "threads": 128,
      "shared_bytes": 0,
      "dtype": "bf16",
      "head_dim": 128, "num_qo_heads": 32, "num_kv_heads": 8,
      "args": [
        {"name": "plan", "kind": "ptr"},
        {"name": "merge_indptr", "kind": "ptr"},
        {"name": "merge_units", "kind": "ptr"},
        {"name": "partial_o", "kind": "ptr"},
        {"name": "partial_lse", "kind": "ptr"},
        {"name": "slot_rows", "kind": "i32"},
        {"name": "o", "kind": "ptr"},
        {"name": "lse", "kind": "ptr"},
        {"name": "qo_indptr", "kind": "ptr"}
      ]
    }
  ]
})json";

std::string replace(std::string s, const std::string &from, const std::string &to) {
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    s.replace(at, from.size(), to);
  return s;
}

} // namespace

TEST(Manifest, ParsesTheDocumentedExample) {
  Manifest m;
  Status s = parseManifest(kExample, &m);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(m.version, 1);
  EXPECT_EQ(m.arch, "sm_90a");
  EXPECT_EQ(archComputeCapability(m.arch), 90);
  ASSERT_EQ(m.kernels.size(), 2u);
  const KernelManifest *a = m.find("attn_decode_q16_kv64_p4");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->role, KernelRole::Attention);
  EXPECT_EQ(a->threads, 128);
  EXPECT_EQ(a->shared_bytes, 65536);
  EXPECT_EQ(a->tile_q, 16);
  EXPECT_EQ(a->gqa_pack, 4);
  EXPECT_EQ(a->block_cols, 16);
  EXPECT_EQ(a->layout, KVLayout::NHD);
  EXPECT_EQ(a->indexing, KVIndexing::Paged);
  EXPECT_EQ(a->dtype, "bf16");
  EXPECT_EQ(a->cost_per_item, 256);
  EXPECT_EQ(a->args.size(), 17u);
  EXPECT_EQ(a->argIndex("sm_scale"), 15);
  EXPECT_EQ(a->args[15].kind, ArgKind::F32);
  ASSERT_EQ(a->variant_params.size(), 1u);
  EXPECT_EQ(a->variant_params[0].type, ArgKind::I32);
  TileCandidate t = a->candidate();
  EXPECT_EQ(t.q_rows, 16);
  EXPECT_EQ(t.kv_tile, 64);
  EXPECT_EQ(m.find("attn_merge_d128")->role, KernelRole::Merge);
  EXPECT_EQ(m.find("nope"), nullptr);
}

TEST(Manifest, KernelMatchesPlanConfig) {
  Manifest m;
  ASSERT_TRUE(parseManifest(kExample, &m).ok());
  PlanConfig c;
  c.num_qo_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.block_size = 16;
  c.num_candidates = 1;
  c.candidates[0] = m.kernels[0].candidate();
  EXPECT_TRUE(checkKernelMatchesPlan(m.kernels[0], c, 0).ok());
  c.head_dim = 64;
  Status s = checkKernelMatchesPlan(m.kernels[0], c, 0);
  EXPECT_EQ(s.code(), StatusCode::ManifestMismatch);
  EXPECT_NE(s.message().find("head_dim"), std::string::npos);
  c.head_dim = 128;
  c.block_size = 32;
  EXPECT_EQ(checkKernelMatchesPlan(m.kernels[0], c, 0).code(),
            StatusCode::ManifestMismatch);
  c.block_size = 16;
  c.candidates[0].q_rows = 64;
  EXPECT_EQ(checkKernelMatchesPlan(m.kernels[0], c, 0).code(),
            StatusCode::ManifestMismatch);
  EXPECT_EQ(checkKernelMatchesPlan(m.kernels[1], c, 0).code(),
            StatusCode::ManifestMismatch);
}

TEST(Manifest, RefusesBadManifestsWithAMessage) {
  struct Bad {
    std::string json;
    StatusCode code;
    const char *needle;
  };
  std::string ex = kExample;
  std::vector<Bad> cases = {
      {"{", StatusCode::ManifestParseError, "byte"},
      {"[]", StatusCode::ManifestParseError, "object"},
      {"{\"attn_manifest_version\": 1, \"arch\": \"sm_90\"}",
       StatusCode::ManifestParseError, "kernels"},
      {replace(ex, "\"attn_manifest_version\": 1", "\"attn_manifest_version\": 2"),
       StatusCode::ManifestMismatch, "version"},
      {replace(ex, "sm_90a", "gfx942"), StatusCode::ManifestParseError, "arch"},
      {replace(ex, "\"role\": \"merge\"", "\"role\": \"mystery\""),
       StatusCode::ManifestParseError, "role"},
      {replace(ex, "\"kind\": \"f32\"", "\"kind\": \"f16\""),
       StatusCode::ManifestParseError, "f16"},
      {replace(ex, "{\"name\": \"work_items\", \"kind\": \"ptr\"},", ""),
       StatusCode::ManifestParseError, "work_items"},
      // An attention kernel of plan ABI 2 (no plan: head-group copies unread).
      {replace(ex, "{\"name\": \"plan\", \"kind\": \"ptr\"},\n        {\"name\": \"cta_indptr\"",
               "{\"name\": \"cta_indptr\""),
       StatusCode::ManifestParseError, "must take argument \"plan\""},
      {replace(ex, "{\"name\": \"merge_units\", \"kind\": \"ptr\"},", ""),
       StatusCode::ManifestParseError, "merge_units"},
      {replace(ex, "\"threads\": 128,", ""), StatusCode::ManifestParseError,
       "threads"},
      {replace(ex, "\"gqa_pack\": 4}", "\"gqa_pack\": 3}"),
       StatusCode::ManifestParseError, "gqa_pack"},
      {replace(ex, "\"layout\": \"NHD\"", "\"layout\": \"XYZ\""),
       StatusCode::ManifestParseError, "layout"},
      {replace(ex, "{\"name\": \"o\", \"kind\": \"ptr\"},", "{\"name\": \"q\", \"kind\": \"ptr\"},"),
       StatusCode::ManifestParseError, "duplicate"},
      {replace(ex, "attn_merge_d128", "attn_decode_q16_kv64_p4"),
       StatusCode::ManifestParseError, "duplicate kernel"},
      {replace(ex, "\"threads\": 128,", "\"threads\": 12.5,"),
       StatusCode::ManifestParseError, "integer"},
      {std::string(200, '[') , StatusCode::ManifestParseError, "nesting"},
      // Names the driver could look up as another symbol (a NUL cuts the
      // C string short), or none at all (issue #15).
      {replace(ex, "\"attn_merge_d128\"", "\"attn_merge\\u0000evil\""),
       StatusCode::ManifestParseError, "NUL"},
      {replace(ex, "\"attn_merge_d128\"", "\"\""),
       StatusCode::ManifestParseError, "\"name\" must be"},
      {replace(ex, "\"attn_merge_d128\"", "\"attn merge\""),
       StatusCode::ManifestParseError, "kernels[1]"},
      {replace(ex, "{\"name\": \"sm_scale\"", "{\"name\": \"sm\\u0000scale\""),
       StatusCode::ManifestParseError, "args[15]"},
      {replace(ex, "\"block_cols\": 16", "\"block_cols\": 0"),
       StatusCode::ManifestParseError, "block_cols"},
      {replace(ex, "\"threads\": 128,", "\"threads\": 1e999,"),
       StatusCode::ManifestParseError, "integer"},
      {replace(ex, "\"threads\": 128,", "\"threads\": -2147483649,"),
       StatusCode::ManifestParseError, "integer"},
      {replace(ex, "\"per_item\": 256", "\"per_item\": 4294967296"),
       StatusCode::ManifestParseError, "integer"},
  };
  for (const Bad &b : cases) {
    Manifest m;
    Status s = parseManifest(b.json, &m);
    EXPECT_EQ(s.code(), b.code) << s.message();
    EXPECT_NE(s.message().find(b.needle), std::string::npos)
        << "message: " << s.message() << " lacks " << b.needle;
  }
}

TEST(Manifest, JsonEscapesAndNumbers) {
  std::string ex = kExample;
  ex = replace(ex, "\"attn 0.1.0\"", "\"attn \\u00e9 \\\"q\\\" \\n\"");
  Manifest m;
  ASSERT_TRUE(parseManifest(ex, &m).ok());
  EXPECT_EQ(m.compiler_version, "attn \xc3\xa9 \"q\" \n");
}

TEST(Manifest, MergeLaunchShapeAndPDL) {
  std::string ex = kExample;
  // Without the fields (older manifests): one CTA per unit, plain launch.
  Manifest m;
  ASSERT_TRUE(parseManifest(ex, &m).ok());
  const KernelManifest *k = m.find("attn_merge_d128");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->merge_grid, MergeGrid::Units);
  EXPECT_FALSE(k->pdl);
  std::string rows = replace(ex, "\"role\": \"merge\",",
                             "\"role\": \"merge\", \"merge_ctas\": \"unit_rows\", \"pdl\": 1,");
  ASSERT_TRUE(parseManifest(rows, &m).ok());
  k = m.find("attn_merge_d128");
  EXPECT_EQ(k->merge_grid, MergeGrid::UnitRows);
  EXPECT_TRUE(k->pdl);
  Status s = parseManifest(
      replace(rows, "\"unit_rows\"", "\"rows\""), &m);
  EXPECT_EQ(s.code(), StatusCode::ManifestParseError);
  EXPECT_NE(s.message().find("merge_ctas"), std::string::npos) << s.message();
  s = parseManifest(replace(rows, "\"pdl\": 1", "\"pdl\": 2"), &m);
  EXPECT_EQ(s.code(), StatusCode::ManifestParseError);
  EXPECT_NE(s.message().find("pdl"), std::string::npos) << s.message();
  // Rows per CTA: 1 unless given (a prefill merge gives each part a row).
  EXPECT_EQ(k->merge_rows_per_cta, 1);
  std::string tall = replace(rows, "\"pdl\": 1,", "\"pdl\": 1, \"merge_rows_per_cta\": 16,");
  ASSERT_TRUE(parseManifest(tall, &m).ok());
  EXPECT_EQ(m.find("attn_merge_d128")->merge_rows_per_cta, 16);
  s = parseManifest(replace(tall, "\"merge_rows_per_cta\": 16", "\"merge_rows_per_cta\": 0"), &m);
  EXPECT_EQ(s.code(), StatusCode::ManifestParseError);
  EXPECT_NE(s.message().find("merge_rows_per_cta"), std::string::npos) << s.message();
}

namespace {
/// kExample's attention kernel loading K/V by TMA: tile kv_tma and the two
/// tensor maps, each naming the buffer it describes.
std::string withTensorMaps(const std::string &kMapSource) {
  std::string s = replace(kExample, "\"gqa_pack\": 4}",
                          "\"gqa_pack\": 4, \"kv_tma\": true}");
  return replace(s, "{\"name\": \"sm_scale\", \"kind\": \"f32\"},",
                 "{\"name\": \"k_map\", \"kind\": \"tensormap\", \"source\": \"" +
                     kMapSource +
                     "\", \"box_rows\": 16},\n{\"name\": \"v_map\", \"kind\": "
                     "\"tensormap\", \"source\": \"v_cache\", \"box_rows\": 16},\n"
                     "{\"name\": \"sm_scale\", \"kind\": \"f32\"},");
}
} // namespace

TEST(Manifest, TensorMapsNameTheBufferTheyDescribe) {
  Manifest m;
  ASSERT_TRUE(parseManifest(withTensorMaps("k_cache"), &m).ok());
  const KernelManifest &k = m.kernels[0];
  EXPECT_TRUE(k.kv_tma);
  int32_t i = k.argIndex("k_map");
  ASSERT_GE(i, 0);
  EXPECT_EQ(k.args[i].kind, ArgKind::TensorMap);
  EXPECT_EQ(k.args[i].source, "k_cache");
  EXPECT_EQ(k.args[i].box_rows, 16);
  EXPECT_STREQ(argKindName(ArgKind::TensorMap), "tensormap");
  EXPECT_FALSE(m.kernels[1].kv_tma);

  // The source must be a pointer argument of the same kernel.
  for (const char *bad : {"sm_scale", "nothing"}) {
    Status s = parseManifest(withTensorMaps(bad), &m);
    EXPECT_EQ(s.code(), StatusCode::ManifestParseError) << bad;
    EXPECT_NE(s.message().find("not a ptr argument"), std::string::npos)
        << s.message();
  }
  Status s = parseManifest(
      replace(withTensorMaps("k_cache"), "\"source\": \"v_cache\"", "\"from\": 1"),
      &m);
  EXPECT_NE(s.message().find("source"), std::string::npos) << s.message();
  s = parseManifest(replace(withTensorMaps("k_cache"), "\"box_rows\": 16}", "\"box_rows\": 12}"),
                    &m);
  EXPECT_NE(s.message().find("multiple of 8"), std::string::npos) << s.message();
  // A variant parameter is never a tensor map; kv_tma is a boolean.
  s = parseManifest(replace(kExample, "\"type\": \"i32\"", "\"type\": \"tensormap\""),
                    &m);
  EXPECT_NE(s.message().find("ptr, i32, i64 or f32"), std::string::npos)
      << s.message();
  s = parseManifest(replace(kExample, "\"gqa_pack\": 4}",
                            "\"gqa_pack\": 4, \"kv_tma\": 1}"),
                    &m);
  EXPECT_NE(s.message().find("kv_tma"), std::string::npos) << s.message();
}
