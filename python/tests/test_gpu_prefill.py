"""GPU: the prefill wrappers against a PyTorch float32 reference.

Skipped (with the reason) without torch, CUDA or a GPU. On a runtime-only
build the kernels come from ATTN_CACHE_DIR (python -m attn.precompile
--kinds prefill,ragged).
"""

import pytest

import attn
from gpu_reference import attention, paged_batch

pytestmark = pytest.mark.gpu


def test_ragged_prefill_matches_reference():
    import torch
    gen = torch.Generator().manual_seed(11)
    hq, hkv, d, dtype = 32, 8, 128, torch.bfloat16
    lens = [1, 300, 17, 1024, 129]
    total = sum(lens)
    q = torch.randn(total, hq, d, generator=gen).to(dtype).cuda()
    k = torch.randn(total, hkv, d, generator=gen).to(dtype).cuda()
    v = torch.randn(total, hkv, d, generator=gen).to(dtype).cuda()
    indptr = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    w.plan(indptr, indptr, hq, hkv, d, causal=True, q_data_type=dtype)
    out = torch.full_like(q, float("nan"))
    o, lse = w.run(q, k, v, out=out, return_lse=True)
    ro, rl = attention(q, k, v, lens, lens, causal=True)
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, rl, atol=1e-2, rtol=1e-3)


def _layer_view(kv):
    """Layer 1 of a [pages, 3 layers, 2, ...] buffer holding ``kv``: pages six pages apart."""
    layers = kv.new_zeros((kv.shape[0], 3) + tuple(kv.shape[1:]))
    layers[:, 1] = kv
    return layers[:, 1]


@pytest.mark.parametrize("cache_form", ["combined", "tuple", "layer"])
def test_paged_prefill_appends_to_a_cache(cache_form):
    import torch
    gen = torch.Generator().manual_seed(12)
    hq, hkv, d, page, dtype = 32, 8, 128, 16, torch.bfloat16
    qo_lens, kv_lens = [5, 64, 1, 200], [40, 64, 900, 333]  # appends over cached tokens
    npages = [(n + page - 1) // page for n in kv_lens]
    pool = sum(npages) + 3
    perm = torch.randperm(pool, generator=gen)[:sum(npages)].int()
    kv = torch.randn(pool, 2, page, hkv, d, generator=gen).to(dtype).cuda()
    kv_indptr = torch.tensor([0] + list(torch.tensor(npages).cumsum(0)), dtype=torch.int32)
    last = torch.tensor([n - (p - 1) * page for n, p in zip(kv_lens, npages)], dtype=torch.int32)
    qo_indptr = torch.tensor([0] + list(torch.tensor(qo_lens).cumsum(0)), dtype=torch.int32)
    q = torch.randn(sum(qo_lens), hq, d, generator=gen).to(dtype).cuda()
    w = attn.BatchPrefillWithPagedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    w.plan(qo_indptr, kv_indptr, perm.cuda(), last, hq, hkv, d, page, causal=True, q_data_type=dtype)
    cache = {"combined": kv, "tuple": (kv[:, 0].contiguous(), kv[:, 1].contiguous()),
             "layer": _layer_view(kv) if cache_form == "layer" else None}[cache_form]
    o = w.run(q, cache)
    ks, vs = [], []
    for b, n in enumerate(kv_lens):
        pages = perm[kv_indptr[b]:kv_indptr[b + 1]].long().cuda()
        ks.append(kv[pages, 0].reshape(-1, hkv, d)[:n])
        vs.append(kv[pages, 1].reshape(-1, hkv, d)[:n])
    ro, _ = attention(q, torch.cat(ks), torch.cat(vs), qo_lens, kv_lens, causal=True)
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)


