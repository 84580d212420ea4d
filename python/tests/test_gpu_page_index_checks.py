"""GPU: a wrong page table gives a clear error, never a read outside the
cache nor a dead CUDA context (docs/Kernels.md, "Page-index checks").

The paged kernels compare every kv_indices entry with the cache's page count;
a bad one is read as page 0 and raises the device's index_error word, which
the next plan()/run() turns into attn.PageIndexError (at once in the same
run() with ATTN_CHECK_INDICES=1). Host-known sizes (kv_indices shorter than
kv_indptr[-1], ragged K/V shorter than it, an empty cache) are ValueErrors
before any launch. After each bad case a good run must still match the
reference. Prefill runs on both kernel sets of an H200 (sm_90a wgmma and the
sm_90 mma.sync fallback).
"""

import pytest

import attn
from gpu_reference import attention, paged_batch

pytestmark = pytest.mark.gpu

HQ, HKV, D, PAGE = 32, 8, 128, 16


def _ws(torch):
    return torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def _decode_case(torch, gen):
    kv_lens = [40, 700, 1, 333]
    kv, indptr, indices, last, k_tok, v_tok = paged_batch(torch, kv_lens, PAGE, HKV, D, torch.bfloat16, gen)
    q = torch.randn(len(kv_lens), HQ, D, generator=gen).to(torch.bfloat16).cuda()
    return kv.cuda(), indptr, indices, last, q, k_tok.cuda(), v_tok.cuda(), kv_lens


def _check_decode(torch, w, q, kv, case):
    o = w.run(q, kv)
    _, _, _, _, _, k_tok, v_tok, kv_lens = case
    ro, _ = attention(q, k_tok, v_tok, [1] * len(kv_lens), kv_lens)
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)


# Every index is compared with the cache's pages, whatever the page stride:
# a combined [pages, 2, ...] cache (pages twice a page apart) and separate K
# and V tensors alike, the int32 extremes included.
@pytest.mark.parametrize("bad,cache_form", [
    ("num_pages", "combined"), ("-1", "combined"), ("2^30", "combined"), ("-2^31", "combined"),
    ("-2^30-1", "combined"), ("num_pages", "separate"), ("-1", "separate"), ("2^30", "separate"),
    ("-2^31", "separate")])
