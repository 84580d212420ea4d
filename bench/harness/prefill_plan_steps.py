#!/usr/bin/env python3
"""Where a prefill wrapper's plan() goes, step by step (the GPU machine).

    python3 bench/harness/prefill_plan_steps.py P1 P3-d64 P2 P5

For each workload of docs/Benchmarks.md given (prefill ones: ragged or
paged), plans once, then 100 more times on the memoized path (the native
Planner's plan-and-upload call timed), the C++ planner alone on the batch,
and 100 plans on the full path with each of its steps wrapped by a timer,
as plan_overhead.py --breakdown does for decode: make_spec, kernel_info,
plan_config, the variant arguments, the capture query, the page-index
word, the stream lookup, the upload fence's wait and record, and the
binding's plan-and-upload call (the plan carries the index arrays). Prints
each step's median in microseconds, the whole plan()'s median and the rest
(Python not in any step; a timer costs ~0.2 us). Needs what bench/gpu_run.sh sets up (PYTHONPATH, ATTN_CACHE_DIR)."""

import statistics
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])

import attn  # noqa: E402
import workloads  # noqa: E402
from attn import _native, core, paged, prefill  # noqa: E402

HQ, HKV, PAGE = 32, 8, 16
totals = {}


def add(label, t0):
    totals[label] = totals.get(label, 0.0) + time.perf_counter() - t0


def timed(owner, name, label):
    orig = getattr(owner, name)

    def f(*a, **k):
        t0 = time.perf_counter()
        try:
            return orig(*a, **k)
        finally:
            add(label, t0)
    setattr(owner, name, f)


class FenceProxy:
    def __init__(self, fence):
        self.fence = fence

    def wait(self):
        t0 = time.perf_counter()
        self.fence.wait()
        add("fence wait", t0)

    def record(self, stream):
        t0 = time.perf_counter()
        self.fence.record(stream)
        add("fence record", t0)


class NativeProxy:
    def __init__(self, native):
        self.native = native

    def __getattr__(self, name):
        return getattr(self.native, name)

    def plan(self, *a, **k):
        t0 = time.perf_counter()
        try:
            return self.native.plan(*a, **k)
        finally:
            add("native plan + upload", t0)


class PlannerProxy:
    """A memo entry's native Planner, its plan() timed (plan, upload, fence)."""

    def __init__(self, planner):
        self.planner = planner

    def sizes(self, *a):
        return self.planner.sizes(*a)

    def _timed(self, call, args):
        t0 = time.perf_counter()
        try:
            return call(*args)
        finally:
            add("native plan + upload + fence", t0)

    def plan(self, *a):   # older packages
        return self._timed(self.planner.plan, a)

    def step(self, *a):   # bound once (session 31 on)
        return self._timed(self.planner.step, a)

    def bind(self, *a):
        return self.planner.bind(*a)


def measure(name, plan, calls=100):
    """Median us of each timed step and of the whole plan() over ``calls`` plans."""
    torch.cuda.synchronize()
    steps, whole = {}, []
    for _ in range(calls):
        totals.clear()
        t0 = time.perf_counter()
        plan()
        whole.append(time.perf_counter() - t0)
        for k, v in totals.items():
            steps.setdefault(k, []).append(v)
    torch.cuda.synchronize()
    out = {k: 1e6 * statistics.median(v) for k, v in steps.items()}
    out["whole"] = 1e6 * statistics.median(whole)
    rest = out["whole"] - sum(v for k, v in out.items() if k != "whole")
    print(name, " ".join(f"{k} {v:.1f}" for k, v in out.items()), f"rest {rest:.1f}", flush=True)


def main():
    ws = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    proxy = NativeProxy(_native.native())
    _native.native = lambda: proxy
    for owner, fn, label in ((core, "kernel_info", "kernel_info"), (paged, "make_spec", "make_spec"),
                             (prefill, "make_spec", "make_spec"),
                             (core.WrapperBase, "_check_not_capturing", "capture query"),
                             (core, "raise_page_index_errors", "index word"), (core, "plan_config", "plan_config"),
                             (core, "stream_handle", "stream"), (core.WrapperBase, "_variant_args", "variant args")):
        timed(owner, fn, label)
    builders = dict(workloads.all_workloads())
    for name in sys.argv[1:] or ["P1", "P2"]:
        w = builders[name]()
        d = w["head_dim"]
        qo = w["qo_indptr"].cpu()
        if w.get("paged"):
            wr = attn.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD")
            indptr, last = w["kv_indptr"].cpu(), w["kv_last_page_len"].cpu()

            def plan():
                wr.plan(qo, indptr, w["kv_indices"], last, HQ, HKV, d, PAGE, causal=True,
                        q_data_type=torch.bfloat16)
        else:
            wr = attn.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD")

            def plan():
                wr.plan(qo, qo, HQ, HKV, d, causal=True, q_data_type=torch.bfloat16)
        plan()
        # The memoized path (what a serving loop's later steps take).
        memo = next(iter(wr._memo.values()))
        native_planner = memo.planner
        memo.planner = PlannerProxy(native_planner)
        measure(f"{name} memoized:", plan)
        memo.planner = native_planner
        # The planner alone on this batch (no upload), through the same native Planner.
        s = wr._planned.summary
        host = wr._host_ws
        batch = len(qo) - 1
        args = (host.data_ptr(), host.numel(), 0, 1 << 62, 0, batch, max(1, batch), max(1, int(qo[-1])), 0,
                qo.data_ptr(), (indptr if w.get("paged") else qo).data_ptr(),
                last.data_ptr() if w.get("paged") else 0, 1)
        times = []
        for _ in range(100):
            t0 = time.perf_counter()
            native_planner.plan(*args)
            times.append(time.perf_counter() - t0)
        print(f"{name} planner alone: {1e6 * statistics.median(times):.1f} us; items {s['num_items']}, "
              f"CTAs {s['num_ctas']}, merge units {s['num_merge_units']}, candidate {s['candidate']}, "
              f"plan bytes {s['plan_bytes']}", flush=True)
        # The full path (the first plan() of a configuration, and any other argument forms).
        wr._plan_prefill_memoized = lambda *a, **k: False
        wr._fence = FenceProxy(wr._fence)
        measure(f"{name} full path:", plan)


if __name__ == "__main__":
    main()
