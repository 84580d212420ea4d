#!/usr/bin/env python3
"""What a serving engine's decode plan() costs on the host (issue #13).

    python3 bench/harness/plan_overhead.py [--batches 1,64,256,1024] [--calls 200] [--lens skewed|uniform]
        [--breakdown] [--profile]

For each batch size: the median host time of the whole Python
``BatchDecodeWithPagedKVCacheWrapper.plan()`` (eager, and the CUDA-graph
wrapper; "own indices": the graph wrapper planning from its own indices
buffer, as SGLang does, so that no page-table copy is queued), called as an
engine does every step: CPU int32 ``indptr`` and
``last_page_len``, device ``kv_indices``, the same configuration each time
(Llama-3-8B's attention shape: 32/8 heads, head_dim 128, 16-token pages,
bf16). Next to it, the planner alone through the binding (the C++ plan of
the same batch and config, nothing uploaded): the difference is what Python,
the argument checks and the uploads add. bench/plan's BM_PlanDecodeSkewed/256
is the C++ figure for the same batch shape in isolation (two candidates, one
CTA per SM), BM_PlanDecodeSkewedSm90a/256 under the sm_90a decode kernel's
contract, which the "planner alone" column plans with; docs/Benchmarks.md
"plan()".

Batches: ``skewed`` (as BM_PlanDecodeSkewed: one request in 16 holds 32768
keys, the others 256-1279) or ``uniform`` (2048 keys each, D1's). The graph
wrappers are captured once first (one run() over an uninitialized KV cache
of the batch's pages, replayed once), as an engine's are before its steps:
a captured wrapper's plan() leaves its copies to the graph. The timed calls
are plans only. Needs what bench/gpu_run.sh sets up
(PYTHONPATH with the runtime-only build's python/, ATTN_CACHE_DIR with the
precompiled decode kernels: python -m attn.precompile --model llama3-8b).

``--breakdown``: where the eager plan() goes, step by step. Each step the
memoized plan() takes (the page-index error word, the stream lookup, the
native call, which checks for capture, waits on the upload fence, plans,
queues the copies and records the fence) is
timed by a wrapper around it; "Python" is the rest. A wrapper costs ~0.2 us, so the steps' sum is slightly high.
``--profile``: cProfile of 2000 eager plans at 256 requests, the 25 costliest
functions by their own time (the profiler's per-call cost inflates small
calls; read it for the ranking).
"""

import argparse
import random
import statistics
import time

import torch

import attn
from attn import _native

HQ, HKV, D, PAGE = 32, 8, 128, 16


def lengths(n, kind):
    rng = random.Random(n)
    if kind == "uniform":
        return [2048] * n
    return [32768 if i % 16 == 3 else 256 + rng.randrange(1024) for i in range(n)]


