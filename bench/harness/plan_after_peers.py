#!/usr/bin/env python3
"""Why the benchmark's plan column reads ~1.06 ms for P3-d64 (the GPU machine).

    python3 bench/harness/plan_after_peers.py [--keep-cache]

Runs P2 with its peers as run_bench.py does (then drops it and empties
PyTorch's cache, unless --keep-cache), builds P3-d64, and times two fresh ragged wrappers' plan()
calls one by one, with the native plan call of each (which waits on the
previous plan's upload fence) and the device synchronize after them. Session
24 (an H100): the first wrapper's plans all took ~1.05 ms, nearly all of it
the native call, and the synchronize after them 1.04 ms: each plan's upload
completed ~1 ms late on the GPU; the second wrapper's fifth plan on took
33 us. Needs what bench/gpu_run.sh sets up (PYTHONPATH, ATTN_CACHE_DIR)."""
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import torch  # noqa: E402

import attn  # noqa: E402
import attn_system  # noqa: E402
import peers  # noqa: E402
import workloads  # noqa: E402
from run_bench import ceilings, run_workload  # noqa: E402


class TimedPlanner:
    """A memo entry's native Planner with each plan() call's host time kept."""

    def __init__(self, planner):
        self.planner, self.times = planner, []

    def _timed(self, call, args):
        t0 = time.perf_counter()
        try:
            return call(*args)
        finally:
            self.times.append(time.perf_counter() - t0)

    def plan(self, *args):   # older packages
        return self._timed(self.planner.plan, args)

    def step(self, *args):   # bound once (session 31 on)
        return self._timed(self.planner.step, args)

    def bind(self, *args):
        return self.planner.bind(*args)

    def sizes(self, *args):
        return self.planner.sizes(*args)


def us(times):
    return " ".join(f"{1e6 * t:.0f}" for t in times)


def main():
    meta = ceilings()
    builders = dict(workloads.all_workloads())
    w = builders["P2"]()
    run_workload(w, attn_system.systems_for(w) + peers.peers_for(w), meta, graph=False)
    del w
    if "--keep-cache" not in sys.argv:
        torch.cuda.empty_cache()
    qo = builders["P3-d64"]()["qo_indptr"].cpu()
    for which in ("first", "second"):
        wrapper = attn.BatchPrefillWithRaggedKVCacheWrapper(
            torch.empty(1 << 30, dtype=torch.uint8, device="cuda"), "NHD")

        def plan():
            wrapper.plan(qo, qo, 32, 8, 64, causal=True, q_data_type=torch.bfloat16)
        plan()
        torch.cuda.synchronize()
        memo = next(iter(wrapper._memo.values()))
        memo.planner = timed = TimedPlanner(memo.planner)
        whole = []
        for _ in range(20):
            t0 = time.perf_counter()
            plan()
            whole.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        sync = time.perf_counter() - t0
        print(f"{which} wrapper: plan() {us(whole)} us; its native call {us(timed.times)} us; "
              f"the synchronize after them {1e6 * sync:.0f} us", flush=True)


if __name__ == "__main__":
    main()