def test_a_small_workspace_splits_less_and_stays_right():
    """A float workspace below get_workspace_size (FlashInfer's tests pass
    16 MiB): plan() caps the split-KV scratch to fit it, and the output is the
    reference's. Few query rows over long KV is where the planner splits."""
    import torch
    gen = torch.Generator().manual_seed(12)
    hq, hkv, d, dtype = 32, 8, 128, torch.bfloat16
    qo_lens, kv_lens = [12, 40, 3], [16384, 9000, 20000]
    q = torch.randn(sum(qo_lens), hq, d, generator=gen).to(dtype).cuda()
    k = torch.randn(sum(kv_lens), hkv, d, generator=gen).to(dtype).cuda()
    v = torch.randn(sum(kv_lens), hkv, d, generator=gen).to(dtype).cuda()
    qo = torch.tensor([0] + list(torch.tensor(qo_lens).cumsum(0)), dtype=torch.int32)
    kv = torch.tensor([0] + list(torch.tensor(kv_lens).cumsum(0)), dtype=torch.int32)
    need = attn.get_workspace_size(hq, hkv, d, 1, kind="ragged", max_batch=3, max_total_q_rows=sum(qo_lens),
                                   causal=True)
    outs = []
    for nbytes in (need, need // 3):
        w = attn.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(nbytes, dtype=torch.uint8, device="cuda"))
        w.plan(qo, kv, hq, hkv, d, causal=True, q_data_type=dtype)
        outs.append(w.run(q, k, v))
    ro, _ = attention(q, k, v, qo_lens, kv_lens, causal=True)
    for o in outs:
        torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("paged", [True, False], ids=["paged", "ragged"])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_memoized_prefill_plans_run_right(paged, graph):
    """A wrapper's later plan()s of the same configuration take the memoized
    path (index arrays through the binding's staging into reused buffers):
    each step's batch, a different shape every time, runs right."""
    import torch
    gen = torch.Generator().manual_seed(21)
    hq, hkv, d, page, dtype = 32, 8, 128, 16, torch.bfloat16
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    i32 = dict(dtype=torch.int32, device="cuda")
    if paged:
        bufs = dict(qo_indptr_buf=torch.empty(9, **i32), paged_kv_indptr_buf=torch.empty(9, **i32),
                    paged_kv_indices_buf=torch.empty(4096, **i32), paged_kv_last_page_len_buf=torch.empty(8, **i32))
        w = attn.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", use_cuda_graph=graph, max_total_q_rows=4096,
                                                     **(bufs if graph else {}))
    else:
        bufs = dict(qo_indptr_buf=torch.empty(9, **i32), kv_indptr_buf=torch.empty(9, **i32))
        w = attn.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD", use_cuda_graph=graph, max_total_q_rows=4096,
                                                      **(bufs if graph else {}))
    steps = [([5, 64, 1, 200], [40, 64, 900, 333]), ([300, 7], [300, 1000]), ([1] * 8, [17] * 8),
             ([128, 512, 33], [2000, 512, 33])]
    for qo_lens, kv_lens in steps:
        qo_indptr = torch.tensor([0] + list(torch.tensor(qo_lens).cumsum(0)), dtype=torch.int32)
        q = torch.randn(sum(qo_lens), hq, d, generator=gen).to(dtype).cuda()
        if paged:
            kv, kv_indptr, perm, last, k, v = paged_batch(torch, kv_lens, page, hkv, d, dtype, gen)
            w.plan(qo_indptr, kv_indptr, perm.cuda(), last, hq, hkv, d, page, causal=True, q_data_type=dtype)
            o = w.run(q, kv.cuda())
            k, v = k.cuda(), v.cuda()
        else:
            kv_indptr = torch.tensor([0] + list(torch.tensor(kv_lens).cumsum(0)), dtype=torch.int32)
            k = torch.randn(sum(kv_lens), hkv, d, generator=gen).to(dtype).cuda()
            v = torch.randn(sum(kv_lens), hkv, d, generator=gen).to(dtype).cuda()
            w.plan(qo_indptr, kv_indptr, hq, hkv, d, causal=True, q_data_type=dtype)
            o = w.run(q, k, v)
        assert len(w._memo) == 1
        ro, _ = attention(q, k, v, qo_lens, kv_lens, causal=True)
        torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("paged", [True, False], ids=["paged", "ragged"])
