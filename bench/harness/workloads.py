"""The benchmark's workloads (docs/Benchmarks.md): bf16, head_dim 128, 32 query
/ 8 KV heads, 16-token pages (NHD), pages of a request scattered by a seeded
random permutation of the page pool, inputs N(0, 1).

Each workload is a dict of tensors on the GPU plus the numbers its figure
needs (KV bytes for decode and verification, causal FLOPs for prefill);
``metric`` says which figure it reports ("GBps" against the copy ceiling or
"TFLOPs" against the matmul ceiling)."""

import math

import torch

HQ, HKV, HEAD_DIM, PAGE = 32, 8, 128, 16
P2_LENS = [1024, 256, 3840, 2048, 512, 3072, 1536, 4096, 768, 2816, 1280,
           3584, 1792, 2304, 3328, 2560]


def _gen(seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return g


def paged_cache(kv_lens, head_dim=HEAD_DIM, seed=0, shared_prefix=0):
    """K/V pools [pages, PAGE, HKV, D] with each request's pages scattered.

    With shared_prefix > 0 every request starts with the same prefix pages
    (stored once) followed by its own pages."""
    g = _gen(seed)
    prefix_pages = shared_prefix // PAGE
    own = [math.ceil((n - shared_prefix) / PAGE) for n in kv_lens]
    total = prefix_pages + sum(own)
    perm = torch.randperm(total, generator=torch.Generator().manual_seed(seed))
    k = torch.randn(total, PAGE, HKV, head_dim, generator=g, device="cuda",
                    dtype=torch.bfloat16)
    v = torch.randn(total, PAGE, HKV, head_dim, generator=g, device="cuda",
                    dtype=torch.bfloat16)
    prefix = perm[:prefix_pages].tolist()
    indices, indptr, last = [], [0], []
    cursor = prefix_pages
    for n, m in zip(kv_lens, own):
        pages = prefix + perm[cursor:cursor + m].tolist()
        cursor += m
        indices += pages
        indptr.append(len(indices))
        last.append(n - (len(pages) - 1) * PAGE)
    as_i32 = lambda x: torch.tensor(x, dtype=torch.int32, device="cuda")
    return dict(k_cache=k, v_cache=v, kv_indptr=as_i32(indptr),
                kv_indices=as_i32(indices), kv_last_page_len=as_i32(last),
                kv_lens=list(kv_lens), prefix_pages=prefix,
                prefix_len=shared_prefix)


def decode(name, kv_lens, seed=0, shared_prefix=0):
    w = paged_cache(kv_lens, seed=seed, shared_prefix=shared_prefix)
    b = len(kv_lens)
    w["q"] = torch.randn(b, HQ, HEAD_DIM, generator=_gen(seed + 1),
                         device="cuda", dtype=torch.bfloat16)
    w["qo_lens"] = [1] * b
    w.update(name=name, kind="decode", head_dim=HEAD_DIM, causal=True, metric="GBps")
    # Each request's KV is read once (a shared prefix once in total), plus q
    # and o: what a memory-bound kernel must move.
    stored_tokens = shared_prefix + sum(n - shared_prefix for n in kv_lens)
    w["bytes"] = (stored_tokens * HKV * HEAD_DIM * 2 * 2 +
                  2 * b * HQ * HEAD_DIM * 2)
    return w


def prefill(name, lens, head_dim=HEAD_DIM, paged=True, seed=0):
    g = _gen(seed + 2)
    total = sum(lens)
    w = paged_cache(lens, head_dim=head_dim, seed=seed) if paged else dict(
        k=torch.randn(total, HKV, head_dim, generator=g, device="cuda",
                      dtype=torch.bfloat16),
        v=torch.randn(total, HKV, head_dim, generator=g, device="cuda",
                      dtype=torch.bfloat16),
        kv_lens=list(lens))
    w["q"] = torch.randn(total, HQ, head_dim, generator=g, device="cuda",
                         dtype=torch.bfloat16)
    w["qo_lens"] = list(lens)
    w["qo_indptr"] = torch.tensor([0] + list(itertools_accumulate(lens)),
                                  dtype=torch.int32, device="cuda")
    w.update(name=name, kind="prefill", head_dim=head_dim, causal=True,
             paged=paged, metric="TFLOPs")
    # Causal: row i of a request of n sees i + 1 keys; 2 matmuls, 2 FLOP/MAC.
    w["flops"] = sum(4 * HQ * head_dim * n * (n + 1) // 2 for n in lens)
    return w


# item_cost.py's batches: the same causal query tokens as requests of n, so
# that every batch has the same work items and only the K/V tiles grow with n.
ITEM_TOKENS = 32768


def items_batch(n):
    """item_cost.py's batch of ITEM_TOKENS tokens as requests of n (ragged
    contiguous K/V); profile_workload.py builds it as `items-L<n>`."""
    return prefill(f"items-L{n}", [n] * (ITEM_TOKENS // n), paged=False)


def append(name, qo_lens, kv_lens, metric, seed=0):
    """New query tokens at the end of paged caches (the query tokens are the
    last qo_len of a request's kv_len keys, causal, bottom-right aligned):
    speculative verification (a few tokens) or chunked prefill (a chunk)."""
    w = paged_cache(kv_lens, seed=seed)
    total = sum(qo_lens)
    w["q"] = torch.randn(total, HQ, HEAD_DIM, generator=_gen(seed + 3),
                         device="cuda", dtype=torch.bfloat16)
    w["qo_lens"] = list(qo_lens)
    w["qo_indptr"] = torch.tensor([0] + list(itertools_accumulate(qo_lens)),
                                  dtype=torch.int32, device="cuda")
    w.update(name=name, kind="append", head_dim=HEAD_DIM, causal=True,
             paged=True, metric=metric)
    # Row i of a request sees kv - qo + i + 1 keys; 2 matmuls, 2 FLOP/MAC.
    w["flops"] = sum(4 * HQ * HEAD_DIM * sum(kv - qo + i + 1 for i in range(qo))
                     for qo, kv in zip(qo_lens, kv_lens))
    # Each request's KV read once, plus q and o.
    w["bytes"] = (sum(kv_lens) * HKV * HEAD_DIM * 2 * 2 +
                  2 * total * HQ * HEAD_DIM * 2)
    return w


def itertools_accumulate(xs):
    s = 0
    for x in xs:
        s += x
        yield s


def skewed_lens():
    """D3: 32768 tokens for the requests at the first four entries of
    torch.randperm(64) from a CPU generator seeded 0, 512 for the others."""
    lens = [512] * 64
    for i in torch.randperm(64, generator=torch.Generator().manual_seed(0))[:4]:
        lens[int(i)] = 32768
    return lens


def all_workloads(smoke=False):
    """(id, builder) pairs; builders allocate lazily so one lives at a time."""
    if smoke:
        return [("D1", lambda: decode("D1", [256] * 8)),
                ("P1", lambda: prefill("P1", [512], paged=False))]
    return [
        ("D1", lambda: decode("D1", [2048] * 64)),
        ("D2", lambda: decode("D2", [32768] * 16)),
        ("D3", lambda: decode("D3", skewed_lens())),
        ("D4", lambda: decode("D4", [131072])),
        ("D5", lambda: decode("D5", [4096 + 128] * 64, shared_prefix=4096)),
        ("P1", lambda: prefill("P1", [8192], paged=False)),
        ("P2", lambda: prefill("P2", P2_LENS, paged=True)),
        ("P3-d64", lambda: prefill("P3-d64", [8192], head_dim=64, paged=False)),
        ("P3-d256", lambda: prefill("P3-d256", [8192], head_dim=256, paged=False)),
        ("P4", lambda: append("P4", [8] * 64, [2048] * 64, "GBps")),
        ("P5", lambda: append("P5", [512] * 16, [4096] * 16, "TFLOPs")),
    ]
