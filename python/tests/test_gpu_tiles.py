"""GPU: the planner picks the query tile per batch, decode with several query
tokens per request, and the shapes the compiler's kernels are general in
(head dims that are multiples of 16 but not of 64, page sizes that are not
powers of two), each against the float32 reference.

On a runtime-only build the kernels come from ATTN_CACHE_DIR
(bench/harness/precompile.sh compiles them).
"""

import math

import pytest

import attn
from attn import core
from gpu_reference import attention, indptr_of, paged_batch

pytestmark = pytest.mark.gpu

HQ, HKV = 32, 8


def workspace(torch):
    return torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def paged_prefill(torch, qo_lens, kv_lens, *, d=128, page=16, seed=0):
    """Runs the paged prefill wrapper (causal) and returns (out, reference, wrapper)."""
    gen = torch.Generator().manual_seed(seed)
    kv, kv_indptr, indices, last, k_tok, v_tok = paged_batch(torch, kv_lens, page, HKV, d, torch.bfloat16, gen)
    q = torch.randn(sum(qo_lens), HQ, d, generator=gen).to(torch.bfloat16).cuda()
    w = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(torch))
    w.plan(indptr_of(torch, qo_lens), kv_indptr, indices.cuda(), last, HQ, HKV, d, page, causal=True,
           q_data_type=torch.bfloat16)
    out = w.run(q, kv.cuda())
    ref, _ = attention(q, k_tok.cuda(), v_tok.cuda(), qo_lens, kv_lens, causal=True)
    return out, ref, w


def ragged_qkv(torch, gen, qo_lens, kv_lens, d):
    """q, k, v of ragged requests (bf16, on the GPU), drawn from ``gen``."""
    q = torch.randn(sum(qo_lens), HQ, d, generator=gen).to(torch.bfloat16).cuda()
    k = torch.randn(sum(kv_lens), HKV, d, generator=gen).to(torch.bfloat16).cuda()
    v = torch.randn(sum(kv_lens), HKV, d, generator=gen).to(torch.bfloat16).cuda()
    return q, k, v


def picked_tile(w):
    p = w._planned
    return core.kernel_info(p.spec, w._device).candidates[p.summary["candidate"]]["q_rows"]


@pytest.mark.parametrize("qo_len,batch,tile", [(1, 64, 16), (4, 64, 16), (8, 64, 64), (32, 16, 128),
                                               (700, 2, 128)])
def test_the_tile_follows_the_average_packed_query_length(qo_len, batch, tile):
    """GQA group 4: 1 or 4 tokens per request pack into 4 or 16 rows (q 16),
    8 into 32 (q 64), 32 or more into 128 or more (q 128)."""
    import torch
    out, ref, w = paged_prefill(torch, [qo_len] * batch, [qo_len + 300] * batch, seed=qo_len)
    assert picked_tile(w) == tile
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


def test_one_wrapper_switches_tiles_between_plans():
    import torch
    gen = torch.Generator().manual_seed(5)
    d, page = 128, 16
    w = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(torch))
    for qo_lens, kv_lens, tile in (([2] * 32, [600] * 32, 16), ([300, 5], [300, 900], 128), ([9] * 8, [100] * 8, 64)):
        kv, kv_indptr, indices, last, k_tok, v_tok = paged_batch(torch, kv_lens, page, HKV, d, torch.bfloat16, gen)
        q = torch.randn(sum(qo_lens), HQ, d, generator=gen).to(torch.bfloat16).cuda()
        w.plan(indptr_of(torch, qo_lens), kv_indptr, indices.cuda(), last, HQ, HKV, d, page, causal=True,
               q_data_type=torch.bfloat16)
        assert picked_tile(w) == tile
        ref, _ = attention(q, k_tok.cuda(), v_tok.cuda(), qo_lens, kv_lens, causal=True)
        torch.testing.assert_close(w.run(q, kv.cuda()).float(), ref, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("k", [2, 4, 8])
def test_decode_with_several_query_tokens_per_request(k):
    import torch
    gen = torch.Generator().manual_seed(k)
    d, page = 128, 16
    kv_lens = [k, 37, 2048, 515, 16 * 9]
    kv, kv_indptr, indices, last, k_tok, v_tok = paged_batch(torch, kv_lens, page, HKV, d, torch.bfloat16, gen)
    q = torch.randn(len(kv_lens) * k, HQ, d, generator=gen).to(torch.bfloat16).cuda()
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(torch))
    w.plan(kv_indptr, indices.cuda(), last, HQ, HKV, d, page, q_data_type=torch.bfloat16, q_len_per_req=k)
    o, lse = w.run(q, kv.cuda(), return_lse=True, q_len_per_req=k)
    ro, rl = attention(q, k_tok.cuda(), v_tok.cuda(), [k] * len(kv_lens), kv_lens, causal=True)
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, rl, atol=1e-2, rtol=1e-3)
    assert picked_tile(w) == (16 if k * HQ // HKV <= 16 else 64)
    with pytest.raises(ValueError, match=r"run\(q_len_per_req=1\) differs from plan's"):
        w.run(q, kv.cuda(), q_len_per_req=1)


def test_decode_q_len_per_req_needs_enough_keys():
    import torch
    gen = torch.Generator().manual_seed(9)
    kv, kv_indptr, indices, last, _, _ = paged_batch(torch, [10, 3], 16, HKV, 128, torch.bfloat16, gen)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(torch))
    with pytest.raises(ValueError, match=r"request 1 has 3 keys, fewer than q_len_per_req \(4\)"):
        w.plan(kv_indptr, indices.cuda(), last, HQ, HKV, 128, 16, q_data_type=torch.bfloat16, q_len_per_req=4)
    with pytest.raises(ValueError, match="q_len_per_req must be a positive int"):
        w.plan(kv_indptr, indices.cuda(), last, HQ, HKV, 128, 16, q_data_type=torch.bfloat16, q_len_per_req=0)


