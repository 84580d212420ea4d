#!/usr/bin/env python3
"""Kernel packs against each other in one process, timed in turns.

    python3 bench/harness/kab_paired.py --packs out/kernels,out/kernels-x [--only P1,P2] [--rounds 8]

The `kab` step of bench/device_steps.sh runs the benchmark once per pack and
round, each in its own process: between two such runs an H100's clocks moved
enough that one pack's P1 read 573 and 559 TFLOP/s in successive rounds, so a
1-2% change could not be told from the noise. Here every pack's attn
callable is built (planned) in one process with ATTN_CACHE_DIR set to that
pack (the runtime keys its kernels by that directory), its output checked
against the float32 reference, and then the packs are timed in turns, round
after round, the order reversed every other round (A B, B A, ...), so that
whatever drifts during the run falls on every pack alike. A change is judged
by the paired ratio: in each round, each pack's time over the first pack's.

Prints, per workload and pack, the median time and TFLOP/s over the rounds
and the paired ratio: its mean and standard error, median, lowest and
highest, and in how many rounds it was faster than the base (a sign test,
which one outlying round does not move); --json writes them too. A round
comes first untimed (boost clocks).
Needs the packs' kernels for this GPU (precompiled, carried) and a
runtime-only build on PYTHONPATH, as run_bench.py does.
"""

import argparse
import json
import os
import statistics
import sys

import torch
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import attn_system  # noqa: E402
import workloads  # noqa: E402
from reference import reference, rel_error  # noqa: E402
from run_bench import TOLERANCE  # noqa: E402


def loaded_kernel_paths():
    """Where every kernel module this process has loaded came from."""
    import attn.core
    return {entry[0].path for entry in attn.core._modules.values()}


def in_pack(path, pack):
    return os.path.abspath(path).startswith(os.path.abspath(pack) + os.sep)


def build_for_pack(w, pack):
    """attn's callable for workload w on the kernels of `pack`. The runtime
    keys what it loads by ATTN_CACHE_DIR, so the callable runs the pack's own
    kernels; checked: whatever it loaded comes from the pack, and the pack
    has kernels loaded (an earlier workload may have loaded the same ones)."""
    os.environ["ATTN_CACHE_DIR"] = os.path.abspath(pack)
    # A pack named *-tma holds kernels compiled with ATTN_KV_TMA=1 (K/V tiles
    # by TMA), which are keyed by it: the callable looks them up as compiled.
    os.environ["ATTN_KV_TMA"] = "1" if os.path.basename(os.path.normpath(pack)).endswith("-tma") else "0"
    before = loaded_kernel_paths()
    name, fn = attn_system.systems_for(w)[0]
    if isinstance(fn, Exception):
        raise RuntimeError(f"{pack}: {name}: {fn}")
    torch.cuda.synchronize()
    loaded = loaded_kernel_paths()
    foreign = sorted(p for p in loaded - before if not (p and in_pack(p, pack)))
    if foreign or not any(p and in_pack(p, pack) for p in loaded):
        raise RuntimeError(f"{pack}: the callable's kernels are not the pack's ({foreign or 'none loaded'})")
    return fn


def time_ms(fn, rep_ms):
    # The mean, not the median: under a power cap the clocks step between a
    # few levels, and a median lands on one of them.
    return triton.testing.do_bench(fn, warmup=10, rep=rep_ms, return_mode="mean")


def run_workload(w, packs, rounds, rep_ms):
    ref = w["reference"]() if "reference" in w else reference(w)
    fns = {}
    for pack in packs:
        fn = build_for_pack(w, pack)
        err = rel_error(fn(), ref)
        if not err <= TOLERANCE:
            raise RuntimeError(f"{w['name']} on {pack}: wrong result (relative error {err:.2e})")
        fns[pack] = fn
    # One round untimed: the first runs after an idle spell see boost
    # clocks (P1 read 0.86 ms there and 0.97 from the second round on).
    for pack in packs:
        time_ms(fns[pack], rep_ms)
    times = {pack: [] for pack in packs}
    for r in range(rounds):
        for pack in (packs if r % 2 == 0 else packs[::-1]):
            times[pack].append(time_ms(fns[pack], rep_ms))
    base = times[packs[0]]
    out = []
    for pack in packs:
        ratios = [t / b for t, b in zip(times[pack], base)]
        ms = statistics.median(times[pack])
        mean = statistics.mean(ratios)
        stderr = statistics.stdev(ratios) / len(ratios) ** 0.5 if len(ratios) > 1 else 0.0
        out.append({"workload": w["name"], "pack": pack, "ms": ms, "TFLOPs": w["flops"] / ms / 1e9,
                    "ratio_mean": mean, "ratio_stderr": stderr, "ratio_median": statistics.median(ratios),
                    "ratio_min": min(ratios), "ratio_max": max(ratios),
                    # The sign test: one outlying round moves the mean, not this.
                    "rounds_faster": sum(r < 1 for r in ratios), "times_ms": times[pack]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packs", required=True, help="comma-separated kernel pack folders; the first is the base")
    ap.add_argument("--only", default="P1,P2", help="comma-separated workload ids (TFLOP/s workloads)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--rep-ms", type=float, default=100.0, help="do_bench's time per measurement")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()
    packs = [p for p in a.packs.split(",") if p]
    if len(packs) < 2:
        ap.error("--packs needs two or more packs")
    for p in packs:
        if not os.path.isdir(p):
            ap.error(f"--packs: {p} is not a folder")
    only = [x for x in a.only.split(",") if x]
    builders = dict(workloads.all_workloads())
    unknown = [x for x in only if x not in builders]
    if unknown:
        ap.error(f"--only: unknown workload(s) {', '.join(unknown)} (known: {', '.join(builders)})")
    print(f"{torch.cuda.get_device_name()}; {a.rounds} rounds of do_bench({a.rep_ms:.0f} ms, mean), "
          f"packs in turns (order reversed every other round); ratio = time / {packs[0]}'s in the same round",
          flush=True)
    rows = []
    for wid in only:
        w = builders[wid]()
        if w["metric"] != "TFLOPs":
            print(f"{wid}: skipped (a {w['metric']} workload)")
            continue
        try:
            for row in run_workload(w, packs, a.rounds, a.rep_ms):
                rows.append(row)
                print(f"{wid:8} {os.path.basename(row['pack'].rstrip('/')):28} {row['ms']:.4f} ms "
                      f"{row['TFLOPs']:6.1f} TFLOP/s  ratio {row['ratio_mean']:.4f} +- {row['ratio_stderr']:.4f} "
                      f"(median {row['ratio_median']:.4f}, {row['ratio_min']:.4f}-{row['ratio_max']:.4f}; "
                      f"faster in {row['rounds_faster']}/{len(row['times_ms'])} rounds)",
                      flush=True)
        except Exception as e:  # reported per workload
            print(f"{wid}: {type(e).__name__}: {e}", flush=True)
        del w
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "packs": packs, "rounds": a.rounds,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