def page_table(lens):
    pages = [-(-k // PAGE) for k in lens]
    indptr = torch.zeros(len(lens) + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(torch.tensor(pages, dtype=torch.int64), 0).to(torch.int32)
    total = int(indptr[-1])
    indices = torch.randperm(total, dtype=torch.int32, device="cuda")
    last = torch.tensor([k - (p - 1) * PAGE for k, p in zip(lens, pages)], dtype=torch.int32)
    return indptr, indices, last


def median_us(fn, calls):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return 1e6 * statistics.median(times)


def capture_once(w, plan, batch, pool):
    """Plans, runs once eagerly and captures one run() of graph-mode wrapper
    ``w`` over a KV cache of ``pool`` pages (uninitialized: no output is
    read), as an engine does before its steps: a captured wrapper's plan()
    leaves its copies to the graph (docs/Python.md). Returns what must stay
    alive while the wrapper plans."""
    plan()
    kv = torch.empty(pool, 2, PAGE, HKV, D, dtype=torch.bfloat16, device="cuda")
    q = torch.zeros(batch, HQ, D, dtype=torch.bfloat16, device="cuda")
    out = torch.empty_like(q)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        w.run(q, kv, out=out)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            w.run(q, kv, out=out)
    torch.cuda.current_stream().wait_stream(s)
    g.replay()
    torch.cuda.synchronize()
    return g, kv, q, out


def planner_alone_us(w, indptr, last, calls):
    """The C++ planner of w's last plan's config on the same batch, through the
    binding, nothing uploaded (device workspace 0)."""
    p = w._planned
    cfg = dict(p.config)
    planner = _native.native().Planner(cfg)
    b = len(last)
    qo = torch.arange(0, b + 1, dtype=torch.int32)
    host_bytes, _ = planner.sizes(cfg["max_batch"], cfg["max_total_q_rows"], cfg["max_kv_tokens"])
    host = torch.empty(host_bytes, dtype=torch.uint8)
    args = (host.data_ptr(), host_bytes, 0, 1 << 62, 0, b, cfg["max_batch"], cfg["max_total_q_rows"],
            cfg["max_kv_tokens"], qo.data_ptr(), indptr.data_ptr(), last.data_ptr())
    return median_us(lambda: planner.plan(*args), calls)


class _Timed:
    """Wraps ``owner.name`` (a function or method) with a timer adding into ``totals[label]``."""

    def __init__(self, owner, name, label, totals):
        self.owner, self.name, self.orig = owner, name, getattr(owner, name)
        orig = self.orig

        def timed(*args, **kw):
            t0 = time.perf_counter()
            try:
                return orig(*args, **kw)
            finally:
                totals[label] = totals.get(label, 0.0) + time.perf_counter() - t0
        setattr(owner, name, timed)

    def undo(self):
        setattr(self.owner, self.name, self.orig)


class _PlannerProxy:
    """A memo entry's native Planner with its planning call timed: step()
    (bound once, session 31 on) or plan() (older packages, for ab)."""

    def __init__(self, planner, totals):
        self._p, self._totals = planner, totals

    def _timed(self, call, args):
        t0 = time.perf_counter()
        try:
            return call(*args)
        finally:
            self._totals["native plan + upload + fence"] = self._totals.get("native plan + upload + fence", 0.0) + \
                time.perf_counter() - t0

    def plan(self, *args):
        return self._timed(self._p.plan, args)

    def step(self, *args):
        return self._timed(self._p.step, args)

    def bind(self, *args):
        return self._p.bind(*args)

    def sizes(self, *args):
        return self._p.sizes(*args)


def breakdown(w, plan, calls):
    """{step: median us per plan()} of the memoized decode plan() of ``w``
    (planned once already), and the whole call's median with the timers in."""
    from attn import core
    totals, per_step = {}, {}
    # The capture check and the upload fence's wait and record are inside the native call.
    timers = [_Timed(core, "raise_page_index_errors", "index error word", totals),
              _Timed(core, "stream_handle", "stream lookup", totals)]
    memo = list(w._memo.values())
    saved = [m.planner for m in memo]
    for m in memo:
        m.planner = _PlannerProxy(m.planner, totals)
    whole = []
    try:
        plan()
        torch.cuda.synchronize()
        for _ in range(calls):
            totals.clear()
            t0 = time.perf_counter()
            plan()
            whole.append(time.perf_counter() - t0)
            for k, v in totals.items():
                per_step.setdefault(k, []).append(v)
        torch.cuda.synchronize()
    finally:
        for t in timers:
            t.undo()
        for m, p in zip(memo, saved):
            m.planner = p
    out = {k: 1e6 * statistics.median(v) for k, v in per_step.items()}
    out["whole (timed)"] = 1e6 * statistics.median(whole)
    out["Python (the rest)"] = out["whole (timed)"] - sum(v for k, v in out.items() if k != "whole (timed)")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="1,64,256,1024")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--lens", choices=("skewed", "uniform"), default="skewed")
    ap.add_argument("--fixed-split", type=int, default=None, help="plan with fixed_split_size=N")
    ap.add_argument("--breakdown", action="store_true", help="time the eager plan()'s steps")
    ap.add_argument("--profile", action="store_true", help="cProfile the eager plan() at 256 requests")
    a = ap.parse_args()
    batches = [int(x) for x in a.batches.split(",")]
    print(f"attn {attn.__version__} from {attn.__file__}; {torch.cuda.get_device_name()}; "
          f"{a.lens} decode batches, median of {a.calls} plans (us)")
    print(f"{'batch':>6} {'eager plan()':>13} {'graph plan()':>13} {'graph, own indices':>19} "
          f"{'planner alone':>14}")
    ws = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    for b in batches:
        indptr, indices, last = page_table(lengths(b, a.lens))
        kw = dict(q_data_type=torch.bfloat16, fixed_split_size=a.fixed_split)
        eager = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
        e_us = median_us(lambda: eager.plan(indptr, indices, last, HQ, HKV, D, PAGE, **kw), a.calls)
        alone_us = planner_alone_us(eager, indptr, last, a.calls)
        bufs = (torch.empty(b + 1, dtype=torch.int32, device="cuda"),
                torch.empty(indices.numel(), dtype=torch.int32, device="cuda"),
                torch.empty(b, dtype=torch.int32, device="cuda"))
        graph = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(ws, *bufs)
        graph_plan = lambda: graph.plan(indptr, indices, last, HQ, HKV, D, PAGE, **kw)
        # Each graph wrapper is captured first, as an engine's is before its steps.
        keep = capture_once(graph, graph_plan, b, indices.numel())
        g_us = median_us(graph_plan, a.calls)
        # SGLang's way: the page table is built in the graph's own indices buffer, so no copy.
        own = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(ws, bufs[0], indices, bufs[2])
        own_plan = lambda: own.plan(indptr, indices, last, HQ, HKV, D, PAGE, **kw)
        keep_own = capture_once(own, own_plan, b, indices.numel())
        o_us = median_us(own_plan, a.calls)
        print(f"{b:>6} {e_us:>13.1f} {g_us:>13.1f} {o_us:>19.1f} {alone_us:>14.1f}", flush=True)
        if a.breakdown:
            for name, w in (("eager", eager), ("graph", graph)):
                steps = breakdown(w, lambda: w.plan(indptr, indices, last, HQ, HKV, D, PAGE, **kw), a.calls)
                print(f"       {name} plan() steps (us): " +
                      ", ".join(f"{k} {v:.1f}" for k, v in steps.items()), flush=True)
        if a.profile and b == 256:
            import cProfile
            import pstats
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(2000):
                eager.plan(indptr, indices, last, HQ, HKV, D, PAGE, **kw)
            prof.disable()
            torch.cuda.synchronize()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        del keep, keep_own


if __name__ == "__main__":
    main()
