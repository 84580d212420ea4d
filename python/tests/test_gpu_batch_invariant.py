"""GPU: batch-invariant decode (FlashInfer's ``fixed_split_size`` and
``disable_split_kv``): one request's output is the same bits alone and in a
batch of others, eager and in CUDA-graph mode.

Skipped (with the reason) without torch, CUDA or a GPU. On a runtime-only
build the kernels come from ATTN_CACHE_DIR (python -m attn.precompile).
"""

import pytest

import attn

pytestmark = pytest.mark.gpu

HQ, HKV, D, PAGE = 32, 8, 128, 16
POOL = 12000


def page_table(torch, lens, gen):
    npages = [-(-n // PAGE) for n in lens]
    indptr = torch.zeros(len(lens) + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(torch.tensor(npages), 0)
    indices = torch.randperm(POOL, generator=gen)[:int(indptr[-1])].int()
    last = torch.tensor([n - (p - 1) * PAGE for n, p in zip(lens, npages)], dtype=torch.int32)
    return indptr, indices, last


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("fixed,disable", [(2048, False), (None, True), (1000, False)],
                         ids=["fixed2048", "nosplit", "fixed1000"])
def test_request_output_is_bitwise_the_same_in_any_batch(graph, fixed, disable):
    import torch
    gen = torch.Generator().manual_seed(11)
    dtype = torch.bfloat16
    kv = torch.randn(POOL, 2, PAGE, HKV, D, generator=gen).to(dtype).cuda()
    probe = 9000
    crowd = [512] * 20 + [probe] + [32768] * 3 + [300] * 40
    at = 20
    alone_t = page_table(torch, [probe], gen)
    crowd_t = page_table(torch, crowd, gen)
    # The probe reads the same pages in both batches.
    p0, p1 = int(crowd_t[0][at]), int(crowd_t[0][at + 1])
    alone_t[1][:] = crowd_t[1][p0:p1]
    q_probe = torch.randn(1, HQ, D, generator=gen).to(dtype)
    q_crowd = torch.randn(len(crowd), HQ, D, generator=gen).to(dtype)
    q_crowd[at] = q_probe[0]
    max_batch = len(crowd)
    ws = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    kw = {}
    if graph:
        kw = dict(use_cuda_graph=True,
                  paged_kv_indptr_buffer=torch.zeros(max_batch + 1, dtype=torch.int32, device="cuda"),
                  paged_kv_indices_buffer=torch.zeros(POOL, dtype=torch.int32, device="cuda"),
                  paged_kv_last_page_len_buffer=torch.zeros(max_batch, dtype=torch.int32, device="cuda"))
    w = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", **kw)

    def plan(t):
        indptr, indices, last = t
        # vLLM's positional call: ..., sm_scale, rope_scale, rope_theta, non_blocking, block_tables,
        # seq_lens, fixed_split_size, disable_split_kv
        w.plan(indptr, indices.cuda(), last, HQ, HKV, D, PAGE, "NONE", -1, None, dtype, dtype, None, None, None,
               None, None, True, None, None, fixed, disable)

    if not graph:
        plan(alone_t)
        alone = w.run(q_probe.cuda(), kv).clone()
        plan(crowd_t)
        inside = w.run(q_crowd.cuda(), kv).clone()
    else:
        q = torch.zeros(max_batch, HQ, D, dtype=dtype, device="cuda")
        out = torch.zeros_like(q)
        plan(crowd_t)
        q.copy_(q_crowd)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            w.run(q, kv, out=out)  # warm-up outside capture
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                w.run(q, kv, out=out)
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        inside = out.clone()
        plan(alone_t)
        q.zero_()
        q[:1].copy_(q_probe)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        alone = out[:1].clone()
    assert torch.equal(alone[0], inside[at]), "the probe's output depends on the batch"
    if disable:
        assert w._planned.summary["num_merge_units"] == 0
