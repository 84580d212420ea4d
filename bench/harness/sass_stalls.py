#!/usr/bin/env python3
"""Where a kernel's warps wait, instruction by instruction, from Nsight Compute.

    python3 bench/harness/sass_stalls.py ncu-P1-sass.csv[.gz] [--top 40] [--regions]
        [--range ADDR_LO ADDR_HI] [--by-count] [--count N[,M...]]

Reads the SASS page that bench/device_steps.sh's `ncu` step writes
(`ncu --import R.ncu-rep --page source --csv --print-source sass`; the first
kernel of the file) and prints the warp-state samples by stall reason, by
opcode (with the instructions executed), and the instructions that hold the
most samples with their top reasons. `--regions` groups consecutive
instructions by how often they ran (the producer's loop, the consumers' loop,
the masked path and the epilogue fall apart this way); `--range` lists the
instructions between two addresses (their last five hex digits), with their
execution count and samples, to read a loop's schedule. `--by-count` groups the
instructions by how many times they ran, exactly: in a prefill kernel each
computing warp runs an item's code once an item and a K/V step's once a step,
so items x 8 and steps x 8 name those two (bench/NOTES.md, session 40);
`--count N` lists the opcodes and the top instructions among those that ran
N times.
"""

import argparse
import collections
import csv
import gzip
import itertools
import sys


def read(path):
    """(header index, rows) of the first kernel in the CSV."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    header = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    ix = {h: i for i, h in enumerate(rows[header])}
    body = []
    for r in rows[header + 1:]:
        if r and r[0] in ("Kernel Name", "Address"):
            break
        if len(r) >= len(ix):
            body.append(r)
    return ix, body


def num(r, ix, col):
    v = r[ix[col]]
    return int(v) if v and v not in ("-",) else 0


def opcode(source):
    parts = source.split()
    if not parts:
        return "?"
    op = parts[1] if parts[0].startswith("@") and len(parts) > 1 else parts[0]
    return op.split(".")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--regions", action="store_true")
    ap.add_argument("--range", nargs=2, metavar=("LO", "HI"))
    ap.add_argument("--by-count", action="store_true")
    ap.add_argument("--count", metavar="N[,M...]")
    a = ap.parse_args()
    ix, body = read(a.csv)
    reasons = [h for h in ix if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(num(r, ix, "# Samples") for r in body) or 1
    by_reason = collections.Counter()
    by_op, exec_op = collections.Counter(), collections.Counter()
    for r in body:
        for h in reasons:
            by_reason[h] += num(r, ix, h)
        op = opcode(r[ix["Source"]])
        by_op[op] += num(r, ix, "# Samples")
        exec_op[op] += num(r, ix, "Instructions Executed")
    executed = sum(exec_op.values()) or 1
    print(f"{total} samples, {executed / 1e6:.1f}M warp instructions executed")
    print("stall reasons (share of samples):")
    for h, v in by_reason.most_common(12):
        print(f"  {h[6:]:<20} {100 * v / total:5.1f}%")
    print("opcodes (share of samples; warp instructions executed):")
    for op, v in by_op.most_common(24):
        print(f"  {op:<12} {100 * v / total:5.1f}%  {exec_op[op] / 1e6:8.2f}M ({100 * exec_op[op] / executed:4.1f}%)")
    def reasons_of(rows):
        acc = collections.Counter()
        for r in rows:
            for h in reasons:
                acc[h] += num(r, ix, h)
        return acc

    def mix(acc):
        s = sum(acc.values()) or 1
        return ", ".join(f"{h[6:]} {100 * v / s:.0f}%" for h, v in acc.most_common(3))

    def ran(r):
        return num(r, ix, "Instructions Executed")

    def list_instructions(rows):
        for r in sorted(rows, key=lambda r: -num(r, ix, "# Samples"))[:a.top]:
            top = sorted(((num(r, ix, h), h[6:]) for h in reasons), reverse=True)[:3]
            why = ", ".join(f"{n} {v}" for v, n in top if v)
            print(f"  {100 * num(r, ix, '# Samples') / total:5.2f}% {r[ix['Address']][-5:]} "
                  f"{r[ix['Source']].strip()[:58]:<58} ran {ran(r) / 1e3:7.0f}k | {why}")

    print(f"the {a.top} instructions with the most samples:")
    list_instructions(body)
    if a.regions:
        print("regions (consecutive instructions that ran about as often; share of samples, top reasons):")
        groups = [list(g) for _, g in itertools.groupby(body, key=lambda r: ran(r) // 50000)]
        for g in groups:
            acc = reasons_of(g)
            if sum(acc.values()) > 0.005 * total:
                print(f"  {g[0][ix['Address']][-5:]}-{g[-1][ix['Address']][-5:]} ran ~{ran(g[0]) // 50000 * 50}k, "
                      f"{len(g):4d} instructions, {100 * sum(acc.values()) / total:5.1f}% | {mix(acc)}")
    if a.by_count:
        print("by execution count (instructions that ran exactly N times; share of samples, top reasons):")
        groups = collections.defaultdict(list)
        for r in body:
            groups[ran(r)].append(r)
        tallied = sorted(((sum(num(r, ix, "# Samples") for r in g), n, g) for n, g in groups.items()),
                         key=lambda t: -t[0])
        for samples, n, g in tallied[:a.top]:
            if samples < 0.001 * total:
                break
            print(f"  ran {n:>10}: {len(g):5d} instructions, {100 * samples / total:5.1f}% | {mix(reasons_of(g))}")
    if a.count:
        counts = {int(c) for c in a.count.split(",")}
        picked = [r for r in body if ran(r) in counts]
        ops, n_ops = collections.Counter(), collections.Counter()
        for r in picked:
            ops[opcode(r[ix["Source"]])] += num(r, ix, "# Samples")
            n_ops[opcode(r[ix["Source"]])] += 1
        print(f"ran {a.count} times: {len(picked)} instructions, {100 * sum(ops.values()) / total:.1f}% of the samples")
        print("  by opcode (instructions, share of all samples): " +
              ", ".join(f"{o} {n_ops[o]}/{100 * v / total:.2f}%" for o, v in ops.most_common(16)))
        list_instructions(picked)
    if a.range:
        lo, hi = a.range
        for r in body:
            if lo <= r[ix["Address"]][-5:] <= hi:
                print(f"{r[ix['Address']][-5:]} {ran(r):>8} "
                      f"{num(r, ix, '# Samples'):>6} {r[ix['Source']].strip()[:90]}")


if __name__ == "__main__":
    sys.exit(main())
