#!/usr/bin/env python3
"""What graph mode's deferred plan copy costs a replay (issue #13, v62).

    python3 bench/harness/graph_copy_cost.py [--batch 256] [--replays 200]

A decode graph-mode wrapper (Llama-3-8B's attention shape, skewed lengths as
plan_overhead.py's) is planned, run once and captured (one run()), in each
form of its plan's copies: ``plan`` (ATTN_DEFER_PLAN_COPIES=0: plan()
launches them, the graph holds only attention), ``head`` (the default: a
memcpy node stages the copy table in device memory, then the copy_by_table
kernel at the graph's head, the fence's event node after it) and
``head-host`` (session 38's form: the kernel reads the table in pinned host
memory, no memcpy node). For each: the GPU time of a replay alone (CUDA events around
``--replays`` back-to-back replays, no plans), and a step's wall time (plan()
then replay, ``--replays`` times, synchronized at the end). Session 38 also
priced, with a runtime built for it, the event node left out, the copy and
the event node in a chain, and the copy where the first run() is: each cost
what ``head`` does (bench/NOTES.md, v62).
"""

import argparse
import os
import time

import torch

import attn
from attn import _native, core

import plan_overhead as po

FORMS = {"plan": {"ATTN_DEFER_PLAN_COPIES": "0"}, "head": {}, "head-host": {}}


def copy_from_host_table(self, handle):
    """WrapperBase._copy_by_table without the staging buffer (``head-host``)."""
    table, _, module, kernel = self._copy_table
    _native.native().copy_by_table(module, kernel, table.data_ptr(), core.COPY_TABLE_CAPACITY,
                                   self._upload_fence(), handle, 0)


def measure(form, batch, replays, ws):
    os.environ.pop("ATTN_DEFER_PLAN_COPIES", None)
    os.environ.update(FORMS[form])
    staged = core.WrapperBase.__dict__["_copy_by_table"]
    if form == "head-host":
        core.WrapperBase._copy_by_table = copy_from_host_table
    try:
        return measure_form(batch, replays, ws)
    finally:
        core.WrapperBase._copy_by_table = staged


def measure_form(batch, replays, ws):
    indptr, indices, last = po.page_table(po.lengths(batch, "skewed"))
    bufs = (torch.empty(batch + 1, dtype=torch.int32, device="cuda"),
            torch.empty(indices.numel(), dtype=torch.int32, device="cuda"),
            torch.empty(batch, dtype=torch.int32, device="cuda"))
    w = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(ws, *bufs)
    plan = lambda: w.plan(indptr, indices, last, po.HQ, po.HKV, po.D, po.PAGE, q_data_type=torch.bfloat16)  # noqa
    plan()
    g, kv, q, out = po.capture_once(w, plan, batch, indices.numel())
    plan()  # a plan of the captured wrapper: deferred where the form defers
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    replay_us = 1e3 * start.elapsed_time(end) / replays
    t0 = time.perf_counter()
    for _ in range(replays):
        plan()
        g.replay()
    torch.cuda.synchronize()
    step_us = 1e6 * (time.perf_counter() - t0) / replays
    deferred = w._copy_table is not None and w._copy_capture != 0
    return replay_us, step_us, deferred


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--replays", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    ws = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    print(f"{torch.cuda.get_device_name()}; decode, {a.batch} skewed requests; {a.replays} replays")
    print(f"{'form':>9} {'round':>5} {'replay (us)':>12} {'plan + replay (us)':>19} {'deferred':>9}")
    for r in range(a.rounds):
        for form in FORMS:
            replay_us, step_us, deferred = measure(form, a.batch, a.replays, ws)
            print(f"{form:>9} {r:>5} {replay_us:>12.1f} {step_us:>19.1f} {str(deferred):>9}", flush=True)
            core._table_copiers.clear()


if __name__ == "__main__":
    main()
