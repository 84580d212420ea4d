#!/usr/bin/env python3
"""D4 (1 request x 131072 keys, GQA 32/8, d128, bf16, page 16) through the attn
Python package, run a few times: the target for Nsight Compute.

    ncu --clock-control none --target-processes all -k regex:attn_ \
        --launch-count 4 --section SpeedOfLight ... python3 bench/harness/profile_d4.py

Needs what bench/gpu_run.sh sets up (PYTHONPATH to the runtime-only build's
python/, ATTN_CACHE_DIR to the precompiled kernels). Prints the plan's shape
and the event-timed median so the profile can be read against it."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attn_system  # noqa: E402
import workloads  # noqa: E402
from reference import reference, rel_error  # noqa: E402


def main():
    runs = int(os.environ.get("PROFILE_RUNS", "3"))
    w = workloads.decode("D4", [131072])
    import attn
    fn = attn_system._decode(attn, w, graph=False)
    out = fn()
    torch.cuda.synchronize()
    err = rel_error(out, reference(w))
    print(f"D4 rel. error vs float32: {err:.2e}", flush=True)
    for _ in range(runs):
        fn()
    torch.cuda.synchronize()
    if os.environ.get("PROFILE_TIME"):
        import triton.testing
        ms = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
        print(f"D4 median {ms:.4f} ms, {w['bytes'] / ms / 1e6:.0f} GB/s", flush=True)


if __name__ == "__main__":
    main()
