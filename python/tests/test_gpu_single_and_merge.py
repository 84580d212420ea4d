"""GPU: the single-request functions, append_paged_kv_cache and the merge
functions against PyTorch. Skipped without torch/GPU."""

import math

import pytest

import attn

pytestmark = pytest.mark.gpu

HQ, HKV, D = 32, 8, 128


def attention(q, k, v, causal):
    """float32 attention, q [n, HQ, D], k/v [m, HKV, D]; (out, base-2 lse)."""
    import torch
    g = q.shape[1] // k.shape[1]
    kf, vf = k.float().repeat_interleave(g, 1), v.float().repeat_interleave(g, 1)
    s = torch.einsum("qhd,khd->hqk", q.float(), kf) / math.sqrt(D)
    if causal:
        n, m = q.shape[0], k.shape[0]
        pos = m - n + torch.arange(n, device=q.device)
        s = s.masked_fill(torch.arange(m, device=q.device)[None, :] > pos[:, None], float("-inf"))
    return (torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), vf),
            (torch.logsumexp(s, -1) / math.log(2)).transpose(0, 1))


def test_single_decode_and_prefill():
    import torch
    gen = torch.Generator().manual_seed(31)
    k = torch.randn(1000, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    v = torch.randn(1000, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    q1 = torch.randn(HQ, D, generator=gen).to(torch.bfloat16).cuda()
    o = attn.single_decode_with_kv_cache(q1, k, v)
    torch.testing.assert_close(o.float(), attention(q1[None], k, v, False)[0][0], atol=2e-2, rtol=2e-2)
    q = torch.randn(300, HQ, D, generator=gen).to(torch.bfloat16).cuda()
    o, lse = attn.single_prefill_with_kv_cache(q, k, v, causal=True, return_lse=True)
    ro, rl = attention(q, k, v, True)
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, rl, atol=1e-2, rtol=1e-3)


def test_split_attention_merges_back():
    """Attention over two halves of the keys, merged, equals attention over all."""
    import torch
    gen = torch.Generator().manual_seed(32)
    k = torch.randn(512, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    v = torch.randn(512, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    q = torch.randn(64, HQ, D, generator=gen).to(torch.bfloat16).cuda()
    oa, sa = attn.single_prefill_with_kv_cache(q, k[:200], v[:200], return_lse=True)
    ob, sb = attn.single_prefill_with_kv_cache(q, k[200:], v[200:], return_lse=True)
    o, s = attn.merge_state(oa, sa, ob, sb)
    ro, rl = attention(q, k, v, False)
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(s, rl, atol=1e-2, rtol=1e-3)
    om, sm = attn.merge_states(torch.stack([oa, ob], 1), torch.stack([sa, sb], 1))
    torch.testing.assert_close(om.float(), ro, atol=2e-2, rtol=2e-2)


def test_append_then_decode():
    """Tokens appended into scattered pages are what the decode kernel reads."""
    import torch
    gen = torch.Generator().manual_seed(33)
    page, lens = 16, [37, 5, 64]
    npages = [(n + page - 1) // page for n in lens]
    indptr = torch.tensor([0] + list(torch.tensor(npages).cumsum(0)), dtype=torch.int32)
    indices = torch.randperm(sum(npages) + 4, generator=gen)[:sum(npages)].int().cuda()
    last = torch.tensor([n - (p - 1) * page for n, p in zip(lens, npages)], dtype=torch.int32)
    cache = torch.zeros(sum(npages) + 4, 2, page, HKV, D, dtype=torch.bfloat16, device="cuda")
    keys = [torch.randn(n, HKV, D, generator=gen).to(torch.bfloat16).cuda() for n in lens]
    vals = [torch.randn(n, HKV, D, generator=gen).to(torch.bfloat16).cuda() for n in lens]
    batch = torch.cat([torch.full((n,), b, dtype=torch.int32) for b, n in enumerate(lens)]).cuda()
    pos = torch.cat([torch.arange(n, dtype=torch.int32) for n in lens]).cuda()
    attn.append_paged_kv_cache(torch.cat(keys), torch.cat(vals), batch, pos, cache, indices,
                               indptr.cuda(), last.cuda())
    q = torch.randn(len(lens), HQ, D, generator=gen).to(torch.bfloat16).cuda()
    w = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    w.plan(indptr, indices, last, HQ, HKV, D, page, q_data_type=torch.bfloat16)
    o = w.run(q, cache)
    for b in range(len(lens)):
        torch.testing.assert_close(o[b].float(), attention(q[b:b + 1], keys[b], vals[b], False)[0][0],
                                   atol=2e-2, rtol=2e-2)
