#!/usr/bin/env python3
"""Where a decode call's time goes besides its kernels: the benchmark's
per-sample method against back-to-back calls.

    python3 bench/harness/overhead.py [D1,D4]

For each workload: the benchmark's figure (triton do_bench: L2 flushed and
events around every call), the same for a one-element kernel (what the method
itself costs per sample), and N calls back to back between two events (the
working set is 10x the L2, so nothing stays cached; no per-call event or
flush gap). Every output is checked against the float32 reference first.
Needs what bench/gpu_run.sh sets up (PYTHONPATH, ATTN_CACHE_DIR)."""

import os
import sys

import torch
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attn_system  # noqa: E402
from profile_workload import build  # noqa: E402
from reference import reference, rel_error  # noqa: E402


def back_to_back(fn, calls=50, repeats=5):
    """Median over `repeats` of (time of `calls` consecutive calls) / calls, ms."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return sorted(times)[len(times) // 2]


def main():
    import attn
    names = (sys.argv[1] if len(sys.argv) > 1 else "D1,D4").split(",")
    tiny = torch.zeros(1, device="cuda")
    empty_ms = triton.testing.do_bench(lambda: tiny.add_(1), warmup=25, rep=200,
                                       return_mode="median")
    print(f"one-element kernel, do_bench: {1e3 * empty_ms:.1f} us per sample")
    copy = torch.empty(1 << 30, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(copy)
    copy_ms = triton.testing.do_bench(lambda: dst.copy_(copy), warmup=25, rep=200,
                                      return_mode="median")
    copy_gbs = 2 * copy.numel() * 2 / copy_ms / 1e6
    del copy, dst
    print(f"copy ceiling: {copy_gbs:.0f} GB/s")
    for name in names:
        w = build(name)
        fn = attn_system._decode(attn, w, graph=False)
        err = rel_error(fn(), reference(w))
        bench_ms = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
        b2b_ms = back_to_back(fn)
        pct = lambda ms: 100 * w["bytes"] / ms / 1e6 / copy_gbs
        print(f"{name}: err {err:.1e}; do_bench {1e3 * bench_ms:.1f} us ({pct(bench_ms):.1f}% of "
              f"copy); back to back {1e3 * b2b_ms:.1f} us ({pct(b2b_ms):.1f}%)", flush=True)
        del w, fn
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
