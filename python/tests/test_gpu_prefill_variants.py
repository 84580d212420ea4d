"""GPU: the built-in variants through the prefill kernel, and MQA decode.

Ragged causal prefill with a sliding window, soft-capping, ALiBi and RoPE
(rotate-half, applied on the fly to q and k at their positions), each against
a float32 PyTorch reference written from docs/Semantics.md; and decode with one KV
head for 32 query heads (MQA). Skipped without torch/GPU.
"""

import math

import pytest

import attn

pytestmark = pytest.mark.gpu

HQ, HKV, D = 32, 8, 128


def rope(x, pos, theta=1e4):
    """Rotate-half RoPE of x [n, H, D] at positions pos [n]."""
    import torch
    half = x.shape[-1] // 2
    freq = theta ** (-2 * torch.arange(half, device=x.device, dtype=torch.float64) / x.shape[-1])
    ang = pos.double()[:, None] * freq[None, :]
    cos, sin = torch.cos(ang)[:, None, :].float(), torch.sin(ang)[:, None, :].float()
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def reference(q, k, v, lens, window=-1, cap=None, alibi=False, use_rope=False):
    import torch
    g = q.shape[1] // k.shape[1]
    out, r0 = [], 0
    for n in lens:
        qb, kb, vb = q[r0:r0 + n].float(), k[r0:r0 + n].float(), v[r0:r0 + n].float()
        pos = torch.arange(n, device=q.device)
        if use_rope:
            qb, kb = rope(qb, pos), rope(kb, pos)
        kb, vb = kb.repeat_interleave(g, 1), vb.repeat_interleave(g, 1)
        s = torch.einsum("qhd,khd->hqk", qb, kb) / math.sqrt(D)
        dist = (pos[None, :] - pos[:, None]).float()  # k_pos - p
        if alibi:
            slopes = 2.0 ** (-8.0 * (torch.arange(HQ, device=q.device) + 1) / HQ)
            s = s + slopes[:, None, None] * dist[None]
        if cap:
            s = cap * torch.tanh(s / cap)
        keep = dist <= 0
        if window >= 0:
            keep &= dist >= -window
        s = s.masked_fill(~keep[None], float("-inf"))
        out.append(torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), vb))
        r0 += n
    return torch.cat(out)


@pytest.mark.parametrize("kw", [dict(window_left=64), dict(logits_soft_cap=30.0),
                                dict(pos_encoding_mode="ALIBI"), dict(pos_encoding_mode="ROPE_LLAMA")],
                         ids=["window", "soft_cap", "alibi", "rope"])
def test_ragged_prefill_variants(kw):
    import torch
    gen = torch.Generator().manual_seed(21)
    lens = [300, 1, 777, 64]
    total = sum(lens)
    q = torch.randn(total, HQ, D, generator=gen).to(torch.bfloat16).cuda()
    k = torch.randn(total, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    v = torch.randn(total, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    indptr = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    w.plan(indptr, indptr, HQ, HKV, D, causal=True, q_data_type=torch.bfloat16, **kw)
    out = w.run(q, k, v)
    ref = reference(q, k, v, lens, window=kw.get("window_left", -1), cap=kw.get("logits_soft_cap"),
                    alibi=kw.get("pos_encoding_mode") == "ALIBI",
                    use_rope=kw.get("pos_encoding_mode") == "ROPE_LLAMA")
    err = float((out.float() - ref).norm() / ref.norm())
    assert err < 2e-2, f"relative error {err:.2e}"


def test_mqa_decode():
    import torch
    gen = torch.Generator().manual_seed(22)
    hq, hkv, page, lens = 32, 1, 16, [1000, 17, 256]
    npages = [(n + page - 1) // page for n in lens]
    indptr = torch.tensor([0] + list(torch.tensor(npages).cumsum(0)), dtype=torch.int32)
    indices = torch.randperm(sum(npages) + 2, generator=gen)[:sum(npages)].int()
    last = torch.tensor([n - (p - 1) * page for n, p in zip(lens, npages)], dtype=torch.int32)
    kv = torch.randn(sum(npages) + 2, 2, page, hkv, D, generator=gen).to(torch.bfloat16).cuda()
    q = torch.randn(len(lens), hq, D, generator=gen).to(torch.bfloat16).cuda()
    w = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    w.plan(indptr, indices.cuda(), last, hq, hkv, D, page, q_data_type=torch.bfloat16)
    out = w.run(q, kv)
    for b, n in enumerate(lens):
        pages = indices[indptr[b]:indptr[b + 1]].long().cuda()
        kb = kv[pages, 0].reshape(-1, hkv, D)[:n].float()[:, 0]
        vb = kv[pages, 1].reshape(-1, hkv, D)[:n].float()[:, 0]
        p = torch.softmax(q[b].float() @ kb.T / math.sqrt(D), -1)
        torch.testing.assert_close(out[b].float(), p @ vb, atol=2e-2, rtol=2e-2)
