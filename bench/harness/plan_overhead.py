#!/usr/bin/env python3
"""What a serving engine's decode plan() costs on the host (issue #13).

    python3 bench/harness/plan_overhead.py [--batches 1,64,256,1024] [--calls 200] [--lens skewed|uniform]

For each batch size: the median host time of the whole Python
``BatchDecodeWithPagedKVCacheWrapper.plan()`` (eager, and the CUDA-graph
wrapper), called as an engine does every step: CPU int32 ``indptr`` and
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
keys, the others 256-1279) or ``uniform`` (2048 keys each, D1's). Plans only:
no KV cache is allocated, no kernel runs. Needs what bench/gpu_run.sh sets up
(PYTHONPATH with the runtime-only build's python/, ATTN_CACHE_DIR with the
precompiled decode kernels: python -m attn.precompile --model llama3-8b).
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


def planner_alone_us(w, indptr, last, calls):
    """The C++ planner of w's last plan's config on the same batch, through the
    binding, nothing uploaded (device workspace and staging 0)."""
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="1,64,256,1024")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--lens", choices=("skewed", "uniform"), default="skewed")
    ap.add_argument("--fixed-split", type=int, default=None, help="plan with fixed_split_size=N")
    a = ap.parse_args()
    batches = [int(x) for x in a.batches.split(",")]
    print(f"attn {attn.__version__} from {attn.__file__}; {torch.cuda.get_device_name()}; "
          f"{a.lens} decode batches, median of {a.calls} plans (us)")
    print(f"{'batch':>6} {'eager plan()':>13} {'graph plan()':>13} {'planner alone':>14}")
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
        g_us = median_us(lambda: graph.plan(indptr, indices, last, HQ, HKV, D, PAGE, **kw), a.calls)
        print(f"{b:>6} {e_us:>13.1f} {g_us:>13.1f} {alone_us:>14.1f}", flush=True)


if __name__ == "__main__":
    main()
