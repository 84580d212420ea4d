"""GPU: speculative token-tree verification with custom masks.

Each request has a committed prefix in the KV cache and a tree of draft
tokens appended after it; draft token t sees the whole prefix and its
ancestors in the tree (itself included). The tree is verified in one
prefill over the paged cache with a custom mask (FlashInfer's way):
page size 1 with scattered explicit kv_indices (the column-vector BSR
form, `#attn.bsr<block_cols = 1>`) and page size 16, against a float32
PyTorch reference with the same mask.

Skipped without torch, CUDA or a GPU. On a runtime-only build the kernels
come from ATTN_CACHE_DIR (python -m attn.precompile --kinds prefill
--custom-mask --page-size 1,16; --kinds decode --page-size 1).
"""

import pytest

import attn
from gpu_reference import attention, make_tree_mask

pytestmark = pytest.mark.gpu

HQ, HKV, D = 32, 8, 128


def build_batch(page_size, seed, prefixes=(37, 200, 5, 1000), drafts=(8, 12, 16, 11)):
    """A paged cache holding prefix + draft keys per request, pages shuffled."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    dtype = torch.bfloat16
    kv_lens = [p + n for p, n in zip(prefixes, drafts)]
    pages_per = [(kv + page_size - 1) // page_size for kv in kv_lens]
    num_pages = sum(pages_per) + 7
    perm = torch.randperm(num_pages, generator=gen)
    k_cache = torch.randn(num_pages, page_size, HKV, D, generator=gen).to(dtype)
    v_cache = torch.randn(num_pages, page_size, HKV, D, generator=gen).to(dtype)
    indptr, indices, last, k_tok, v_tok, p0 = [0], [], [], [], [], 0
    for kv, np_ in zip(kv_lens, pages_per):
        pages = perm[p0:p0 + np_]
        p0 += np_
        indices += pages.tolist()
        indptr.append(indptr[-1] + np_)
        last.append(kv - (np_ - 1) * page_size)
        k_tok.append(k_cache[pages].reshape(-1, HKV, D)[:kv])
        v_tok.append(v_cache[pages].reshape(-1, HKV, D)[:kv])
    masks = [make_tree_mask(torch, p, n, gen) for p, n in zip(prefixes, drafts)]
    q = torch.randn(sum(drafts), HQ, D, generator=gen).to(dtype)
    qo_indptr = torch.tensor([0] + list(torch.tensor(drafts).cumsum(0)), dtype=torch.int32)
    return dict(q=q.cuda(), k_cache=k_cache.cuda(), v_cache=v_cache.cuda(), k_tok=torch.cat(k_tok).cuda(),
                v_tok=torch.cat(v_tok).cuda(), qo_indptr=qo_indptr, kv_indptr=torch.tensor(indptr, dtype=torch.int32),
                kv_indices=torch.tensor(indices, dtype=torch.int32), last=torch.tensor(last, dtype=torch.int32),
                masks=masks, qo_lens=list(drafts), kv_lens=kv_lens)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("packed", [False, True])
def test_tree_verify_matches_reference(page_size, packed):
    import torch
    b = build_batch(page_size, seed=20 + page_size)
    flat = torch.cat([m.reshape(-1) for m in b["masks"]])
    kw = {}
    if packed:
        bounds = torch.tensor([0] + [int(m.numel()) for m in b["masks"]]).cumsum(0)
        kw["packed_custom_mask"], _ = attn.segment_packbits(flat.cuda(), bounds, bitorder="little")
    else:
        kw["custom_mask"] = flat.cuda()
    w = attn.BatchPrefillWithPagedKVCacheWrapper(torch.empty(128 << 20, dtype=torch.uint8, device="cuda"), "NHD")
    # causal=True is ignored with a mask, as in FlashInfer.
    w.plan(b["qo_indptr"], b["kv_indptr"], b["kv_indices"], b["last"], HQ, HKV, D, page_size,
           causal=True, q_data_type=torch.bfloat16, **kw)
    out = torch.full_like(b["q"], float("nan"))
    o, lse = w.run(b["q"], (b["k_cache"], b["v_cache"]), out=out, return_lse=True)
    ro, rl = attention(b["q"], b["k_tok"], b["v_tok"], b["qo_lens"], b["kv_lens"], masks=b["masks"])
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, rl, atol=1e-2, rtol=1e-3)


def test_tree_mask_differs_from_causal():
    """The mask is really read: a tree answer is not the causal one."""
    import torch
    b = build_batch(1, seed=5, prefixes=(10,), drafts=(16,))
    flat = b["masks"][0].reshape(-1).cuda()
    w = attn.BatchPrefillWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    w.plan(b["qo_indptr"], b["kv_indptr"], b["kv_indices"], b["last"], HQ, HKV, D, 1, custom_mask=flat,
           q_data_type=torch.bfloat16)
    o = w.run(b["q"], (b["k_cache"], b["v_cache"]))
    causal = torch.tril(torch.ones(16, 26, dtype=torch.bool), diagonal=10)
    rc, _ = attention(b["q"], b["k_tok"], b["v_tok"], [16], [26], masks=[causal])
    rt, _ = attention(b["q"], b["k_tok"], b["v_tok"], [16], [26], masks=b["masks"])
    torch.testing.assert_close(o.float(), rt, atol=2e-2, rtol=2e-2)
    assert (o.float() - rc).abs().max() > 0.1


def test_decode_over_page_size_one():
    """After acceptance, decoding continues over the 1-token-page cache."""
    import torch
    b = build_batch(1, seed=9)
    q = b["q"][[n - 1 for n in torch.tensor(b["qo_lens"]).cumsum(0).tolist()]].contiguous()
    w = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"), "NHD")
    w.plan(b["kv_indptr"], b["kv_indices"].cuda(), b["last"], HQ, HKV, D, 1, q_data_type=torch.bfloat16)
    o, lse = w.run(q, (b["k_cache"], b["v_cache"]), return_lse=True)
    full = [torch.ones(1, kv, dtype=torch.bool) for kv in b["kv_lens"]]
    ro, rl = attention(q, b["k_tok"], b["v_tok"], [1] * len(full), b["kv_lens"], masks=full)
    torch.testing.assert_close(o.float(), ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse, rl, atol=1e-2, rtol=1e-3)
