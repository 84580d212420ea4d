#!/usr/bin/env python3
"""The attn benchmark: one command on the GPU machine.

    python3 bench/harness/run_bench.py --out $OUT [--smoke] [--only D1,P1]

Measures in one run: the ceilings (a device-to-device copy counting bytes
read + written; an 8192^3 bf16 matmul on random data), then every workload
of docs/Benchmarks.md with attn and with PyTorch's peers (SDPA backends on gathered
KV, FlexAttention over the page pool; for the row kernels M1/A1 the PyTorch
code, eager and compiled, and a copy of the same bytes), then the sweeps of sweeps.py (decode
against KV length and skew, prefill against sequence length and head dim;
--no-sweeps skips them, --only implies it, --sweep decode-skew runs just
that one). Every system's output is checked
against a float32 reference in the same run; a wrong result is reported as
wrong, never timed as a win. attn's rows carry its plan() time; the report
ends with the compile times recorded in the kernel cache. Writes results.json
and results.md under --out, and plots when matplotlib is there."""

import argparse
import json
import os
import platform
import sys
import time

import torch
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attn_system  # noqa: E402
import peers  # noqa: E402
import report  # noqa: E402
import row_workloads  # noqa: E402
import sweeps  # noqa: E402
import workloads  # noqa: E402
from reference import reference, rel_error  # noqa: E402

TOLERANCE = 2e-2  # bf16 inputs, relative Frobenius error


