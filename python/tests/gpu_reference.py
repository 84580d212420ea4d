"""float32 (float64 where it matters) references for the GPU tests, from docs/Semantics.md.

Positions are bottom-right aligned: query row i of a request with ``qo_len``
rows and ``kv_len`` keys sits at ``p = kv_len - qo_len + i``; key j at j.
LSE is base 2. ``rope_inv_freq`` is plain Python (tested without torch in
test_variant_params.py); everything else needs torch.
"""

import math

# Llama-3.1's RoPE scaling (the defaults of attn's pos_encoding_mode="ROPE_LLAMA31").
LLAMA31 = {"rope_factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_context": 8192.0}


def rope_inv_freq(head_dim, theta=1e4, llama31=None):
    """The head_dim / 2 inverse frequencies of rotate-half RoPE, as Python floats.

    Pair j (element j with j + head_dim / 2) turns at f_j = theta^(-2j / head_dim).
    With ``llama31`` (a dict like LLAMA31), Llama-3.1's scaling as
    BuiltinVariants.mlir's @rope_llama31 and FlashInfer define it: with
    wavelength w = 2 pi / f, keep f when w < original_context / high_freq_factor,
    use f / rope_factor when w > original_context / low_freq_factor, and in
    between blend (1 - s) f / rope_factor + s f with
    s = (original_context / w - low_freq_factor) / (high_freq_factor - low_freq_factor).
    """
    out = []
    for j in range(head_dim // 2):
        f = theta ** (-2.0 * j / head_dim)
        if llama31:
            factor, low, high, ctx = (float(llama31[k]) for k in
                                      ("rope_factor", "low_freq_factor", "high_freq_factor",
                                       "original_context"))
            wavelen = 2.0 * math.pi / f
            if wavelen < ctx / high:
                pass
            elif wavelen > ctx / low:
                f = f / factor
            else:
                smooth = (ctx / wavelen - low) / (high - low)
                f = (1.0 - smooth) * f / factor + smooth * f
        out.append(f)
    return out


def apply_rope(x, pos, inv_freq, rope_scale=1.0):
    """Rotate-half RoPE of x [n, H, D] (float32) at positions pos [n] (divided by rope_scale)."""
    import torch
    half = x.shape[-1] // 2
    f = torch.tensor(inv_freq, dtype=torch.float64, device=x.device)
    ang = (pos.double() / rope_scale)[:, None] * f[None, :]
    cos, sin = torch.cos(ang)[:, None, :].float(), torch.sin(ang)[:, None, :].float()
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def attention(q, k, v, qo_lens, kv_lens, *, sm_scale=None, causal=False, window_left=-1,
              logits_scale=None, soft_cap=None, rope=None, sinks=None, masks=None):
    """float32 attention per request; returns (o [rows, Hq, D], lse [rows, Hq] base 2).

    q [rows, Hq, D]; k, v [tokens, Hkv, D] with request b's keys at rows
    sum(kv_lens[:b]) ... Logits: s = q.k * sm_scale (* logits_scale, then
    soft-capped); rope = (inv_freq, rope_scale) rotates q at p and k at j
    first; masks[b] is a [qo, kv] bool; sinks [Hq] (scaled-logit units) join
    the denominator and the LSE only. A row that sees no key: output 0, LSE
    -inf, or the sink's LSE (sink / ln 2) with a sink.
    """
    import torch
    hq, hkv, d = q.shape[1], k.shape[1], q.shape[2]
    g = hq // hkv
    scale = 1.0 / math.sqrt(d) if sm_scale is None else sm_scale
    out, lse, r0, k0 = [], [], 0, 0
    for b, (qo, kv) in enumerate(zip(qo_lens, kv_lens)):
        qb, kb, vb = q[r0:r0 + qo].float(), k[k0:k0 + kv].float(), v[k0:k0 + kv].float()
        qpos = kv - qo + torch.arange(qo, device=q.device)
        kpos = torch.arange(kv, device=q.device)
        if rope is not None:
            qb, kb = apply_rope(qb, qpos, *rope), apply_rope(kb, kpos, *rope)
        kb, vb = kb.repeat_interleave(g, 1), vb.repeat_interleave(g, 1)
        s = torch.einsum("qhd,khd->hqk", qb, kb) * scale
        if logits_scale is not None:
            s = s * logits_scale
        if soft_cap:
            s = soft_cap * torch.tanh(s / soft_cap)
        keep = torch.ones(qo, kv, dtype=torch.bool, device=q.device)
        if masks is not None:
            keep &= masks[b].to(q.device)
        if causal:
            keep &= kpos[None, :] <= qpos[:, None]
        if window_left >= 0:
            keep &= kpos[None, :] >= (qpos - window_left)[:, None]
        s = s.masked_fill(~keep[None], float("-inf"))
        if sinks is not None:
            sink = sinks.float().to(q.device)[:, None, None].expand(hq, qo, 1)
            s = torch.cat([s, sink], -1)
        l = torch.logsumexp(s, -1)  # [Hq, qo]
        p = torch.exp(s - l[..., None]).nan_to_num(0.0)[..., :kv]
        out.append(torch.einsum("hqk,khd->qhd", p, vb))
        lse.append((l / math.log(2)).transpose(0, 1))
        r0, k0 = r0 + qo, k0 + kv
    return torch.cat(out), torch.cat(lse)


def paged_batch(torch, kv_lens, page, hkv, d, dtype, gen, spare_pages=5):
    """A shuffled NHD paged cache [pages, 2, page, Hkv, D] holding kv_lens tokens per request.

    Returns (kv_cache, kv_indptr, kv_indices, last_page_len, k_tok, v_tok):
    CPU int32 page tables and the requests' keys/values gathered in order.
    """
    npages = [(n + page - 1) // page for n in kv_lens]
    pool = sum(npages) + spare_pages
    perm = torch.randperm(pool, generator=gen)[:sum(npages)].int()
    kv = torch.randn(pool, 2, page, hkv, d, generator=gen).to(dtype)
    indptr = torch.tensor([0] + list(torch.tensor(npages).cumsum(0)), dtype=torch.int32)
    last = torch.tensor([n - (p - 1) * page for n, p in zip(kv_lens, npages)], dtype=torch.int32)
    ks, vs = [], []
    for b, n in enumerate(kv_lens):
        pages = perm[indptr[b]:indptr[b + 1]].long()
        ks.append(kv[pages, 0].reshape(-1, hkv, d)[:n])
        vs.append(kv[pages, 1].reshape(-1, hkv, d)[:n])
    return kv, indptr, perm, last, torch.cat(ks), torch.cat(vs)


def indptr_of(torch, lens):
    return torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32)


def make_tree_mask(torch, prefix, n, gen):
    """[n, prefix + n] bool: draft token t sees the prefix and its ancestors (and itself)."""
    parent = [-1] + [int(torch.randint(0, t, (1,), generator=gen)) for t in range(1, n)]
    m = torch.zeros(n, prefix + n, dtype=torch.bool)
    m[:, :prefix] = True
    for t in range(n):
        a = t
        while a >= 0:
            m[t, prefix + a] = True
            a = parent[a]
    return m


def rel_err(out, ref):
    """Relative Frobenius error, ignoring nothing (a NaN fails it)."""
    return float((out.float() - ref).norm() / ref.norm())
