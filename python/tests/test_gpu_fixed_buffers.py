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
with the generated copy_indices kernel (one launch, which also uploads the
plan from pinned host memory), or after the driver's copies of the plan,
or with the driver's copies where an install lacks the kernel: each is
checked, and so is the plan's device image against the host plan, eager
and in graph mode. GPU only (marked ``gpu``); plans only, no attention
kernel runs.
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


@pytest.fixture(params=["kernel", "kernel-after-driver", "driver"])
def copies(request, monkeypatch):
    """How the memoized plan() uploads the plan and writes the fixed buffers:
    one launch of the copy_indices kernel reading the plan from pinned host
    memory (which must be found: compiled, or in the kernel pack), the
    driver's copies of the plan then the kernel reading its device copy
    (ATTN_UPLOAD_FROM_HOST=0), or the driver's copies alone (an install
    without the kernel)."""
    import torch
    if request.param == "driver":
        monkeypatch.setattr(attn.core, "plan_copier", lambda device: None)
    else:
        assert attn.core.plan_copier(torch.device("cuda", torch.cuda.current_device())) is not None
    if request.param == "kernel-after-driver":
        monkeypatch.setenv("ATTN_UPLOAD_FROM_HOST", "0")
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


def plan_parts(torch, words):
    """The parts of a flat plan (int32 ``words``) its readers see: the
    header, the index arrays and one head-group copy's CTA index, items and
    merge map (docs/Runtime.md); the rest of the layout is never read."""
    w = [int(x) for x in words[:48]]
    b, ctas, units = w[22], w[36], w[38]
    items = w[3] // w[35]
    cut = lambda off, n: words[off:off + n]  # noqa: E731
    return torch.cat([words[:48], cut(w[31], b + 1), cut(w[32], b + 1), cut(w[33], b), cut(w[14], ctas + 1),
                      cut(w[15], 8 * items), cut(w[16], units + 1), cut(w[17], 4 * units)])


@pytest.mark.gpu
@pytest.mark.parametrize("graph", [False, True])
def test_gpu_memoized_upload_is_the_host_plan(copies, graph):
    """Every upload schedule leaves the plan the host made on the device:
    skewed decode batches (some requests split, so the merge map is
    non-empty) planned again and again through the memoized path."""
    import torch
    gen = torch.Generator().manual_seed(44)
    ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    if graph:
        bufs = buffers(torch, (257, 1 << 16, 256))
        w = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(ws, *bufs)
    else:
        w = attn.BatchDecodeWithPagedKVCacheWrapper(ws)
    merge_units = 0
    for batch in (200, 256, 64, 256):
        lens = torch.randint(20, 1500, (batch,), generator=gen)
        lens[3::16] = 20000
        pages = (lens + PAGE - 1) // PAGE
        kv = torch.zeros(batch + 1, dtype=torch.int32)
        kv[1:] = torch.cumsum(pages, 0)
        indices = torch.randperm(int(kv[-1]), generator=gen).int().cuda()
        last = (lens - (pages - 1) * PAGE).int()
        w.plan(kv, indices, last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
        torch.cuda.synchronize()
        host_bytes = w._planned.summary["plan_bytes"]
        host = w._host_ws[:host_bytes].view(torch.int32)
        device = ws[:host_bytes].view(torch.int32).cpu()
        merge_units = max(merge_units, int(host[4]))
        assert torch.equal(plan_parts(torch, device), plan_parts(torch, host))
    assert merge_units > 0, "some batch split its long requests: the merge map was checked"
