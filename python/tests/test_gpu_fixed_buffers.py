"""plan() in CUDA-graph mode writes the caller's fixed buffers, as FlashInfer's does.

The kernels read the index arrays from the plan's own copies (the plan's
upload carries them) and the page table from the fixed indices buffer; an
engine may read the other buffers too (examples/serve.py's captured append
reads the page table there), so every plan() of a graph-mode wrapper copies
the batch's arrays into them: the decode wrapper's indptr, indices and
last_page_len buffers, the paged prefill wrapper's qo_indptr buffer as well,
the ragged one's qo_indptr and kv_indptr. Checked on the first plan (the full
path) and on later ones (the memoized path), with batches smaller than the
buffers: nothing past the batch is written. The memoized path writes them
with the generated copy_indices kernel (one launch), or with the driver's
copies where an install lacks it: both are checked. GPU only (marked
``gpu``); plans only, no attention kernel runs.
"""

import pytest

import attn
import attn.core

HQ, HKV, D, PAGE = 32, 8, 128, 16
SENTINEL = -7


def table(torch, gen, batch, pool=512):
    """(qo_indptr, kv_indptr, kv_indices, last_page_len) of ``batch`` causal prefills (CPU, int32)."""
    kv_lens = torch.randint(1, 300, (batch,), generator=gen)
    qo_lens = torch.minimum(kv_lens, torch.randint(1, 40, (batch,), generator=gen))
    pages = (kv_lens + PAGE - 1) // PAGE
    qo = torch.zeros(batch + 1, dtype=torch.int32)
    qo[1:] = torch.cumsum(qo_lens, 0)
    kv = torch.zeros(batch + 1, dtype=torch.int32)
    kv[1:] = torch.cumsum(pages, 0)
    indices = torch.randperm(pool, generator=gen)[:int(kv[-1])].int()
    last = (kv_lens - (pages - 1) * PAGE).int()
    return qo, kv, indices, last


@pytest.fixture(params=["kernel", "driver"])
def copies(request, monkeypatch):
    """How the memoized plan() writes the fixed buffers: the copy_indices
    kernel (which must be found: compiled, or in the kernel pack) or the
    driver's copies (an install without it)."""
    import torch
    if request.param == "kernel":
        assert attn.core.plan_copier(torch.device("cuda", torch.cuda.current_device())) is not None
    else:
        monkeypatch.setattr(attn.core, "plan_copier", lambda device: None)
    return request.param


def buffers(torch, sizes):
    return [torch.full((n,), SENTINEL, dtype=torch.int32, device="cuda") for n in sizes]


def check_plans(torch, gen, bufs, plan):
    """Plans batches of 9, 4 and 12 requests (the first plan takes the full
    path, the others the memoized one): ``plan(table)`` plans one and returns
    what each of ``bufs`` must then hold; nothing past that is written."""
    for batch in (9, 4, 12):
        t = table(torch, gen, batch)
        for b in bufs:
            b.fill_(SENTINEL)
        wants = plan(t)
        torch.cuda.synchronize()
        for b, want in zip(bufs, wants):
            n = want.numel()
            assert torch.equal(b[:n].cpu(), want)
            assert (b[n:] == SENTINEL).all(), "plan() wrote past the batch"


@pytest.mark.gpu
def test_gpu_decode_graph_plan_writes_its_buffers(copies):
    import torch
    bufs = buffers(torch, (17, 512, 16))
    w = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"),
                                                         *bufs)

    def plan(t):
        _, kv, indices, last = t
        w.plan(kv, indices.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
        return kv, indices, last
    check_plans(torch, torch.Generator().manual_seed(41), bufs, plan)


@pytest.mark.gpu
def test_gpu_paged_prefill_graph_plan_writes_its_buffers(copies):
    import torch
    bufs = buffers(torch, (17, 17, 512, 16))
    w = attn.BatchPrefillWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"), "NHD",
                                                 True, *bufs, max_total_q_rows=16 * 40)

    def plan(t):
        qo, kv, indices, last = t
        w.plan(qo, kv, indices.cuda(), last, HQ, HKV, D, PAGE, causal=True, q_data_type=torch.bfloat16)
        return t
    check_plans(torch, torch.Generator().manual_seed(42), bufs, plan)


@pytest.mark.gpu
def test_gpu_ragged_prefill_graph_plan_writes_its_buffers(copies):
    import torch
    gen = torch.Generator().manual_seed(43)
    bufs = buffers(torch, (17, 17))
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"), "NHD",
                                                  True, *bufs, max_total_q_rows=16 * 40)

    def plan(t):
        qo = t[0]
        kv = torch.zeros_like(qo)   # ragged: tokens, at least each request's query tokens
        kv[1:] = torch.cumsum(torch.randint(40, 300, (qo.numel() - 1,), generator=gen), 0)
        w.plan(qo, kv, HQ, HKV, D, causal=True, q_data_type=torch.bfloat16)
        return qo, kv
    check_plans(torch, gen, bufs, plan)
