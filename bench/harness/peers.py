"""PyTorch's attention, the peers attn is measured against in the same run:
SDPA with each backend (on KV gathered out of the pages: the gather is part
of the time, as it is for an engine that uses SDPA with a paged cache), and
FlexAttention with a BlockMask over the page pool (no gather).

Each factory returns (name, fn) with fn() -> output [rows, HQ, D]; a peer
that cannot serve a shape is listed with the exception that says why."""

import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from workloads import HKV, PAGE


# SDPA warns for every backend it cannot use; the rows say it instead.
warnings.filterwarnings("ignore", module="torch.nn.functional")
warnings.filterwarnings("ignore", category=UserWarning)


BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
}


def _token_index(w):
    """Flat pool token ids of every request, padded to the longest: [B, L]."""
    lens = w["kv_lens"]
    longest = max(lens)
    idx = torch.zeros(len(lens), longest, dtype=torch.long, device="cuda")
    for b, n in enumerate(lens):
        lo, hi = int(w["kv_indptr"][b]), int(w["kv_indptr"][b + 1])
        pages = w["kv_indices"][lo:hi].long()
        tok = (pages[:, None] * PAGE + torch.arange(PAGE, device="cuda")).reshape(-1)
        idx[b, :n] = tok[:n]
    return idx


def _gather_kv(w, backend, group):
    """What a paged-cache SDPA peer times besides SDPA itself: a function
    gathering the requests' K/V into [B, HKV, L, D] (expanded to all query
    heads for the memory-efficient backend, which has no GQA)."""
    d = w["head_dim"]
    idx = _token_index(w)
    kf = w["k_cache"].reshape(-1, HKV, d)
    vf = w["v_cache"].reshape(-1, HKV, d)

    def gather():
        k = kf[idx].transpose(1, 2)
        v = vf[idx].transpose(1, 2)
        if backend == "efficient":
            k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        return k, v

    return gather


def sdpa_decode(w, backend):
    """Gather each request's pages into a padded batch, then SDPA."""
    lens = torch.tensor(w["kv_lens"], device="cuda")
    uniform = bool((lens == lens[0]).all())
    mask = None if uniform else (
        torch.arange(max(w["kv_lens"]), device="cuda")[None, :] < lens[:, None])[:, None, None, :]
    q = w["q"][:, :, None, :]  # [B, HQ, 1, D]
    gather = _gather_kv(w, backend, w["q"].shape[1] // HKV)

    def fn():
        k, v = gather()
        with sdpa_kernel(BACKENDS[backend]):
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                               enable_gqa=True)
        return o[:, :, 0, :]

    return f"sdpa-{backend} (gather" + (", +expand)" if backend == "efficient" else ")"), fn


