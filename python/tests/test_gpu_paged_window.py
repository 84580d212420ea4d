"""GPU: paged causal prefill with a sliding window whose rows sit far past
the window (qo_len < kv_len), against a float32 PyTorch reference.

Found by FlashInfer's own test_batch_paged_prefill_sliding_window (page 16,
head dim 128, 8/4 heads, window 33, 17 requests of 47 rows over 397 keys:
wrong output for 99% of the elements), while the ragged KV of the same batch
was right. Measured on the H200 (2026-12-01): the sm_90 (mma.sync) kernels
pass every case; the sm_90a warp-specialized wgmma kernels are wrong for
16-token pages when the window clips the start of the keys (fi-case, bf16,
one-request, kv200), right for one-token pages and for a window wider than
the keys. Those cases are marked as expected failures on sm_90a (strict: a
fix makes them pass and the marks must go) until the bug is fixed.
Skipped without torch/GPU.
"""

import math

import pytest

import attn

pytestmark = pytest.mark.gpu


def _wgmma_kernels():
    """True where attn runs the sm_90a kernels (an H100/H200, ATTN_ARCH unset
    or sm_90a)."""
    try:
        import torch
    except ImportError:
        return False
    if not torch.cuda.is_available():
        return False
    from attn.core import device_arch
    return device_arch(torch.device("cuda")) == "sm_90a"


def _known_bug(case):
    return pytest.param(*case, marks=pytest.mark.xfail(
        condition=_wgmma_kernels(), strict=True,
        reason="sm_90a warp-specialized kernel: paged KV (pages > 1) with a window clipping the "
               "start of the keys is wrong (open bug, #12)"))


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
    _known_bug((17, 47, 397, 33, 16, "float16")),    # FlashInfer's failing case
    _known_bug((17, 47, 397, 33, 16, "bfloat16")),
    (17, 47, 397, 33, 1, "float16"),                  # one-token pages
    (17, 47, 397, 400, 16, "float16"),                # a window wider than the keys (no clipping)
    _known_bug((1, 47, 397, 33, 16, "float16")),      # one request (no split, one tile)
    _known_bug((17, 47, 200, 33, 16, "float16")),     # two KV tiles
], ids=["fi-case", "bf16", "page1", "wide-window", "one-request", "kv200"])
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
