"""GPU: attention sinks (@sinks, a per-head logit in the softmax denominator) in prefill and decode.

The prefill kernel takes the sinks table as a pointer argument, as decode
does (the kernel signature's variant parameters, attn-outline-kernels). Checked against the float32 reference of
gpu_reference.py (docs/Semantics.md): single prefill, ragged and paged
batches, a long request the planner splits (the sink joins once, on the first
chunk), rows that see no key (output 0, LSE = sink / ln 2), and decode.
Outputs are poisoned with NaN first.

Skipped without torch, CUDA or a GPU. On a runtime-only build the kernels
come from ATTN_CACHE_DIR (python -m attn.precompile --heads 32/8 --head-dim 128
--kinds decode,prefill,ragged --sinks).
"""

import math

import pytest

import attn
from gpu_reference import attention, indptr_of, paged_batch, rel_err

pytestmark = pytest.mark.gpu

HQ, HKV, D = 32, 8, 128


def make_sinks(torch, seed):
    """Per-head sinks that matter: comparable to a row's logsumexp (scaled-logit units)."""
    gen = torch.Generator().manual_seed(seed)
    return (4.0 + 3.0 * torch.randn(HQ, generator=gen)).float().cuda()


def qkv(torch, rows, tokens, seed):
    gen = torch.Generator().manual_seed(seed)
    dt = torch.bfloat16
    return (torch.randn(rows, HQ, D, generator=gen).to(dt).cuda(),
            torch.randn(tokens, HKV, D, generator=gen).to(dt).cuda(),
            torch.randn(tokens, HKV, D, generator=gen).to(dt).cuda())


def check(o, lse, ro, rl):
    import torch
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, rl, atol=1e-2, rtol=1e-3)


@pytest.mark.parametrize("qo_len,kv_len", [(300, 300), (64, 3000), (40, 20)],
                         ids=["square", "long_kv", "qo_longer_than_kv"])
def test_single_prefill_sinks(qo_len, kv_len):
    import torch
    q, k, v = qkv(torch, qo_len, kv_len, seed=qo_len + kv_len)
    sinks = make_sinks(torch, 1)
    o, lse = attn.single_prefill_with_kv_cache(q, k, v, causal=True, sinks=sinks, return_lse=True)
    ro, rl = attention(q, k, v, [qo_len], [kv_len], causal=True, sinks=sinks)
    check(o, lse, ro, rl)
    # The sinks really are in: without them the answer differs.
    plain, _ = attention(q, k, v, [qo_len], [kv_len], causal=True)
    assert rel_err(plain, ro) > 0.05


def test_ragged_prefill_sinks():
    import torch
    lens = [300, 1, 777, 64]
    q, k, v = qkv(torch, sum(lens), sum(lens), seed=31)
    sinks = make_sinks(torch, 2)
    indptr = indptr_of(torch, lens)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    w.plan(indptr, indptr, HQ, HKV, D, causal=True, q_data_type=torch.bfloat16, sinks=sinks)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((q.shape[0], HQ), float("nan"), device="cuda")
    o, l = w.run(q, k, v, out=out, lse=lse, return_lse=True)
    ro, rl = attention(q, k, v, lens, lens, causal=True, sinks=sinks)
    check(o, l, ro, rl)


@pytest.mark.parametrize("cache_form", ["combined", "tuple"])
def test_paged_prefill_sinks(cache_form):
    """Appends over cached tokens, one long enough to be split into chunks."""
    import torch
    gen = torch.Generator().manual_seed(32)
    qo_lens, kv_lens = [5, 64, 1, 200, 16], [40, 64, 900, 333, 6000]
    kv, kv_indptr, kv_indices, last, k_tok, v_tok = paged_batch(torch, kv_lens, 16, HKV, D, torch.bfloat16, gen)
    kv = kv.cuda()
    q = torch.randn(sum(qo_lens), HQ, D, generator=gen).to(torch.bfloat16).cuda()
    sinks = make_sinks(torch, 3)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"), "NHD")
    w.plan(indptr_of(torch, qo_lens), kv_indptr, kv_indices.cuda(), last, HQ, HKV, D, 16, causal=True,
           q_data_type=torch.bfloat16, sinks=sinks)
    cache = kv if cache_form == "combined" else (kv[:, 0].contiguous(), kv[:, 1].contiguous())
    out = torch.full_like(q, float("nan"))
    lse = torch.full((q.shape[0], HQ), float("nan"), device="cuda")
    o, l = w.run(q, cache, out=out, lse=lse, return_lse=True)
    ro, rl = attention(q, k_tok.cuda(), v_tok.cuda(), qo_lens, kv_lens, causal=True, sinks=sinks)
    check(o, l, ro, rl)


