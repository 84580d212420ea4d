"""GPU: BatchDecodeWithPagedKVCacheWrapper against a PyTorch float32 reference.

Skipped (with the reason) without torch, CUDA or a GPU. On a runtime-only
build the kernels come from ATTN_CACHE_DIR (python -m attn.precompile).
"""

import math

import pytest

import attn

pytestmark = pytest.mark.gpu


def reference(q, k_pages, v_pages, indptr, indices, last, sm_scale, soft_cap=None, window_left=-1):
    """float32 decode per request (docs/Semantics.md); pages NHD [pages, page, Hkv, D]."""
    import torch
    out, lse = [], []
    hq, hkv = q.shape[1], k_pages.shape[2]
    g = hq // hkv
    for b in range(len(last)):
        pages = indices[indptr[b]:indptr[b + 1]].long()
        k = k_pages[pages].reshape(-1, hkv, q.shape[2])
        v = v_pages[pages].reshape(-1, hkv, q.shape[2])
        n = (len(pages) - 1) * k_pages.shape[1] + int(last[b])
        k, v = k[:n].float().repeat_interleave(g, 1), v[:n].float().repeat_interleave(g, 1)
        s = torch.einsum("hd,nhd->hn", q[b].float(), k) * sm_scale
        if soft_cap:
            s = soft_cap * torch.tanh(s / soft_cap)
        if window_left >= 0:
            pos = torch.arange(n, device=q.device)
            s = s.masked_fill(pos[None, :] < (n - 1 - window_left), float("-inf"))
        lse.append(torch.logsumexp(s, -1) / math.log(2))
        out.append(torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v))
    return torch.stack(out), torch.stack(lse)


def random_batch(torch, batch, page, hkv, d, dtype, gen, max_len=3000):
    lens = torch.randint(1, max_len, (batch,), generator=gen)
    npages = (lens + page - 1) // page
    indptr = torch.zeros(batch + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(npages, 0)
    total = int(indptr[-1])
    pool = total + 7
    indices = torch.randperm(pool, generator=gen)[:total].int()
    last = (lens - (npages - 1) * page).int()
    kv = torch.randn(pool, 2, page, hkv, d, generator=gen).to(dtype)
    return indptr, indices, last, kv


def cache_view(kv, form):
    """``kv`` [pages, 2, ...] as the kernels may read it: itself, a contiguous
    (k, v) tuple, or layer 1 of a [pages, 3 layers, 2, ...] buffer (pages six
    pages apart, read in place at that stride)."""
    if form == "combined":
        return kv
    if form == "tuple":
        return kv[:, 0].contiguous(), kv[:, 1].contiguous()
    layers = kv.new_zeros((kv.shape[0], 3) + tuple(kv.shape[1:]))
    layers[:, 1] = kv
    return layers[:, 1]


@pytest.mark.parametrize("batch,page,hq,hkv", [(7, 16, 32, 8), (33, 16, 32, 4), (3, 16, 8, 8), (64, 16, 64, 8)])
@pytest.mark.parametrize("cache_form", ["combined", "tuple", "layer"])
def test_decode_matches_reference(batch, page, hq, hkv, cache_form):
    import torch
    gen = torch.Generator().manual_seed(batch * 100 + hq)
    d, dtype = 128, torch.bfloat16
    indptr, indices, last, kv = random_batch(torch, batch, page, hkv, d, dtype, gen)
    kv = kv.cuda()
    q = torch.randn(batch, hq, d, generator=gen).to(dtype).cuda()
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    w = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
    w.plan(indptr, indices.cuda(), last, hq, hkv, d, page, q_data_type=dtype)
    cache = cache_view(kv, cache_form)
    out = torch.full_like(q, float("nan"))
    o, lse = w.run(q, cache, out=out, return_lse=True)
    ro, rl = reference(q, kv[:, 0], kv[:, 1], indptr, indices.cuda(), last, 1 / math.sqrt(d))
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, rl, atol=1e-2, rtol=1e-3)


