"""GPU: scores whose row maxima move along the keys, against the float32 reference.

The pipelined loop's kernels (head dim 128's three-stage tile) move a warp's
running max only when a row's max grew by more than a slack (2^8 in the
probabilities; movesRowMaxLazily, lib/Conversion/AttnToGPU/MMASync/TileMath.cpp)
and skip the accumulator's rescale otherwise; the others (head dims 64 and
256, decode) rescale at every tile. These tests give
every query a score that ramps with the key's position (dimension 0 of q is
constant, of k the key's position times ``slope``): steep ramps move the max
by more than the slack at every tile, gentle ones by less (the max moves
every few tiles, probabilities up to 2^8 in between), falling ones never after
the first tile. Random keys elsewhere leave every case its own order.

On a runtime-only build the kernels come from ATTN_CACHE_DIR
(bench/harness/precompile.sh compiles them).
"""

import math

import pytest

import attn
from gpu_reference import attention, indptr_of, paged_batch

pytestmark = pytest.mark.gpu

HQ, HKV = 32, 8
# Score growth per key, in log2 units, is 4 * slope * sm_scale * log2(e):
# at head dim 128 steep 0.26 (33 per 128-key tile), gentle 0.026 (3.3), falling -0.26.
SLOPES = {"steep": 0.5, "gentle": 0.05, "falling": -0.5}


def workspace(torch):
    return torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def ramp(torch, x, lens, slope):
    """x [tokens, H, D] with dimension 0 of request b's token j set to slope * j."""
    pos = torch.cat([torch.arange(n, dtype=torch.float32) for n in lens])
    x = x.clone()
    x[:, :, 0] = (slope * pos)[:, None].to(x.dtype)
    return x


@pytest.mark.parametrize("slope", list(SLOPES))
@pytest.mark.parametrize("d,causal", [(128, True), (128, False), (64, True), (256, True)])
def test_ragged_prefill_scores_ramping_along_the_keys(slope, d, causal):
    import torch
    gen = torch.Generator().manual_seed(d + 7 * causal)
    qo_lens, kv_lens = [300, 1, 1000, 129], [300, 700, 1000, 129]
    q = torch.randn(sum(qo_lens), HQ, d, generator=gen)
    q[:, :, 0] = 4.0
    k = ramp(torch, torch.randn(sum(kv_lens), HKV, d, generator=gen), kv_lens, SLOPES[slope])
    v = torch.randn(sum(kv_lens), HKV, d, generator=gen)
    q, k, v = (t.to(torch.bfloat16).cuda() for t in (q, k, v))
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(torch))
    w.plan(indptr_of(torch, qo_lens), indptr_of(torch, kv_lens), HQ, HKV, d, causal=causal,
           q_data_type=torch.bfloat16)
    o, lse = w.run(q, k, v, return_lse=True)
    ro, rl = attention(q, k, v, qo_lens, kv_lens, causal=causal, sm_scale=1 / math.sqrt(d))
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, rl, atol=1e-2, rtol=1e-3)


@pytest.mark.parametrize("slope", list(SLOPES))
def test_decode_scores_ramping_along_the_keys(slope):
    """Long requests, which the planner splits: each chunk's partial max and
    sum, merged by LSE, under the same ramps."""
    import torch
    gen = torch.Generator().manual_seed(5)
    d, page, kv_lens = 128, 16, [5000, 37, 12000, 900]
    kv, kv_indptr, indices, last, _, _ = paged_batch(torch, kv_lens, page, HKV, d, torch.float32, gen)
    for b, n in enumerate(kv_lens):  # key j of request b: dimension 0 = slope * j
        pages = indices[kv_indptr[b]:kv_indptr[b + 1]].long()
        pos = torch.arange(len(pages) * page, dtype=torch.float32).reshape(len(pages), page)
        kv[pages, 0, :, :, 0] = (SLOPES[slope] * pos)[:, :, None]
    kv = kv.to(torch.bfloat16)
    k_tok, v_tok = (torch.cat([kv[indices[kv_indptr[b]:kv_indptr[b + 1]].long(), side].reshape(-1, HKV, d)[:n]
                               for b, n in enumerate(kv_lens)]) for side in (0, 1))
    q = torch.randn(len(kv_lens), HQ, d, generator=gen)
    q[:, :, 0] = 4.0
    q = q.to(torch.bfloat16).cuda()
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(torch), "NHD")
    w.plan(kv_indptr, indices.cuda(), last, HQ, HKV, d, page, q_data_type=torch.bfloat16)
    o, lse = w.run(q, kv.cuda(), return_lse=True)
    ro, rl = attention(q, k_tok.cuda(), v_tok.cuda(), [1] * len(kv_lens), kv_lens, sm_scale=1 / math.sqrt(d))
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, rl, atol=1e-2, rtol=1e-3)