def bench(fn):
    """Median milliseconds, CUDA events, L2 flushed between runs."""
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def bench_graph(fn):
    """Median milliseconds of replaying fn captured in a CUDA graph."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return bench(graph.replay)


def ceilings():
    n = 1 << 30  # 2 GiB of bf16 each way
    src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    copy_ms = bench(lambda: dst.copy_(src))
    copy_gbs = 2 * src.numel() * 2 / copy_ms / 1e6
    del src, dst
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    mm_ms = bench(lambda: a @ b)
    mm_tflops = 2 * 8192 ** 3 / mm_ms / 1e9
    return {"copy_GBps": copy_gbs, "matmul_TFLOPs": mm_tflops}


def measure(w, name, fn, ref, graph):
    row = {"workload": w["name"], "system": name}
    if hasattr(fn, "plan_us"):
        row["plan_us"] = fn.plan_us
    try:
        torch.cuda.synchronize()
        out = fn()
        torch.cuda.synchronize()
        if getattr(fn, "unchecked", False):  # a baseline (a copy): no output to check
            row["baseline"] = True
        else:
            row["rel_err"] = rel_error(out, ref)
            row["correct"] = row["rel_err"] <= TOLERANCE
        row["ms"] = bench(fn)
        if graph:
            try:
                row["graph_ms"] = bench_graph(fn)
            except Exception as e:  # not capturable
                row["graph_note"] = f"{type(e).__name__}: {e}"[:200]
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {e}"[:300]
    return row


def release_cache():
    """Returns the finished workload's memory to the driver, then lets the
    driver settle: for ~25 ms after an empty_cache() that frees gigabytes,
    small host-to-device copies completed ~1 ms late on an H100, which made
    the next workload's timed plan() calls (each waits on the previous one's
    upload) read ~1.06 ms (bench/harness/plan_after_peers.py)."""
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    time.sleep(0.1)


def run_workload(w, systems, meta, graph):
    """Times and checks every (name, fn) of `systems` on workload w."""
    # FlexAttention compiles per shape; a fresh cache per workload keeps
    # it under dynamo's recompile limit (past it, flex runs unfused).
    torch._dynamo.reset()
    ref = w["reference"]() if "reference" in w else reference(w)
    rows = []
    for name, fn in systems:
        if isinstance(fn, Exception) or fn is None:
            rows.append({"workload": w["name"], "system": name, "error": f"n/a: {fn}"[:300]})
            print(report.one_line(rows[-1]), flush=True)
            continue
        row = measure(w, name, fn, ref, graph=graph)
        if "ms" in row:
            if w["metric"] == "GBps":
                row["GBps"] = w["bytes"] / row["ms"] / 1e6
                row["pct_ceiling"] = 100 * row["GBps"] / meta["copy_GBps"]
            else:
                row["TFLOPs"] = w["flops"] / row["ms"] / 1e9
                row["pct_ceiling"] = 100 * row["TFLOPs"] / meta["matmul_TFLOPs"]
        rows.append(row)
        print(report.one_line(row), flush=True)
    return rows


def compile_times():
    """Per kernel module in the kernel cache the run used: what it is and its
    compile stages (ms) as recorded when it was compiled, on the machine that
    has the compiler (meta.json, python/attn/compiler.py)."""
    out = []
    cache_dir = os.environ.get("ATTN_CACHE_DIR", "")
    if not os.path.isdir(cache_dir):
        return out
    for key in sorted(os.listdir(cache_dir)):
        try:
            with open(os.path.join(cache_dir, key, "meta.json")) as f:
                inputs = json.load(f).get("inputs", {})
        except (OSError, ValueError):
            continue
        if "stages_ms" in inputs:
            out.append({"spec": inputs.get("spec", key), "arch": inputs.get("arch"),
                        "emit": inputs.get("emit"), "candidate": inputs.get("candidate"),
                        "stages_ms": inputs["stages_ms"]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"))
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, to test the harness")
    ap.add_argument("--only", default="", help="comma-separated workload ids")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--sweeps", dest="sweeps", action="store_true", default=None,
                    help="run the plot sweeps (default: on for a full run)")
    ap.add_argument("--no-sweeps", dest="sweeps", action="store_false")
    ap.add_argument("--sweep", default="",
                    help="comma-separated sweep names to run (implies --sweeps), "
                         "e.g. decode-skew")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False

    meta = {
        "device": torch.cuda.get_device_name(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "commit": os.environ.get("ATTN_COMMIT", "unknown"),
        "host": platform.node(),
    }
    meta.update(ceilings())
    print(f"ceilings: copy {meta['copy_GBps']:.0f} GB/s, "
          f"bf16 matmul {meta['matmul_TFLOPs']:.0f} TFLOP/s", flush=True)
    meta["attn"] = attn_system.describe()

    only = set(filter(None, args.only.split(",")))
    rows = []
    for wid, build in workloads.all_workloads(args.smoke):
        if only and wid not in only:
            continue
        w = build()
        systems = attn_system.systems_for(w)
        if not args.no_peers:
            systems += peers.peers_for(w)
        rows += run_workload(w, systems, meta, graph=w["kind"] == "decode")
        del w
        release_cache()
    # The row kernels (merge, append) against their PyTorch versions.
    for wid, build in row_workloads.all_workloads(args.smoke):
        if only and wid not in only:
            continue
        w = build()
        try:
            systems = w["systems"]()
        except Exception as e:  # attn not importable
            systems = [("attn", e)]
        rows += run_workload(w, systems, meta, graph=True)
        del w
        release_cache()

    sweep_rows = []
    wanted = set(filter(None, args.sweep.split(",")))
    if wanted or (args.sweeps if args.sweeps is not None else not (only or args.smoke)):
        for sweep, x, build in sweeps.points():
            if wanted and sweep not in wanted:
                continue
            try:
                w = build()
                systems = attn_system.systems_for(w)[:1]
                if not args.no_peers:
                    systems += [p for p in peers.peers_for(w, with_flex=False)
                                if p[0].startswith(sweeps.PEER_PREFIX)]
                point = run_workload(w, systems, meta, graph=False)
                del w
            except Exception as e:  # e.g. out of memory: the point says so
                point = [{"workload": f"{sweep} {x}", "system": "all",
                          "error": f"{type(e).__name__}: {e}"[:300]}]
            for row in point:
                row.update(sweep=sweep, x=x)
                sweep_rows.append(row)
            release_cache()
    meta["compile"] = compile_times()

    result = {"meta": meta, "rows": rows, "sweeps": sweep_rows}
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    md = report.markdown(result)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md)
    report.plots(result, args.out)
    print(md)


if __name__ == "__main__":
    main()
