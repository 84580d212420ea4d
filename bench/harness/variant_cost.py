#!/usr/bin/env python3
"""What a variant costs a prefill: P2's sixteen ragged causal requests (each
request's K/V contiguous) through attn's ragged prefill wrapper, plain and
with each variant the kernel packs hold for that shape (soft-cap 30, ALiBi,
RoPE on q and k, and the causal pattern given as a custom mask),
each checked against a float32 reference of the same variant.

    ATTN_CACHE_DIR=out/kernels python3 bench/harness/variant_cost.py [plain,soft_cap,alibi,rope,causal_mask]

Figures: triton do_bench median (L2 flushed between calls) and TFLOP/s of
the causal FLOPs (a variant's extra math is not counted). Needs what
bench/gpu_run.sh sets up (PYTHONPATH, ATTN_CACHE_DIR)."""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads  # noqa: E402
from reference import rel_error  # noqa: E402
from workloads import HKV, HQ  # noqa: E402

SOFT_CAP = 30.0
VARIANTS = {
    "plain": {},
    "soft_cap": {"logits_soft_cap": SOFT_CAP},
    "alibi": {"pos_encoding_mode": "ALIBI"},
    "rope": {"pos_encoding_mode": "ROPE_LLAMA"},
    "rope_llama31": {"pos_encoding_mode": "ROPE_LLAMA31"},
    # The causal pattern as a custom mask (plan's causal=False): every tile is
    # computed and each score reads its bit, so the figure (still of the causal
    # FLOPs) prices the mask, not the variant; checked against plain causal.
    "causal_mask": {},
}
ROPE_THETA = {"rope": 1e4, "rope_llama31": 5e5}  # the defaults (FlashInfer's; Llama-3.1's), rope_scale 1
LLAMA31 = (8.0, 1.0, 4.0, 8192.0)  # rope_factor, low and high freq factors, original context: attn's defaults


def alibi_slopes(heads):
    """ALiBi's head slopes (2^(-8 (h + 1) / heads) for a power-of-two count)."""
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)])


def inv_freq(d, variant, device):
    """RoPE's frequencies of a head dim, with Llama-3.1's scaling for rope_llama31."""
    f = ROPE_THETA[variant] ** (-torch.arange(0, d // 2, device=device, dtype=torch.float64) * 2 / d)
    if variant == "rope_llama31":
        factor, low, high, ctx = LLAMA31
        wavelen = 2 * math.pi / f
        smooth = (ctx / wavelen - low) / (high - low)
        blend = (1 - smooth) * f / factor + smooth * f
        f = torch.where(wavelen < ctx / high, f, torch.where(wavelen > ctx / low, f / factor, blend))
    return f.float()


def rope(x, pos, variant):
    """Rotate-half (NeoX) RoPE of x [n, heads, D] at positions pos [n], float32."""
    d = x.shape[-1]
    angle = pos.float()[:, None] * inv_freq(d, variant, x.device)[None]
    cos, sin = angle.cos()[:, None], angle.sin()[:, None]
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def causal_mask(w):
    """The bool custom mask [sum(qo_len * kv_len)] that is causal attention."""
    rows = []
    for qo, kv in zip(w["qo_lens"], w["kv_lens"]):
        pos = kv - qo + torch.arange(qo, device="cuda")
        rows.append((torch.arange(kv, device="cuda")[None, :] <= pos[:, None]).flatten())
    return torch.cat(rows)


def reference(w, variant, row_chunk=1024):
    """Float32 output [rows, HQ, D] of the variant (causal, bottom-right aligned)."""
    q = w["q"]
    d, group = q.shape[2], HQ // HKV
    scale = d ** -0.5
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    slopes = alibi_slopes(HQ).to(q.device)[:, None, None]
    start = row = 0
    for qo, kv in zip(w["qo_lens"], w["kv_lens"]):
        k = w["k"][start:start + kv].float()
        if variant in ROPE_THETA:
            k = rope(k, torch.arange(kv, device=q.device), variant)
        k = k.repeat_interleave(group, dim=1).transpose(0, 1)
        v = w["v"][start:start + kv].float().repeat_interleave(group, dim=1).transpose(0, 1)
        start += kv
        for r0 in range(0, qo, row_chunk):
            r1 = min(qo, r0 + row_chunk)
            qb = q[row + r0:row + r1].float()
            if variant in ROPE_THETA:
                qb = rope(qb, kv - qo + torch.arange(r0, r1, device=q.device), variant)
            qb = qb.transpose(0, 1)
            s = torch.matmul(qb, k.transpose(1, 2)) * scale
            pos = kv - qo + torch.arange(r0, r1, device=q.device)
            keys = torch.arange(kv, device=q.device)
            if variant == "soft_cap":
                s = SOFT_CAP * torch.tanh(s / SOFT_CAP)
            elif variant == "alibi":
                s = s + slopes * (keys[None, :] - pos[:, None]).float()[None]
            s = s.masked_fill(~(keys[None, :] <= pos[:, None])[None], float("-inf"))
            out[row + r0:row + r1] = torch.matmul(torch.softmax(s, dim=-1), v).transpose(0, 1)
        row += qo
    return out


def main():
    import attn
    import triton.testing
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(VARIANTS)
    w = workloads.prefill("P2", workloads.P2_LENS, paged=False)
    qo = w["qo_indptr"].cpu()
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for name in names:
        wr = attn.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD")
        kwargs = dict(VARIANTS[name])
        if name == "causal_mask":
            kwargs["custom_mask"] = causal_mask(w)
        wr.plan(qo, qo, HQ, HKV, w["head_dim"], causal=name != "causal_mask", q_data_type=torch.bfloat16,
                **kwargs)
        fn = lambda: wr.run(w["q"], w["k"], w["v"])  # noqa: E731
        err = rel_error(fn(), reference(w, name))
        ms = triton.testing.do_bench(fn, warmup=25, rep=300, return_mode="median")
        print(f"P2 ragged {name:9s} {ms:.4f} ms {w['flops'] / ms / 1e9:6.0f} TFLOP/s err {err:.1e}",
              flush=True)
        assert math.isfinite(err) and err < 2e-2, f"{name}: error {err:.1e} against the float32 reference"


if __name__ == "__main__":
    main()
