#!/usr/bin/env python3
"""A1 and M1 (row_workloads.py) for attn's row kernels and a copy of the same
bytes only: no PyTorch peers to compile, so that kernel variants (caches of
their own, ATTN_CACHE_DIR) compare in a few seconds each.

    ATTN_CACHE_DIR=out/kernels-a4 python3 bench/harness/row_variants.py A1

Prints each system's median of do_bench (L2 flushed) and of CUDA-graph
replays, in ms, and GB/s of the graph replay; checks attn's output against
the PyTorch reference of row_workloads.py."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import row_workloads  # noqa: E402
from reference import rel_error  # noqa: E402
from run_bench import bench, bench_graph  # noqa: E402


def main():
    names = sys.argv[1:] or ["A1", "M1"]
    builders = dict(row_workloads.all_workloads())
    for name in names:
        w = builders[name]()
        for system, fn in w["systems"]():
            if system not in ("attn", "copy of the same bytes"):
                continue
            err = "" if getattr(fn, "unchecked", False) else f" err {rel_error(fn(), w['reference']()):.1e}"
            ms, graph_ms = bench(fn), bench_graph(fn)
            print(f"{name} {system:24s} {ms:.4f} ms, graph {graph_ms:.4f} ms, "
                  f"{w['bytes'] / graph_ms / 1e6:.0f} GB/s{err}", flush=True)


if __name__ == "__main__":
    main()
