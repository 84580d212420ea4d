"""Why the benchmark's plan column shows ~1 ms for P3-d64 (and 45-80 us for P3-d256)."""
import statistics, sys, time
sys.path.insert(0, "bench/harness")
import torch
import attn, workloads, attn_system
from attn import core

def t(fn, n=20, sync=False):
    ts = []
    for _ in range(n):
        if sync:
            torch.cuda.synchronize()
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(ts)

b = dict(workloads.all_workloads())
for order in (["P3-d64", "P3-d256"], ["P3-d256", "P3-d64"]):
    for name in order:
        w = b[name]()
        run = attn_system._prefill(attn, w)
        print(name, "bench _time_plan:", round(run.plan_us, 1), flush=True)
        ws = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        wr = attn.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD")
        qo = w["qo_indptr"].cpu()
        plan = lambda: wr.plan(qo, qo, 32, 8, w["head_dim"], causal=True, q_data_type=torch.bfloat16)
        plan(); torch.cuda.synchronize()
        print(name, "again:", round(t(plan), 1), "synced before each:", round(t(plan, sync=True), 1),
              "memo:", len(wr._memo), flush=True)
        # What the stream holds: time a sync right after a plan.
        plan()
        t0 = time.perf_counter(); torch.cuda.synchronize(); print(name, "sync after a plan:", round(1e6 * (time.perf_counter() - t0), 1), flush=True)
        s = wr._planned.summary
        print(name, {k: s[k] for k in ("candidate", "num_items", "num_ctas", "num_merge_units", "plan_bytes")}, flush=True)
        del run, wr, ws