def test_decode_bad_page_index_raises_at_the_next_call(bad, cache_form):
    import torch
    gen = torch.Generator().manual_seed(3)
    case = _decode_case(torch, gen)
    kv, indptr, indices, last, q = case[:5]
    cache = kv if cache_form == "combined" else (kv[:, 0].contiguous(), kv[:, 1].contiguous())
    value = {"num_pages": kv.shape[0], "-1": -1, "2^30": 1 << 30, "-2^31": -(1 << 31),
             "-2^30-1": -(1 << 30) - 1}[bad]
    wrong = indices.clone()
    wrong[indptr[1] + 3] = value  # request 1, its fourth page
    w = attn.BatchDecodeWithPagedKVCacheWrapper(_ws(torch))
    w.plan(indptr, wrong.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    w.run(q, cache)
    torch.cuda.synchronize()
    with pytest.raises(attn.PageIndexError, match="outside \\[0, num_pages\\)"):
        w.plan(indptr, indices.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    # The error is reported once; the context and the wrapper still work.
    w.plan(indptr, indices.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    _check_decode(torch, w, q, cache, case)


def test_checked_mode_raises_in_the_run_itself(monkeypatch):
    import torch
    gen = torch.Generator().manual_seed(4)
    case = _decode_case(torch, gen)
    kv, indptr, indices, last, q = case[:5]
    wrong = indices.clone()
    wrong[0] = kv.shape[0] + 5
    w = attn.BatchDecodeWithPagedKVCacheWrapper(_ws(torch))
    w.plan(indptr, wrong.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    monkeypatch.setenv("ATTN_CHECK_INDICES", "1")
    with pytest.raises(attn.PageIndexError):
        w.run(q, kv)
    w.plan(indptr, indices.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    _check_decode(torch, w, q, kv, case)  # no error raised by the good run


def test_a_bad_index_in_a_cuda_graph_is_raised_by_the_next_plan():
    import torch
    gen = torch.Generator().manual_seed(5)
    case = _decode_case(torch, gen)
    kv, indptr, indices, last, q = case[:5]
    batch = len(last)
    bufs = (torch.empty(batch + 1, dtype=torch.int32, device="cuda"),
            torch.empty(indices.numel(), dtype=torch.int32, device="cuda"),
            torch.empty(batch, dtype=torch.int32, device="cuda"))
    w = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(_ws(torch), *bufs)
    w.plan(indptr, indices.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    out = torch.empty_like(q)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        w.run(q, kv, out=out)  # warm-up outside the graph
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        w.run(q, kv, out=out)
    wrong = indices.clone()
    wrong[-1] = -7
    w.plan(indptr, wrong.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    g.replay()
    torch.cuda.synchronize()
    with pytest.raises(attn.PageIndexError):
        w.plan(indptr, indices.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    w.plan(indptr, indices.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    g.replay()
    _, _, _, _, _, k_tok, v_tok, kv_lens = case
    ro, _ = attention(q, k_tok, v_tok, [1] * batch, kv_lens)
    torch.testing.assert_close(out.float(), ro, atol=2e-2, rtol=2e-2)


# Page 16: the tile's pages looked up one tile ahead; page 3: on sm_90a the
# producer looks up each copy's page as it issues the copy.
@pytest.mark.parametrize("page", [PAGE, 3])
@pytest.mark.parametrize("arch", ["sm_90a", "sm_90"])
def test_prefill_bad_page_index_on_both_kernel_sets(arch, page, monkeypatch):
    import torch
    monkeypatch.setenv("ATTN_ARCH", arch)
    gen = torch.Generator().manual_seed(6)
    qo_lens, kv_lens = [5, 64, 1, 200], [40, 64, 900, 333]
    kv, kv_indptr, indices, last, k_tok, v_tok = paged_batch(torch, kv_lens, page, HKV, D, torch.bfloat16, gen)
    kv = kv.cuda()
    qo_indptr = torch.tensor([0] + list(torch.tensor(qo_lens).cumsum(0)), dtype=torch.int32)
    q = torch.randn(sum(qo_lens), HQ, D, generator=gen).to(torch.bfloat16).cuda()
    w = attn.BatchPrefillWithPagedKVCacheWrapper(_ws(torch))
    wrong = indices.clone()
    wrong[kv_indptr[2] + 10] = 1 << 28  # request 2, a page its causal rows all see
    w.plan(qo_indptr, kv_indptr, wrong.cuda(), last, HQ, HKV, D, page, causal=True, q_data_type=torch.bfloat16)
    w.run(q, kv)
    torch.cuda.synchronize()
    with pytest.raises(attn.PageIndexError):
        w.plan(qo_indptr, kv_indptr, indices.cuda(), last, HQ, HKV, D, page, causal=True,
               q_data_type=torch.bfloat16)
    w.plan(qo_indptr, kv_indptr, indices.cuda(), last, HQ, HKV, D, page, causal=True, q_data_type=torch.bfloat16)
    o = w.run(q, kv)
    ro, _ = attention(q, k_tok.cuda(), v_tok.cuda(), qo_lens, kv_lens, causal=True)
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)


def test_sizes_known_on_the_host_are_refused_before_the_launch():
    import torch
    gen = torch.Generator().manual_seed(7)
    case = _decode_case(torch, gen)
    kv, indptr, indices, last, q = case[:5]
    w = attn.BatchDecodeWithPagedKVCacheWrapper(_ws(torch))
    with pytest.raises(ValueError, match="kv_indices has only"):
        w.plan(indptr, indices[:-1].cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    w.plan(indptr, indices.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    with pytest.raises(ValueError, match="has no pages"):
        w.run(q, kv[:0])
    # Ragged K/V shorter than kv_indptr[-1].
    lens = [30, 200]
    total = sum(lens)
    rq = torch.randn(total, HQ, D, generator=gen).to(torch.bfloat16).cuda()
    k = torch.randn(total, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    ind = torch.tensor([0, 30, total], dtype=torch.int32)
    r = attn.BatchPrefillWithRaggedKVCacheWrapper(_ws(torch))
    r.plan(ind, ind, HQ, HKV, D, causal=True, q_data_type=torch.bfloat16)
    with pytest.raises(ValueError, match="rows but kv_indptr"):
        r.run(rq, k[:-1], k[:-1])
    # The context is fine.
    _check_decode(torch, w, q, kv, case)
