/*===- compile_c.c - the compiler's and the runtime's C APIs together -----===*\
|*                                                                            *|
|* Links attn::CAPI (libattn_compiler.so) and attn::Runtime: describes a      *|
|* decode attention, asks the compiler for the kernels' manifest (their       *|
|* launch contracts, no code) and hands it to the runtime, which reads the    *|
|* tile candidates a planner picks from. No GPU or ptxas needed.              *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "attn-c/Compiler.h"
#include "attn-c/Runtime.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  attnCompilerAttentionDesc desc;
  memset(&desc, 0, sizeof(desc));
  desc.head_dim = 128;
  desc.num_qo_heads = 32;
  desc.num_kv_heads = 8;
  desc.page_size = 16;
  desc.query_rows = 1;
  desc.dtype = "bf16";
  desc.layout = "NHD";
  desc.variants = "causal";

  attnCompilerOptions options;
  attnCompilerOptionsInit(&options);
  options.chip = "sm_90";
  options.manifest_only = 1;

  attnCompilerResult_t result = NULL;
  attnCompilerStatus status = attnCompilerCompileAttention(&desc, &options, &result);
  if (status != ATTN_COMPILER_OK) {
    fprintf(stderr, "compile-c: %s\n%s\n", attnCompilerStatusName(status),
            result ? attnCompilerResultDiagnostics(result) : "");
    attnCompilerResultDestroy(result);
    return 1;
  }
  const char *manifest = attnCompilerResultManifest(result);
  printf("compile-c: %s, %zu bytes of manifest\n", attnCompilerVersion(),
         strlen(manifest));

  attnRtTileCandidate candidates[ATTN_RT_MAX_TILE_CANDIDATES];
  int32_t count = 0;
  attnRtStatus rt = attnRtManifestCandidates(manifest, candidates,
                                             ATTN_RT_MAX_TILE_CANDIDATES, &count);
  int ok = rt == ATTN_RT_OK && count == 1 && candidates[0].q_rows > 0 &&
           candidates[0].gqa_pack >= 1;
  if (!ok)
    fprintf(stderr, "compile-c: FAILED reading the manifest's candidates: %s (%s), %d\n",
            attnRtStatusName(rt), attnRtLastError(), count);
  else
    printf("compile-c: candidate q_rows=%d kv_tile=%d gqa_pack=%d\n",
           candidates[0].q_rows, candidates[0].kv_tile, candidates[0].gqa_pack);
  attnCompilerResultDestroy(result);
  if (!ok)
    return 1;
  printf("compile-c: OK\n");
  return 0;
}
