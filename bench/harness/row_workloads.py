"""The row kernels' workloads (docs/Benchmarks.md): memory-bound, so every
figure is GB/s against the copy ceiling of the same run, side by side with
the PyTorch code attn used before the kernels (eager and torch.compile) and
a plain device copy of the same number of bytes.

- M1: merge of two attention states [16384 rows x 32 heads x 128] bf16 with
  their float32 LSEs (attn.merge_state): reads both, writes one.
- A1: append of 8192 new tokens (Llama-3-8B's 8 KV heads x 128, bf16) into a
  paged cache of 16-token pages, 64 requests of 128 new tokens each at
  random offsets, pages scattered (attn.append_paged_kv_cache).
"""

import math

import torch

HQ, HKV, D, PAGE = 32, 8, 128, 16


def _gen(seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return g


def _copy_of(nbytes):
    """A device copy reading and writing nbytes / 2 each: the bandwidth a
    transfer of this size can reach here."""
    src = torch.empty(nbytes // 4, dtype=torch.int16, device="cuda").random_()
    dst = torch.empty_like(src)
    fn = lambda: dst.copy_(src)  # noqa: E731
    fn.unchecked = True  # a baseline: nothing to check
    return fn


def torch_merge(va, sa, vb, sb):
    """The PyTorch merge (float32 math, cast back), as attn ran it before."""
    m = torch.maximum(sa, sb)
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    wa, wb = torch.exp2(sa - m), torch.exp2(sb - m)
    total = wa + wb
    v = (va.float() * wa[..., None] + vb.float() * wb[..., None]) / torch.where(total > 0, total, 1)[..., None]
    s = torch.where(total > 0, torch.log2(total) + m, float("-inf"))
    return v.to(va.dtype), s


def merge(name, rows=16384, heads=HQ, seed=5):
    g = _gen(seed)
    va, vb = (torch.randn(rows, heads, D, generator=g, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    sa, sb = ((torch.randn(rows, heads, generator=g, device="cuda") * 4) for _ in range(2))
    nbytes = 3 * (va.numel() * 2 + sa.numel() * 4)

    def systems():
        import attn
        compiled = torch.compile(torch_merge, dynamic=False)
        return [("attn", lambda: attn.merge_state(va, sa, vb, sb)[0]),
                ("pytorch (eager)", lambda: torch_merge(va, sa, vb, sb)[0]),
                ("pytorch (torch.compile)", lambda: compiled(va, sa, vb, sb)[0]),
                ("copy of the same bytes", _copy_of(nbytes))]

    def reference():
        v, _ = torch_merge(va.float(), sa, vb.float(), sb)
        return v

    return dict(name=name, kind="rows", metric="GBps", bytes=nbytes, systems=systems, reference=reference)


def append(name, requests=64, new_tokens=128, cache_tokens=2048, seed=7):
    g = torch.Generator().manual_seed(seed)
    pages_per = cache_tokens // PAGE
    pages = requests * pages_per
    indices = torch.randperm(pages, generator=g).int()
    indptr = torch.arange(0, pages + 1, pages_per, dtype=torch.int32)
    start = torch.randint(0, cache_tokens - new_tokens, (requests,), generator=g)
    nnz = requests * new_tokens
    batch = torch.arange(requests).repeat_interleave(new_tokens).int()
    pos = (start.repeat_interleave(new_tokens) + torch.arange(new_tokens).repeat(requests)).int()
    gd = _gen(seed)
    key = torch.randn(nnz, HKV, D, generator=gd, device="cuda", dtype=torch.bfloat16)
    value = torch.randn(nnz, HKV, D, generator=gd, device="cuda", dtype=torch.bfloat16)
    k_cache = torch.zeros(pages, PAGE, HKV, D, device="cuda", dtype=torch.bfloat16)
    v_cache = torch.zeros_like(k_cache)
    batch, pos, indices, indptr = batch.cuda(), pos.cuda(), indices.cuda(), indptr.cuda()
    last = torch.full((requests,), PAGE, dtype=torch.int32, device="cuda")
    nbytes = 4 * key.numel() * 2  # K and V, each read once and written once

    def torch_append(kc, vc):
        p = indices.long()[indptr.long()[batch.long()] + pos.long() // PAGE]
        slot = pos.long() % PAGE
        kc[p, slot] = key
        vc[p, slot] = value
        return kc

    def systems():
        import attn
        compiled = torch.compile(torch_append, dynamic=False)
        return [("attn", lambda: (attn.append_paged_kv_cache(key, value, batch, pos, (k_cache, v_cache), indices,
                                                             indptr, last), k_cache)[1]),
                ("pytorch (eager)", lambda: torch_append(k_cache, v_cache)),
                ("pytorch (torch.compile)", lambda: compiled(k_cache, v_cache)),
                ("copy of the same bytes", _copy_of(nbytes))]

    def reference():
        kc = torch.zeros_like(k_cache)
        return torch_append(kc, torch.zeros_like(v_cache)).float()

    return dict(name=name, kind="rows", metric="GBps", bytes=nbytes, systems=systems, reference=reference)


def all_workloads(smoke=False):
    if smoke:
        return [("M1", lambda: merge("M1", rows=256)), ("A1", lambda: append("A1", requests=4))]
    return [("M1", lambda: merge("M1")), ("A1", lambda: append("A1"))]