def sdpa_append(w, backend):
    """New tokens at the end of paged caches of one length: gather the pages
    into a [B, HKV, L, D] batch, then one SDPA call with a bottom-right causal
    mask (a dense boolean mask: the query rows are the last qo_len keys)."""
    qo, kv = w["qo_lens"][0], w["kv_lens"][0]
    if set(w["qo_lens"]) != {qo} or set(w["kv_lens"]) != {kv}:
        raise ValueError("the peers' batched call needs one qo_len and one kv_len")
    d = w["head_dim"]
    b = len(w["qo_lens"])
    q = w["q"].reshape(b, qo, -1, d).transpose(1, 2)  # [B, HQ, qo, D]
    pos = torch.arange(kv - qo, kv, device="cuda")
    mask = (torch.arange(kv, device="cuda")[None, :] <= pos[:, None])[None, None]
    gather = _gather_kv(w, backend, q.shape[1] // HKV)

    def fn():
        k, v = gather()
        with sdpa_kernel(BACKENDS[backend]):
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return o.transpose(1, 2).reshape(b * qo, -1, d)

    return f"sdpa-{backend} (gather, mask" + (", +expand)" if backend == "efficient" else ")"), fn


def sdpa_prefill(w, backend):
    if not w.get("paged"):
        q = w["q"].transpose(0, 1)[None]  # [1, HQ, L, D]
        k = w["k"].transpose(0, 1)[None]
        v = w["v"].transpose(0, 1)[None]
        group = q.shape[1] // HKV

        def fn():
            kk, vv = k, v
            if backend == "efficient":  # no GQA support: expand the heads
                kk, vv = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
            with sdpa_kernel(BACKENDS[backend]):
                o = F.scaled_dot_product_attention(q, kk, vv, is_causal=True,
                                                   enable_gqa=True)
            return o[0].transpose(0, 1)

        return f"sdpa-{backend}" + (" (+expand)" if backend == "efficient" else ""), fn

    # Paged prefill: gather each request's pages, one SDPA call per request
    # (qo_len == kv_len, so SDPA's top-left causal is the bottom-right one).
    from reference import request_kv
    starts = [0]
    for n in w["qo_lens"]:
        starts.append(starts[-1] + n)

    def fn():
        outs = []
        for b in range(len(w["qo_lens"])):
            k, v = request_kv(w, b)
            qb = w["q"][starts[b]:starts[b + 1]].transpose(0, 1)[None]
            with sdpa_kernel(BACKENDS[backend]):
                o = F.scaled_dot_product_attention(
                    qb, k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                    is_causal=True, enable_gqa=True)
            outs.append(o[0].transpose(0, 1))
        return torch.cat(outs)

    return f"sdpa-{backend} (gather, per request)", fn


_flex = None


def _compiled_flex():
    global _flex
    if _flex is None:
        from torch.nn.attention.flex_attention import flex_attention
        _flex = torch.compile(flex_attention, dynamic=False)
    return _flex


def flex(w):
    """FlexAttention over the whole page pool: a BlockMask says which pool
    tokens each query row may see (its request's pages, causally)."""
    from torch.nn.attention.flex_attention import create_block_mask
    d = w["head_dim"]
    if "k_cache" in w:
        pool_k = w["k_cache"].reshape(-1, HKV, d).transpose(0, 1)[None].contiguous()
        pool_v = w["v_cache"].reshape(-1, HKV, d).transpose(0, 1)[None].contiguous()
        tokens = pool_k.shape[2]
        owner = torch.full((tokens,), -1, dtype=torch.int32, device="cuda")
        pos = torch.zeros(tokens, dtype=torch.int32, device="cuda")
        idx = _token_index(w)
        for b, n in enumerate(w["kv_lens"]):
            # A shared prefix belongs to every request: the owner table is
            # per token, so shared pages are handled below by `shared`.
            owner[idx[b, :n]] = b
            pos[idx[b, :n]] = torch.arange(n, dtype=torch.int32, device="cuda")
        shared = torch.zeros(tokens, dtype=torch.bool, device="cuda")
        if w.get("prefix_len"):
            pages = torch.tensor(w["prefix_pages"], device="cuda").long()
            tok = (pages[:, None] * PAGE + torch.arange(PAGE, device="cuda")).reshape(-1)
            shared[tok] = True
    else:
        pool_k = w["k"].transpose(0, 1)[None]
        pool_v = w["v"].transpose(0, 1)[None]
        tokens = pool_k.shape[2]
        owner = torch.cat([torch.full((n,), b, dtype=torch.int32, device="cuda")
                           for b, n in enumerate(w["kv_lens"])])
        pos = torch.cat([torch.arange(n, dtype=torch.int32, device="cuda")
                         for n in w["kv_lens"]])
        shared = torch.zeros(tokens, dtype=torch.bool, device="cuda")
    q_doc = torch.cat([torch.full((n,), b, dtype=torch.int32, device="cuda")
                       for b, n in enumerate(w["qo_lens"])])
    q_pos = torch.cat([torch.arange(kv - qo, kv, dtype=torch.int32, device="cuda")
                       for qo, kv in zip(w["qo_lens"], w["kv_lens"])])
    rows = q_doc.shape[0]

    def mask_mod(b, h, q_idx, kv_idx):
        mine = (owner[kv_idx] == q_doc[q_idx]) | shared[kv_idx]
        return mine & (pos[kv_idx] <= q_pos[q_idx])

    block_mask = create_block_mask(mask_mod, None, None, rows, tokens,
                                   device="cuda")
    q = w["q"].transpose(0, 1)[None]
    attention = _compiled_flex()

    def make(options):
        def fn():
            o = attention(q, pool_k, pool_v, block_mask=block_mask,
                          enable_gqa=True, kernel_options=options)
            return o[0].transpose(0, 1)
        return fn

    # Short queries take flex's decoding kernel, which has no configuration
    # for some GQA shapes; the general kernel then serves them.
    error = None
    for options, name in ((None, "flex (page pool)"),
                          ({"FORCE_USE_FLEX_ATTENTION": True},
                           "flex (page pool, general kernel)")):
        try:
            fn = make(options)
            fn()
            torch.cuda.synchronize()
            return name, fn
        except Exception as e:
            error = e
    raise error


def peers_for(w, with_flex=True):
    """Every peer that applies to workload w, as (name, fn) or (name, reason);
    with_flex=False leaves out FlexAttention (it compiles per shape)."""
    out = []
    for backend in BACKENDS:
        try:
            if w["kind"] == "decode":
                out.append(sdpa_decode(w, backend))
            elif w["kind"] == "append":
                out.append(sdpa_append(w, backend))
            else:
                out.append(sdpa_prefill(w, backend))
        except Exception as e:  # a backend that cannot serve the shape
            out.append((f"sdpa-{backend}", e))
    if not with_flex:
        return out
    try:
        out.append(flex(w))
    except Exception as e:
        out.append(("flex (page pool)", e))
    return out