def test_paged_prefill_sinks_rows_without_keys():
    """Causal with qo_len > kv_len: the leading rows see no key; output 0, LSE = sink * log2(e)."""
    import torch
    gen = torch.Generator().manual_seed(33)
    qo_lens, kv_lens = [30, 7], [10, 100]
    kv, kv_indptr, kv_indices, last, k_tok, v_tok = paged_batch(torch, kv_lens, 16, HKV, D, torch.bfloat16, gen)
    q = torch.randn(sum(qo_lens), HQ, D, generator=gen).to(torch.bfloat16).cuda()
    sinks = make_sinks(torch, 4)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    w.plan(indptr_of(torch, qo_lens), kv_indptr, kv_indices.cuda(), last, HQ, HKV, D, 16, causal=True,
           q_data_type=torch.bfloat16, sinks=sinks)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((q.shape[0], HQ), float("nan"), device="cuda")
    o, l = w.run(q, kv.cuda(), out=out, lse=lse, return_lse=True)
    ro, rl = attention(q, k_tok.cuda(), v_tok.cuda(), qo_lens, kv_lens, causal=True, sinks=sinks)
    check(o, l, ro, rl)
    empty = 30 - 10  # rows 0..19 of request 0 sit before key 0
    assert torch.all(o[:empty] == 0)
    torch.testing.assert_close(l[:empty], (sinks / math.log(2)).expand(empty, HQ), atol=1e-4, rtol=1e-5)


def test_decode_sinks():
    """Decode with sinks, lengths long enough that the planner splits KV (the sink joins once)."""
    import torch
    gen = torch.Generator().manual_seed(34)
    kv_lens = [3000, 17, 1, 1200, 2500, 64, 700]
    kv, kv_indptr, kv_indices, last, k_tok, v_tok = paged_batch(torch, kv_lens, 16, HKV, D, torch.bfloat16, gen)
    q = torch.randn(len(kv_lens), HQ, D, generator=gen).to(torch.bfloat16).cuda()
    sinks = make_sinks(torch, 5)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"), "NHD")
    w.plan(kv_indptr, kv_indices.cuda(), last, HQ, HKV, D, 16, q_data_type=torch.bfloat16, sinks=sinks)
    out = torch.full_like(q, float("nan"))
    o, l = w.run(q, kv.cuda(), out=out, return_lse=True)
    ro, rl = attention(q, k_tok.cuda(), v_tok.cuda(), [1] * len(kv_lens), kv_lens, sinks=sinks)
    check(o, l, ro, rl)


def test_sinks_of_the_wrong_shape_are_refused():
    import torch
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(16 << 20, dtype=torch.uint8, device="cuda"))
    indptr = torch.tensor([0, 4], dtype=torch.int32)
    with pytest.raises(ValueError, match="sinks: expected shape"):
        w.plan(indptr, indptr, HQ, HKV, D, causal=True, q_data_type=torch.bfloat16,
               sinks=torch.zeros(HQ - 1, device="cuda"))
    with pytest.raises(TypeError, match="sinks: expected dtype f32"):
        w.plan(indptr, indptr, HQ, HKV, D, causal=True, q_data_type=torch.bfloat16,
               sinks=torch.zeros(HQ, dtype=torch.bfloat16, device="cuda"))
