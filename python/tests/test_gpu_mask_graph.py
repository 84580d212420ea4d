"""GPU: custom masks (token-tree verification) with CUDA graphs.

A prefill wrapper built with ``use_cuda_graph=True`` and fixed buffers
(page table, ``custom_mask_buf``, ``mask_indptr_buf``) is planned, its ``run``
captured once, then re-planned with other batches (other request counts,
prefix and draft lengths, trees) and the graph replayed; every replay is
checked against the float32 reference with that batch's masks. Outputs are
poisoned with NaN before each replay. Paged (page size 1 with scattered
indices, and 16; bool and bit-packed masks) and ragged.

Skipped without torch, CUDA or a GPU. On a runtime-only build the kernels
come from ATTN_CACHE_DIR (python -m attn.precompile --heads 32/8 --head-dim 128
--kinds prefill --custom-mask --page-size 1,16, and --kinds ragged --custom-mask).
"""

import pytest

import attn
from gpu_reference import attention, indptr_of, make_tree_mask

pytestmark = pytest.mark.gpu

HQ, HKV, D = 32, 8, 128
MAX_BATCH, MAX_ROWS, MAX_KV = 6, 96, 1200
MASK_BYTES = 1 << 16

# (prefix lengths, draft lengths) per plan; the first is the captured one.
BATCHES = [((37, 200, 5, 1000), (8, 12, 16, 11)),
           ((500, 3), (30, 2)),
           ((1, 64, 900, 17, 128, 255), (16, 16, 1, 9, 40, 14)),
           ((37, 200, 5, 1000), (8, 12, 16, 11))]


def mask_kwargs(torch, masks, packed):
    flat = torch.cat([m.reshape(-1) for m in masks]).cuda()
    if not packed:
        return {"custom_mask": flat}
    bounds = torch.tensor([0] + [int(m.numel()) for m in masks]).cumsum(0)
    return {"packed_custom_mask": attn.segment_packbits(flat, bounds, bitorder="little")[0]}


def check(torch, out, lse, q, k_tok, v_tok, drafts, kv_lens, masks):
    rows = sum(drafts)
    ro, rl = attention(q[:rows], k_tok, v_tok, list(drafts), kv_lens, masks=masks)
    torch.testing.assert_close(out[:rows].float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse[:rows], rl, atol=1e-2, rtol=1e-3)


def replay_across_plans(torch, plan, run, out, lse, check_batch):
    """Plans BATCHES[0], captures run() in a CUDA graph (after a warm-up outside
    the capture), then for every batch re-plans (all but the first), poisons
    out/lse with NaN, replays and calls check_batch(drafts, what plan returned)."""
    state = plan(*BATCHES[0])
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        run()  # warm-up outside capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            run()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    for i, (prefixes, drafts) in enumerate(BATCHES):
        if i > 0:
            state = plan(prefixes, drafts)
        out.fill_(float("nan"))
        lse.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        check_batch(drafts, state)