def test_memoized_prefill_plans_replay_in_a_cuda_graph(paged):
    """A graph-mode prefill wrapper captured once, then planned on the
    memoized path (the page table copied into its fixed buffer by the
    binding's call) and replayed for batches of other shapes: each replay
    equals an eager wrapper's run of the same batch."""
    import torch
    gen = torch.Generator().manual_seed(31)
    hq, hkv, d, page, dtype = 32, 8, 128, 16, torch.bfloat16
    max_batch, max_q, pool = 6, 1024, 512
    i32 = dict(dtype=torch.int32, device="cuda")
    ws = lambda: torch.empty(256 << 20, dtype=torch.uint8, device="cuda")  # noqa: E731
    kv = torch.randn(pool, 2, page, hkv, d, generator=gen).to(dtype).cuda()
    k_rows = torch.randn(pool * page, hkv, d, generator=gen).to(dtype).cuda()
    v_rows = torch.randn(pool * page, hkv, d, generator=gen).to(dtype).cuda()
    if paged:
        bufs = dict(qo_indptr_buf=torch.zeros(max_batch + 1, **i32),
                    paged_kv_indptr_buf=torch.zeros(max_batch + 1, **i32),
                    paged_kv_indices_buf=torch.zeros(pool, **i32),
                    paged_kv_last_page_len_buf=torch.zeros(max_batch, **i32))
        w = attn.BatchPrefillWithPagedKVCacheWrapper(ws(), "NHD", use_cuda_graph=True, max_total_q_rows=max_q,
                                                     **bufs)
        eager = attn.BatchPrefillWithPagedKVCacheWrapper(ws(), "NHD")
    else:
        bufs = dict(qo_indptr_buf=torch.zeros(max_batch + 1, **i32), kv_indptr_buf=torch.zeros(max_batch + 1, **i32))
        w = attn.BatchPrefillWithRaggedKVCacheWrapper(ws(), "NHD", use_cuda_graph=True, max_total_q_rows=max_q,
                                                      **bufs)
        eager = attn.BatchPrefillWithRaggedKVCacheWrapper(ws(), "NHD")
    q = torch.zeros(max_q, hq, d, dtype=dtype, device="cuda")
    out = torch.zeros_like(q)

    def batch(qo_lens, kv_lens):
        qo_indptr = torch.tensor([0] + list(torch.tensor(qo_lens).cumsum(0)), dtype=torch.int32)
        if not paged:
            kv_indptr = torch.tensor([0] + list(torch.tensor(kv_lens).cumsum(0)), dtype=torch.int32)
            return (qo_indptr, kv_indptr)
        npages = [(n + page - 1) // page for n in kv_lens]
        perm = torch.randperm(pool, generator=gen)[:sum(npages)].int().cuda()
        kv_indptr = torch.tensor([0] + list(torch.tensor(npages).cumsum(0)), dtype=torch.int32)
        last = torch.tensor([n - (p - 1) * page for n, p in zip(kv_lens, npages)], dtype=torch.int32)
        return (qo_indptr, kv_indptr, perm, last)

    def plan(wrapper, b):
        if paged:
            wrapper.plan(*b, hq, hkv, d, page, causal=True, q_data_type=dtype)
        else:
            wrapper.plan(*b, hq, hkv, d, causal=True, q_data_type=dtype)

    def run(wrapper, qq, o=None):
        return wrapper.run(qq, kv, out=o) if paged else wrapper.run(qq, k_rows, v_rows, out=o)

    plan(w, batch([100, 300, 7], [400, 300, 900]))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        run(w, q, out)  # warm-up outside capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            run(w, q, out)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    for qo_lens, kv_lens in (([512, 1, 33], [512, 2000, 40]), ([64] * 6, [64, 128, 256, 512, 1024, 2048]),
                             ([1000], [1000]), ([5, 9], [1500, 9])):
        b = batch(qo_lens, kv_lens)
        plan(w, b)   # outside the graph, memoized: the fixed buffers and the workspace
        assert len(w._memo) == 1
        total = sum(qo_lens)
        q.copy_(torch.randn(max_q, hq, d, generator=gen).to(dtype))
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        plan(eager, b)
        want = run(eager, q[:total])
        torch.testing.assert_close(out[:total].float(), want.float(), atol=1e-3, rtol=1e-3)
