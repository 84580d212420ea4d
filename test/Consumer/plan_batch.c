/*===- plan_batch.c - the runtime's C API from an installed attn ----------===*\
|*                                                                            *|
|* Links attn::Runtime (libattn_runtime.so) and nothing else: sizes the       *|
|* workspaces of a decode configuration, plans a batch of three requests and  *|
|* checks the summary, then checks that a bad batch is refused with its code  *|
|* and a message. No GPU needed.                                              *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "attn-c/Runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define EXPECT(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "plan-batch: FAILED %s (line %d): %s\n", #cond,          \
              __LINE__, attnRtLastError());                                    \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

int main(void) {
  /* Llama-3-8B-like decode: 32 query heads over 8 KV heads, d128, pages of 16. */
  attnRtPlanConfig config;
  memset(&config, 0, sizeof(config));
  config.num_qo_heads = 32;
  config.num_kv_heads = 8;
  config.head_dim = 128;
  config.indexing = ATTN_RT_KV_PAGED;
  config.block_size = 16;
  config.window_left = -1;
  config.num_sms = 132;
  config.ctas_per_sm = 1;
  config.max_batch = 8;
  config.max_total_q_rows = 8;
  config.num_candidates = 1;
  attnRtTileCandidate tile = {16, 64, 4, 32, 1, 0, 0};
  config.candidates[0] = tile;

  size_t host_bytes = 0, device_bytes = 0;
  EXPECT(attnRtPlanWorkspaceSize(&config, &host_bytes, &device_bytes) == ATTN_RT_OK);
  EXPECT(host_bytes > 0 && device_bytes > host_bytes);

  /* Three requests, one query row each, of 4, 100 and 2000 pages. */
  int32_t qo_indptr[] = {0, 1, 2, 3};
  int32_t kv_indptr[] = {0, 4, 104, 2104};
  int32_t kv_last_len[] = {5, 16, 1};
  attnRtPlanInputs inputs;
  memset(&inputs, 0, sizeof(inputs));
  inputs.batch = 3;
  inputs.qo_indptr = qo_indptr;
  inputs.kv_indptr = kv_indptr;
  inputs.kv_last_len = kv_last_len;

  int32_t *workspace = (int32_t *)calloc(host_bytes / 4 + 1, 4);
  attnRtPlanSummary summary;
  memset(&summary, 0, sizeof(summary));
  EXPECT(attnRtPlan(&config, &inputs, workspace, host_bytes, &summary) == ATTN_RT_OK);
  EXPECT(summary.tile_q == 16);
  EXPECT(summary.gqa_pack == 4);
  EXPECT(summary.num_items >= inputs.batch);
  EXPECT(summary.num_ctas >= 1 && summary.num_ctas <= config.num_sms);
  EXPECT(summary.num_merge_units > 0); /* the 2000-page request is split */
  EXPECT(summary.plan_bytes > 0 && summary.plan_bytes <= host_bytes);
  EXPECT(strcmp(attnRtLastError(), "") == 0);
  printf("plan-batch: %d items on %d CTAs, %d merge units, %zu plan bytes\n",
         summary.num_items, summary.num_ctas, summary.num_merge_units,
         summary.plan_bytes);

  EXPECT(attnRtSelectTileCandidate(config.candidates, 1, 3, 3) == 0);

  /* A decreasing qo_indptr is refused with its code and a message naming it. */
  qo_indptr[2] = 0;
  EXPECT(attnRtPlan(&config, &inputs, workspace, host_bytes, NULL) ==
         ATTN_RT_NON_MONOTONE_INDPTR);
  EXPECT(strstr(attnRtLastError(), "qo_indptr") != NULL);
  EXPECT(strcmp(attnRtStatusName(ATTN_RT_NON_MONOTONE_INDPTR), "NonMonotoneIndptr") == 0);

  free(workspace);
  if (failures) {
    fprintf(stderr, "plan-batch: %d check(s) failed\n", failures);
    return 1;
  }
  printf("plan-batch: OK\n");
  return 0;
}
