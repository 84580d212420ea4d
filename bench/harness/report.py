"""Tables and plots of a benchmark run."""

import os


def one_line(row):
    if "error" in row:
        return f"{row['workload']:8s} {row['system']:34s} {row['error']}"
    fig = (f"{row['GBps']:7.0f} GB/s" if "GBps" in row
           else f"{row.get('TFLOPs', 0):6.1f} TFLOP/s")
    if row.get("baseline"):
        check = "baseline"
    else:
        check = f"err {row['rel_err']:.1e} " + ("ok" if row.get("correct") else "WRONG")
    return (f"{row['workload']:8s} {row['system']:34s} {row['ms']:9.4f} ms "
            f"{fig} {row.get('pct_ceiling', 0):5.1f}%  {check}")


def markdown(result):
    meta, rows = result["meta"], result["rows"]
    out = [f"# Benchmark run: {meta['device']}, {meta['date']}", "",
           f"commit {meta['commit']}, torch {meta['torch']}, triton {meta['triton']}", "",
           f"Ceilings measured in this run: device-to-device copy "
           f"{meta['copy_GBps']:.0f} GB/s (read + write), bf16 matmul 8192^3 "
           f"{meta['matmul_TFLOPs']:.0f} TFLOP/s.", "",
           f"attn: {meta['attn']}", "",
           "| workload | system | time (ms) | CUDA graph (ms) | figure | % of ceiling | vs best peer "
           "| rel. error | plan (µs) |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    best_peer = {}
    for r in rows:
        if "ms" in r and r.get("correct") and not r["system"].startswith("attn") and not r.get("baseline"):
            best_peer[r["workload"]] = min(best_peer.get(r["workload"], 1e30), r["ms"])
    for r in rows:
        if "error" in r:
            out.append(f"| {r['workload']} | {r['system']} | — | — | — | — | — | {r['error']} | — |")
            continue
        fig = (f"{r['GBps']:.0f} GB/s" if "GBps" in r else f"{r['TFLOPs']:.0f} TFLOP/s")
        graph = f"{r['graph_ms']:.4f}" if "graph_ms" in r else "—"
        peer = best_peer.get(r["workload"])
        ratio = f"{peer / r['ms']:.2f}x" if peer else "—"
        err = "— (baseline)" if r.get("baseline") else f"{r['rel_err']:.1e}" + ("" if r["correct"] else " WRONG")
        plan = f"{r['plan_us']:.0f}" if "plan_us" in r else "—"
        out.append(f"| {r['workload']} | {r['system']} | {r['ms']:.4f} | {graph} | "
                   f"{fig} | {r['pct_ceiling']:.0f}% | {ratio} | {err} | {plan} |")
    out.append("")
    out.append("'vs best peer' is the best correct PyTorch time over this system's time "
               "(> 1 is faster than PyTorch). 'plan' is the host time of the wrapper's whole "
               "plan() (checks, the C++ planner, the async upload), median of 20.")
    out += _sweep_tables(result.get("sweeps", []))
    out += _compile_table(meta.get("compile", []))
    return "\n".join(out) + "\n"


def _sweep_tables(rows):
    out = []
    for sweep, (xlabel, key, unit, _) in _sweeps().items():
        sel = [r for r in rows if r.get("sweep") == sweep]
        if not sel:
            continue
        systems = sorted({r["system"] for r in sel})
        xs = sorted({r["x"] for r in sel})
        out += ["", f"### {sweep}: {unit} against {xlabel}", "",
                "| x | " + " | ".join(systems) + " |", "| --- |" + " --- |" * len(systems)]
        for x in xs:
            cells = []
            for s in systems:
                r = next((r for r in sel if r["x"] == x and r["system"] == s), None)
                if r is None or "error" in r:
                    cells.append("n/a")
                elif not r.get("correct"):
                    cells.append(f"WRONG ({r['rel_err']:.1e})")
                else:
                    cells.append(f"{r[key]:.0f} ({r['pct_ceiling']:.0f}%)")
            out.append(f"| {x:g} | " + " | ".join(cells) + " |")
    return out


def _compile_table(entries):
    if not entries:
        return []
    # Code entries (one per tile candidate) first; the manifest-only entries
    # (launch contracts, no code) take milliseconds.
    code = [e for e in entries if e.get("emit") != "manifest"]
    totals = sorted(sum(ms for _, ms in e["stages_ms"]) for e in code)
    out = ["", "### Compile times of the kernel modules in the run's kernel cache (attn IR "
           "to cubin, recorded when compiled on the development machine)", ""]
    if totals:
        out += [f"{len(totals)} modules with code: median {totals[len(totals) // 2]:.0f} ms, "
                f"max {totals[-1]:.0f} ms, {sum(t < 1000 for t in totals)} under 1 s.", ""]
    out += ["| module | what | total (ms) | stages (ms) |", "| --- | --- | --- | --- |"]
    for e in code + [e for e in entries if e.get("emit") == "manifest"]:
        total = sum(ms for _, ms in e["stages_ms"])
        stages = ", ".join(f"{n} {ms:.0f}" for n, ms in e["stages_ms"])
        what = ("launch contracts" if e.get("emit") == "manifest" else
                "every candidate" if e.get("candidate") is None else f"candidate {e['candidate']}")
        out.append(f"| `{e['spec']}` {e['arch']} | {what} | {total:.0f} | {stages} |")
    return out


def _sweeps():
    import sweeps
    return sweeps.SWEEPS


def plots(result, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = [r for r in result["rows"] if "ms" in r and r.get("correct")]
    # Each workload is plotted in the figure it reports (workloads.py's metric).
    for key, label, fname in [
            ("GBps", "GB/s (KV bytes read / time)", "bandwidth.png"),
            ("TFLOPs", "TFLOP/s (causal FLOPs / time)", "compute.png")]:
        sel = [r for r in rows if key in r]
        if not sel:
            continue
        workloads = sorted({r["workload"] for r in sel})
        systems = sorted({r["system"] for r in sel})
        fig, ax = plt.subplots(figsize=(10, 4.5))
        width = 0.8 / len(systems)
        for i, s in enumerate(systems):
            ys = [next((r[key] for r in sel if r["workload"] == w and r["system"] == s), 0)
                  for w in workloads]
            ax.bar([x + i * width for x in range(len(workloads))], ys, width, label=s)
        ceiling = result["meta"]["copy_GBps" if key == "GBps" else "matmul_TFLOPs"]
        ax.axhline(ceiling, color="k", linestyle="--", linewidth=1, label="ceiling (measured)")
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(workloads))], workloads)
        ax.set_ylabel(label)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, fname), dpi=110)
        plt.close(fig)
    meta = result["meta"]
    for sweep, (xlabel, key, unit, fname) in _sweeps().items():
        sel = [r for r in result.get("sweeps", []) if r.get("sweep") == sweep
               and "ms" in r and r.get("correct")]
        if not sel:
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        for s in sorted({r["system"] for r in sel}):
            pts = sorted((r["x"], r[key]) for r in sel if r["system"] == s)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s)
        ceiling = meta["copy_GBps" if key == "GBps" else "matmul_TFLOPs"]
        ax.axhline(ceiling, color="k", linestyle="--", linewidth=1, label="ceiling (measured)")
        if sweep in ("decode-kv-len", "prefill-seq-len"):
            ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, fname), dpi=110)
        plt.close(fig)
