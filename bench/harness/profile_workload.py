#!/usr/bin/env python3
"""One workload of docs/Benchmarks.md (D1-D5, P1-P5, or items-L<n>: item_cost.py's
batch of requests of n tokens) through the attn Python package, checked once
and then run a few times: the target for Nsight Compute.

    ncu --clock-control none --target-processes all -k regex:attn_ \\
        --launch-skip 2 --launch-count 2 --set full \\
        python3 bench/harness/profile_workload.py P1

Needs what bench/gpu_run.sh sets up (PYTHONPATH to the runtime-only build's
python/, ATTN_CACHE_DIR to the precompiled kernels). Prints the error against
the float32 reference and, with PROFILE_TIME=1, the event-timed median, so the
profile can be read against the benchmark's figure."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attn_system  # noqa: E402
import workloads  # noqa: E402
from reference import reference, rel_error  # noqa: E402


def build(name):
    if name.startswith("items-L") and name[7:].isdigit():
        return workloads.items_batch(int(name[7:]))
    for wid, builder in workloads.all_workloads():
        if wid == name:
            return builder()
    sys.exit(f"unknown workload {name!r}: one of "
             f"{', '.join(w for w, _ in workloads.all_workloads())}")


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "D4"
    runs = int(os.environ.get("PROFILE_RUNS", "3"))
    w = build(name)
    import attn
    fn = (attn_system._decode(attn, w, graph=False) if w["kind"] == "decode"
          else attn_system._prefill(attn, w))
    out = fn()
    torch.cuda.synchronize()
    print(f"{name} rel. error vs float32: {rel_error(out, reference(w)):.2e}",
          flush=True)
    for _ in range(runs):
        fn()
    torch.cuda.synchronize()
    if os.environ.get("PROFILE_TIME"):
        import triton.testing
        ms = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
        rate = (f"{w['bytes'] / ms / 1e6:.0f} GB/s" if "bytes" in w
                else f"{w['flops'] / ms / 1e9:.0f} TFLOP/s")
        print(f"{name} median {ms:.4f} ms, {rate}", flush=True)


if __name__ == "__main__":
    main()