@pytest.mark.parametrize("page_size,packed", [(1, False), (16, True), (16, False)])
def test_paged_tree_masks_replayed_across_plans(page_size, packed):
    import torch
    gen = torch.Generator().manual_seed(50 + page_size + packed)
    pages = MAX_BATCH * ((MAX_KV + page_size - 1) // page_size) + 8
    k_cache = torch.randn(pages, page_size, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    v_cache = torch.randn(pages, page_size, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    i32 = dict(dtype=torch.int32, device="cuda")
    bufs = dict(qo_indptr_buf=torch.zeros(MAX_BATCH + 1, **i32),
                paged_kv_indptr_buf=torch.zeros(MAX_BATCH + 1, **i32),
                paged_kv_indices_buf=torch.zeros(pages, **i32),
                paged_kv_last_page_len_buf=torch.zeros(MAX_BATCH, **i32),
                custom_mask_buf=torch.zeros(MASK_BYTES, dtype=torch.uint8, device="cuda"),
                mask_indptr_buf=torch.zeros(MAX_BATCH + 1, **i32))
    w = attn.BatchPrefillWithPagedKVCacheWrapper(torch.empty(128 << 20, dtype=torch.uint8, device="cuda"), "NHD",
                                                 use_cuda_graph=True, max_total_q_rows=MAX_ROWS, **bufs)
    q = torch.zeros(MAX_ROWS, HQ, D, dtype=torch.bfloat16, device="cuda")
    out = torch.zeros_like(q)
    lse = torch.zeros(MAX_ROWS, HQ, dtype=torch.float32, device="cuda")

    def plan(prefixes, drafts):
        kv_lens = [p + n for p, n in zip(prefixes, drafts)]
        npages = [(n + page_size - 1) // page_size for n in kv_lens]
        perm = torch.randperm(pages, generator=gen)[:sum(npages)]
        kv_indptr = indptr_of(torch, npages)
        last = torch.tensor([n - (p - 1) * page_size for n, p in zip(kv_lens, npages)], dtype=torch.int32)
        ks, vs = [], []
        for b, n in enumerate(kv_lens):
            sel = perm[kv_indptr[b]:kv_indptr[b + 1]].cuda()
            ks.append(k_cache[sel].reshape(-1, HKV, D)[:n])
            vs.append(v_cache[sel].reshape(-1, HKV, D)[:n])
        masks = [make_tree_mask(torch, p, n, gen) for p, n in zip(prefixes, drafts)]
        w.plan(indptr_of(torch, drafts), kv_indptr, perm.int().cuda(), last, HQ, HKV, D, page_size,
               causal=True, q_data_type=torch.bfloat16, **mask_kwargs(torch, masks, packed))
        q[:sum(drafts)] = torch.randn(sum(drafts), HQ, D, generator=gen).to(torch.bfloat16).cuda()
        return torch.cat(ks), torch.cat(vs), kv_lens, masks

    def check_batch(drafts, state):
        k_tok, v_tok, kv_lens, masks = state
        check(torch, out, lse, q, k_tok, v_tok, drafts, kv_lens, masks)

    replay_across_plans(torch, plan, lambda: w.run(q, (k_cache, v_cache), out=out, lse=lse, return_lse=True),
                        out, lse, check_batch)

def test_ragged_tree_masks_replayed_across_plans():
    import torch
    gen = torch.Generator().manual_seed(60)
    tokens = MAX_BATCH * MAX_KV
    k = torch.randn(tokens, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    v = torch.randn(tokens, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    i32 = dict(dtype=torch.int32, device="cuda")
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(
        torch.empty(128 << 20, dtype=torch.uint8, device="cuda"), "NHD", use_cuda_graph=True,
        qo_indptr_buf=torch.zeros(MAX_BATCH + 1, **i32), kv_indptr_buf=torch.zeros(MAX_BATCH + 1, **i32),
        custom_mask_buf=torch.zeros(MASK_BYTES, dtype=torch.uint8, device="cuda"),
        mask_indptr_buf=torch.zeros(MAX_BATCH + 1, **i32), max_total_q_rows=MAX_ROWS)
    q = torch.zeros(MAX_ROWS, HQ, D, dtype=torch.bfloat16, device="cuda")
    out = torch.zeros_like(q)
    lse = torch.zeros(MAX_ROWS, HQ, dtype=torch.float32, device="cuda")

    def plan(prefixes, drafts):
        kv_lens = [p + n for p, n in zip(prefixes, drafts)]
        # New keys in the fixed k/v buffers: request b's at rows kv_indptr[b]...
        k[:sum(kv_lens)] = torch.randn(sum(kv_lens), HKV, D, generator=gen).to(torch.bfloat16).cuda()
        v[:sum(kv_lens)] = torch.randn(sum(kv_lens), HKV, D, generator=gen).to(torch.bfloat16).cuda()
        masks = [make_tree_mask(torch, p, n, gen) for p, n in zip(prefixes, drafts)]
        w.plan(indptr_of(torch, drafts), indptr_of(torch, kv_lens), HQ, HKV, D, causal=True,
               q_data_type=torch.bfloat16, **mask_kwargs(torch, masks, packed=False))
        q[:sum(drafts)] = torch.randn(sum(drafts), HQ, D, generator=gen).to(torch.bfloat16).cuda()
        return kv_lens, masks

    def check_batch(drafts, state):
        kv_lens, masks = state
        n = sum(kv_lens)
        check(torch, out, lse, q, k[:n], v[:n], drafts, kv_lens, masks)

    replay_across_plans(torch, plan, lambda: w.run(q, k, v, out=out, lse=lse, return_lse=True),
                        out, lse, check_batch)
