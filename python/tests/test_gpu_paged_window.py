"""GPU: paged causal prefill with a sliding window whose rows sit far past
the window (qo_len < kv_len), against a float32 PyTorch reference.

Found by FlashInfer's own test_batch_paged_prefill_sliding_window (page 16,
head dim 128, 8/4 heads, window 33, 17 requests of 47 rows over 397 keys:
wrong output for 99% of the elements), while the ragged KV of the same batch
was right. The cause: the planner clips an item's kv_begin to the first
row's window start (unaligned), and the kernel started its K/V tiles there,
off a page boundary; the warp-specialized producer's one page index per page
then read the wrong pages (lib/Conversion/AttnToGPU/MMASync/KVPipeline.cpp,
KVRangeLowering). Pages of 64 and 128 tokens cover the other page-index
schemes (one per tile). Skipped without torch/GPU.
"""

import math

import pytest

import attn

pytestmark = pytest.mark.gpu


def reference(q, k_pages, v_pages, indptr, last, qo_len, window, page):
    import torch
    hq, hkv, d = q.shape[1], k_pages.shape[2], q.shape[2]
    g = hq // hkv
    out = []
    for b in range(len(last)):
        pages = list(range(int(indptr[b]), int(indptr[b + 1])))
        kb = torch.cat([k_pages[p] for p in pages])[: (len(pages) - 1) * page + int(last[b])].float()
        vb = torch.cat([v_pages[p] for p in pages])[: (len(pages) - 1) * page + int(last[b])].float()
        kv_len = kb.shape[0]
        qb = q[b * qo_len:(b + 1) * qo_len].float()
        s = torch.einsum("qhd,khd->hqk", qb, kb.repeat_interleave(g, 1)) / math.sqrt(d)
        pos = torch.arange(qo_len, device=q.device)[:, None] + (kv_len - qo_len)
        key = torch.arange(kv_len, device=q.device)[None, :]
        keep = (key <= pos) & (key >= pos - window)
        s = s.masked_fill(~keep[None], float("-inf"))
        out.append(torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), vb.repeat_interleave(g, 1)))
    return torch.cat(out)


@pytest.mark.parametrize("batch,qo_len,kv_len,window,page,dtype", [
    (17, 47, 397, 33, 16, "float16"),    # FlashInfer's failing case
    (17, 47, 397, 33, 16, "bfloat16"),
    (17, 47, 397, 33, 1, "float16"),     # one-token pages
    (17, 47, 397, 400, 16, "float16"),   # a window wider than the keys (no clipping)
    (1, 47, 397, 33, 16, "float16"),     # one request (no split, one tile)
    (17, 47, 200, 33, 16, "float16"),    # two KV tiles
    (17, 47, 397, 33, 64, "float16"),    # pages of 64 and 128 tokens
    (5, 47, 397, 33, 128, "float16"),
], ids=["fi-case", "bf16", "page1", "wide-window", "one-request", "kv200", "page64", "page128"])
def test_paged_prefill_window_far_past_the_window(batch, qo_len, kv_len, window, page, dtype):
    import torch
    dt = getattr(torch, dtype)
    hq, hkv, d = 8, 4, 128
    gen = torch.Generator().manual_seed(33)
    per = -(-kv_len // page)
    k_pages = torch.randn(batch * per, page, hkv, d, generator=gen).to(dt).cuda()
    v_pages = torch.randn(batch * per, page, hkv, d, generator=gen).to(dt).cuda()
    q = torch.randn(batch * qo_len, hq, d, generator=gen).to(dt).cuda()
    qo_indptr = torch.arange(batch + 1, dtype=torch.int32) * qo_len
    indptr = torch.arange(batch + 1, dtype=torch.int32) * per
    last = torch.full((batch,), (kv_len - 1) % page + 1, dtype=torch.int32)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(torch.empty(128 << 20, dtype=torch.uint8, device="cuda"), "NHD")
    w.plan(qo_indptr, indptr, torch.arange(batch * per, dtype=torch.int32, device="cuda"), last, hq, hkv, d, page,
           window_left=window, causal=True, q_data_type=dt)
    out = w.run(q, (k_pages, v_pages))
    ref = reference(q, k_pages, v_pages, indptr, last, qo_len, window, page)
    err = (out.float() - ref).abs().amax(dim=(1, 2))
    bad = [int(r) for r in torch.nonzero(err > 2e-2).flatten()[:8]]
    assert not bad, f"rows {bad}... wrong (max error {float(err.max()):.3f}); requests {sorted({r // qo_len for r in bad})}"
