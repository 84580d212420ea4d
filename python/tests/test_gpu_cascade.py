"""GPU: cascade attention over a shared prefix equals plain attention.

64 requests share a prefix stored once; MultiLevelCascadeAttentionWrapper
attends to the prefix as one level (all queries as one block row) and to each
request's own pages as the second, merging by LSE; the result must equal
decode over each request's full page table. Skipped without torch/GPU.
"""

import pytest

import attn

pytestmark = pytest.mark.gpu


def test_cascade_equals_plain_decode():
    import torch
    gen = torch.Generator().manual_seed(5)
    batch, page, hq, hkv, d, dtype = 16, 16, 32, 8, 128, torch.bfloat16
    prefix_pages, own = 16, torch.randint(1, 9, (batch,), generator=gen)
    last = torch.randint(1, page + 1, (batch,), generator=gen).int()
    pool = prefix_pages + int(own.sum()) + 3
    perm = torch.randperm(pool, generator=gen).int()
    prefix, rest = perm[:prefix_pages], perm[prefix_pages:]
    kv = torch.randn(pool, 2, page, hkv, d, generator=gen).to(dtype).cuda()
    q = torch.randn(batch, hq, d, generator=gen).to(dtype).cuda()

    # Level 0: every query against the shared prefix (full pages).
    qo0 = torch.tensor([0, batch], dtype=torch.int32)
    kv0 = torch.tensor([0, prefix_pages], dtype=torch.int32)
    last0 = torch.tensor([page], dtype=torch.int32)
    # Level 1: each request's own pages.
    qo1 = torch.arange(batch + 1, dtype=torch.int32)
    kv1 = torch.zeros(batch + 1, dtype=torch.int32)
    kv1[1:] = own.cumsum(0)
    own_pages = rest[:int(own.sum())]
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    cascade = attn.MultiLevelCascadeAttentionWrapper(2, ws, "NHD")
    cascade.plan([qo0, qo1], [kv0, kv1], [prefix.cuda(), own_pages.cuda()], [last0, last], hq, hkv, d, page,
                 causal=False, q_data_type=dtype)
    out = cascade.run(q, kv)

    # The same attention as one decode over prefix + own pages per request.
    full_indptr = torch.zeros(batch + 1, dtype=torch.int32)
    full_indptr[1:] = (own + prefix_pages).cumsum(0)
    full = torch.cat([torch.cat([prefix, own_pages[kv1[b]:kv1[b + 1]]]) for b in range(batch)])
    decode = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
    decode.plan(full_indptr, full.cuda(), last, hq, hkv, d, page, q_data_type=dtype)
    ref = decode.run(q, kv)
    torch.testing.assert_close(out.float(), ref.float(), atol=2e-2, rtol=2e-2)