@pytest.mark.parametrize("kw", [dict(logits_soft_cap=30.0), dict(window_left=100)])
def test_decode_variants(kw):
    import torch
    gen = torch.Generator().manual_seed(7)
    batch, page, hq, hkv, d, dtype = 9, 16, 32, 8, 128, torch.bfloat16
    indptr, indices, last, kv = random_batch(torch, batch, page, hkv, d, dtype, gen)
    kv = kv.cuda()
    q = (3 * torch.randn(batch, hq, d, generator=gen)).to(dtype).cuda()
    w = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    w.plan(indptr, indices.cuda(), last, hq, hkv, d, page, q_data_type=dtype, **kw)
    o = w.run(q, kv)
    ro, _ = reference(q, kv[:, 0], kv[:, 1], indptr, indices.cuda(), last, 1 / math.sqrt(d),
                      soft_cap=kw.get("logits_soft_cap"), window_left=kw.get("window_left", -1))
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)


def test_run_validates_tensors():
    import torch
    w = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    w.plan(torch.tensor([0, 1], dtype=torch.int32), torch.tensor([0], dtype=torch.int32, device="cuda"),
           torch.tensor([3], dtype=torch.int32), 32, 8, 128, 16, q_data_type=torch.bfloat16)
    kv = torch.zeros(1, 2, 16, 8, 128, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(TypeError, match="q: expected dtype bf16"):
        w.run(torch.zeros(1, 32, 128, dtype=torch.float16, device="cuda"), kv)
    with pytest.raises(ValueError, match="q: expected shape"):
        w.run(torch.zeros(2, 32, 128, dtype=torch.bfloat16, device="cuda"), kv)
    with pytest.raises(ValueError, match="expected a tensor on cuda"):
        w.run(torch.zeros(1, 32, 128, dtype=torch.bfloat16), kv)


def test_cuda_graph_capture_and_replay_across_batches():
    import torch
    gen = torch.Generator().manual_seed(3)
    max_batch, page, hq, hkv, d, dtype = 32, 16, 32, 8, 128, torch.bfloat16
    pool = 4096
    kv = torch.randn(pool, 2, page, hkv, d, generator=gen).to(dtype).cuda()
    bufs = dict(paged_kv_indptr_buffer=torch.zeros(max_batch + 1, dtype=torch.int32, device="cuda"),
                paged_kv_indices_buffer=torch.zeros(pool, dtype=torch.int32, device="cuda"),
                paged_kv_last_page_len_buffer=torch.zeros(max_batch, dtype=torch.int32, device="cuda"))
    w = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"), "NHD",
                                                use_cuda_graph=True, **bufs)
    q = torch.zeros(max_batch, hq, d, dtype=dtype, device="cuda")
    out = torch.zeros_like(q)

    def step(batch):
        lens = torch.randint(1, 2000, (batch,), generator=gen)
        npages = (lens + page - 1) // page
        indptr = torch.zeros(batch + 1, dtype=torch.int32)
        indptr[1:] = torch.cumsum(npages, 0)
        indices = torch.randperm(pool, generator=gen)[:int(indptr[-1])].int()
        last = (lens - (npages - 1) * page).int()
        w.plan(indptr, indices, last, hq, hkv, d, page, q_data_type=dtype)
        q[:batch] = torch.randn(batch, hq, d, generator=gen).to(dtype).cuda()
        return indptr, indices.cuda(), last

    first = step(max_batch)
    # A plain run inside capture without graph mode must be refused.
    plain = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    plain.plan(*first, hq, hkv, d, page, q_data_type=dtype)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        w.run(q, kv, out=out)  # warm-up outside capture
        g = torch.cuda.CUDAGraph()
        with pytest.raises(RuntimeError, match="use_cuda_graph=False"):
            with torch.cuda.graph(g):
                plain.run(q, kv)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            w.run(q, kv, out=out)
    torch.cuda.synchronize()
    for batch in (max_batch, 5, 17, 1):
        indptr, indices, last = step(batch) if batch != max_batch else first
        if batch == max_batch:
            w.plan(indptr, indices, last, hq, hkv, d, page, q_data_type=dtype)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        ro, _ = reference(q[:batch], kv[:, 0], kv[:, 1], indptr, indices, last, 1 / math.sqrt(d))
        torch.testing.assert_close(out[:batch].float(), ro, atol=2e-2, rtol=2e-2)