# Head dims of real models that are not multiples of 64 (Phi-3: 96), page
# sizes that are not powers of two.
@pytest.mark.parametrize("d,page", [(64, 16), (80, 16), (96, 16), (128, 3), (128, 48), (128, 544)])
def test_decode_general_shapes(d, page):
    import torch
    gen = torch.Generator().manual_seed(d + page)
    kv_lens = [1, 100, 1500, 3 * page + 1, 700]
    kv, kv_indptr, indices, last, k_tok, v_tok = paged_batch(torch, kv_lens, page, HKV, d, torch.bfloat16, gen)
    q = torch.randn(len(kv_lens), HQ, d, generator=gen).to(torch.bfloat16).cuda()
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(torch))
    w.plan(kv_indptr, indices.cuda(), last, HQ, HKV, d, page, q_data_type=torch.bfloat16)
    o, lse = w.run(q, kv.cuda(), return_lse=True)
    ro, rl = attention(q, k_tok.cuda(), v_tok.cuda(), [1] * len(kv_lens), kv_lens)
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, rl, atol=1e-2, rtol=1e-3)


# Head dim 256 (its two-stage 80-key tile): pages of 1 and 16 tokens, items
# of one K/V tile and of many.
@pytest.mark.parametrize("d,page", [(64, 16), (80, 16), (96, 16), (128, 3), (128, 48), (128, 544),
                                    (256, 1), (256, 16)])
@pytest.mark.parametrize("qo_lens,kv_lens", [([8] * 6, [300, 8, 1000, 77, 64, 2000]),
                                              ([512, 3, 130], [1024, 600, 130])])
def test_prefill_general_shapes(d, page, qo_lens, kv_lens):
    import torch
    out, ref, _ = paged_prefill(torch, qo_lens, kv_lens, d=d, page=page, seed=d * page)
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("d", [64, 80, 96, 256])
def test_ragged_prefill_general_head_dims(d):
    import torch
    gen = torch.Generator().manual_seed(d)
    lens = [1, 300, 17, 640]
    q, k, v = ragged_qkv(torch, gen, lens, lens, d)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(torch))
    w.plan(indptr_of(torch, lens), indptr_of(torch, lens), HQ, HKV, d, causal=True, q_data_type=torch.bfloat16)
    ro, _ = attention(q, k, v, lens, lens, causal=True, sm_scale=1 / math.sqrt(d))
    torch.testing.assert_close(w.run(q, k, v).float(), ro, atol=2e-2, rtol=2e-2)


def test_ragged_prefill_head_dim_64_rows_without_keys():
    """Head dim 64's tallest tile (192 rows of three computing warpgroups on
    sm_90a, 128 on mma.sync): the LSE (the row sums) against the reference,
    and rows that see no key (causal, qo_len > kv_len) exactly 0 with LSE
    -inf."""
    import torch
    gen = torch.Generator().manual_seed(64)
    qo_lens, kv_lens, d = [300, 40, 5], [200, 40, 900], 64
    q, k, v = ragged_qkv(torch, gen, qo_lens, kv_lens, d)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(torch))
    w.plan(indptr_of(torch, qo_lens), indptr_of(torch, kv_lens), HQ, HKV, d, causal=True,
           q_data_type=torch.bfloat16)
    assert picked_tile(w) == (192 if core.device_arch(w._device) == "sm_90a" else 128)
    o, lse = w.run(q, k, v, return_lse=True)
    ro, rl = attention(q, k, v, qo_lens, kv_lens, causal=True, sm_scale=1 / math.sqrt(d))
    empty = qo_lens[0] - kv_lens[0]  # rows 0..99 of request 0 sit before key 0
    assert torch.all(o[:empty] == 0)
    assert torch.all(lse[:empty] == float("-inf"))
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse[empty:], rl[empty:], atol=1e-2, rtol=1e-3)


def test_ragged_prefill_head_dim_256_without_mask():
    """Every key of every tile visible (no causal tiles skipped), over
    requests of 1 to 17 K/V tiles of 80 keys."""
    import torch
    gen = torch.Generator().manual_seed(256)
    qo_lens, kv_lens = [1, 200, 33, 130], [80, 1360, 33, 700]
    d = 256
    q, k, v = ragged_qkv(torch, gen, qo_lens, kv_lens, d)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(torch))
    w.plan(indptr_of(torch, qo_lens), indptr_of(torch, kv_lens), HQ, HKV, d, causal=False,
           q_data_type=torch.bfloat16)
    o, lse = w.run(q, k, v, return_lse=True)
    ro, rl = attention(q, k, v, qo_lens, kv_lens, sm_scale=1 / math.sqrt(d))
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, rl, atol=1e-2, rtol=1e-3)
