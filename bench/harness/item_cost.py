#!/usr/bin/env python3
"""What a prefill work item costs beside its K/V tiles: causal batches of
the same 32768 query tokens (Llama-3-8B heads, head dim 128, ragged
contiguous K/V) as B requests of L tokens, B x L fixed, through attn's
ragged prefill wrapper. With the 128-row tile and GQA pack 4 every batch
has the same items (32 tokens of a request's head group each: 8192), while
the K/V tiles they run grow with L; a line through (tiles, time) has the
items' fixed cost as its intercept and a tile's as its slope.

    ATTN_CACHE_DIR=out/kernels python3 bench/harness/item_cost.py [L,L,...]

Timing only (triton do_bench median, L2 flushed between calls); the suite
checks these kernels' results. Prints each batch, then the fit and what it
says of P1 (one request of 8192) and P2 (workloads.P2_LENS)."""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads  # noqa: E402
from workloads import HKV, HQ  # noqa: E402

TOKENS = workloads.ITEM_TOKENS
LENS = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]
KV_TILE = 128  # the 128-row tile's K/V tile at head dim 128 (chooseTile)


def counts(lens, rows=128, pack=HQ // HKV):
    """(items, K/V tiles) of causal requests of `lens` tokens: a query tile
    of rows / pack tokens of one head group sees the keys up to its last."""
    per = rows // pack
    items = tiles = 0
    for n in lens:
        for t0 in range(0, n, per):
            items += 1
            tiles += math.ceil(min(n, t0 + per) / KV_TILE)
    return items * HKV, tiles * HKV


def fit(points):
    """Least squares time = a + b x tiles over (tiles, ms) points."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    b = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return my - b * mx, b


def main():
    import attn
    import triton.testing
    lens = [int(x) for x in sys.argv[1].split(",")] if len(sys.argv) > 1 else LENS
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    points = []
    print(f"{'L':>6} {'B':>4} {'items':>6} {'planned':>7} {'tiles':>7} {'ms':>8} {'TFLOP/s':>8}")
    for n in lens:
        b = TOKENS // n
        w = workloads.items_batch(n)
        qo = w["qo_indptr"].cpu()
        wr = attn.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD")
        wr.plan(qo, qo, HQ, HKV, w["head_dim"], causal=True, q_data_type=torch.bfloat16)
        s = wr._planned.summary
        if (s.tile_q, s.gqa_pack) != (128, HQ // HKV):
            print(f"L={n}: the planner took tile {s.tile_q} / pack {s.gqa_pack}, not 128 / 4: skipped")
            continue
        fn = lambda: wr.run(w["q"], w["k"], w["v"])  # noqa: E731
        assert bool(torch.isfinite(fn()).all()), f"L={n}: non-finite output"
        ms = triton.testing.do_bench(fn, warmup=25, rep=300, return_mode="median")
        items, tiles = counts([n] * b)
        points.append((n, tiles, ms))
        print(f"{n:6d} {b:4d} {items:6d} {s.num_items:7d} {tiles:7d} {ms:8.4f} {w['flops'] / ms / 1e9:8.1f}",
              flush=True)
        del w, wr
        torch.cuda.empty_cache()
    if len(points) < 3:
        return
    items = counts([LENS[0]] * (TOKENS // LENS[0]))[0]  # the same for every L (a multiple of 32)
    # The long batches weigh most in one line through every point; the short
    # ones alone say what an item costs where items are most of the time.
    everything = [(t, ms) for _, t, ms in points]
    short = [(t, ms) for n, t, ms in points if n <= 4096]
    for what, pts in (("fit", everything), ("fit, L <= 4096", short if len(short) >= 3 else [])):
        if not pts:
            continue
        a, b = fit(pts)
        print(f"{what}: time = {a:.4f} ms + {b * 1e6:.2f} ns x tiles; an item's fixed cost "
              f"{a / items * 1e6:.1f} ns = {a / items / b:.2f} tiles' time")
    a, b = fit(everything)
    for name, lens_ in (("P1", [8192]), ("P2", workloads.P2_LENS)):
        i, t = counts(lens_)
        share = a / items * i / (a / items * i + b * t)
        print(f"{name}: {i} items, {t} tiles: the items' fixed cost {100 * share:.1f}% of the model's time")


if __name__ == "__main__":
    main()
