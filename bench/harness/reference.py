"""Float32 reference attention (docs/Semantics.md) on the GPU, and the error
metric every system is checked with: ||out - ref|| / ||ref||."""

import torch

from workloads import HKV, PAGE


def request_kv(w, b):
    """Keys and values of request b, [kv_len, HKV, D]."""
    n = w["kv_lens"][b]
    if "k_cache" in w:
        lo, hi = int(w["kv_indptr"][b]), int(w["kv_indptr"][b + 1])
        pages = w["kv_indices"][lo:hi].long()
        d = w["k_cache"].shape[-1]
        k = w["k_cache"][pages].reshape(-1, HKV, d)[:n]
        v = w["v_cache"][pages].reshape(-1, HKV, d)[:n]
        return k, v
    start = sum(w["kv_lens"][:b])
    return w["k"][start:start + n], w["v"][start:start + n]


def reference(w, row_chunk=1024):
    """Output [rows, HQ, D] in float32 (causal, bottom-right aligned)."""
    q = w["q"]
    hq, d = q.shape[1], q.shape[2]
    group = hq // HKV
    scale = d ** -0.5
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    row = 0
    for b, qo in enumerate(w["qo_lens"]):
        k, v = request_kv(w, b)
        k = k.float().repeat_interleave(group, dim=1).transpose(0, 1)  # [HQ, kv, D]
        v = v.float().repeat_interleave(group, dim=1).transpose(0, 1)
        kv = k.shape[1]
        for r0 in range(0, qo, row_chunk):
            r1 = min(qo, r0 + row_chunk)
            qb = q[row + r0:row + r1].float().transpose(0, 1)  # [HQ, r, D]
            s = torch.matmul(qb, k.transpose(1, 2)) * scale
            if w.get("causal"):
                pos = kv - qo + torch.arange(r0, r1, device=q.device)
                keep = torch.arange(kv, device=q.device)[None, :] <= pos[:, None]
                s = s.masked_fill(~keep[None], float("-inf"))
            p = torch.softmax(s, dim=-1)
            out[row + r0:row + r1] = torch.matmul(p, v).transpose(0, 1)
        row += qo
    return out


def rel_error(out, ref):
    out = out.float().reshape(ref.shape)
    if not torch.isfinite(out).all():
        return float("nan")
    return float((out - ref).norm() / ref.norm())
