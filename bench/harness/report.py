"""Tables and plots of a benchmark run."""

import os


def one_line(row):
    if "error" in row:
        return f"{row['workload']:8s} {row['system']:34s} {row['error']}"
    fig = (f"{row['GBps']:7.0f} GB/s" if "GBps" in row
           else f"{row.get('TFLOPs', 0):6.1f} TFLOP/s")
    ok = "ok" if row.get("correct") else "WRONG"
    return (f"{row['workload']:8s} {row['system']:34s} {row['ms']:9.4f} ms "
            f"{fig} {row.get('pct_ceiling', 0):5.1f}%  err {row['rel_err']:.1e} {ok}")


def markdown(result):
    meta, rows = result["meta"], result["rows"]
    out = [f"# Benchmark run: {meta['device']}, {meta['date']}", "",
           f"commit {meta['commit']}, torch {meta['torch']}, triton {meta['triton']}", "",
           f"Ceilings measured in this run: device-to-device copy "
           f"{meta['copy_GBps']:.0f} GB/s (read + write), bf16 matmul 8192^3 "
           f"{meta['matmul_TFLOPs']:.0f} TFLOP/s.", "",
           f"attn: {meta['attn']}", "",
           "| workload | system | time (ms) | CUDA graph (ms) | figure | % of ceiling | vs best peer | rel. error |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    best_peer = {}
    for r in rows:
        if "ms" in r and r.get("correct") and not r["system"].startswith("attn"):
            best_peer[r["workload"]] = min(best_peer.get(r["workload"], 1e30), r["ms"])
    for r in rows:
        if "error" in r:
            out.append(f"| {r['workload']} | {r['system']} | — | — | — | — | — | {r['error']} |")
            continue
        fig = (f"{r['GBps']:.0f} GB/s" if "GBps" in r else f"{r['TFLOPs']:.0f} TFLOP/s")
        graph = f"{r['graph_ms']:.4f}" if "graph_ms" in r else "—"
        peer = best_peer.get(r["workload"])
        ratio = f"{peer / r['ms']:.2f}x" if peer else "—"
        err = f"{r['rel_err']:.1e}" + ("" if r["correct"] else " WRONG")
        out.append(f"| {r['workload']} | {r['system']} | {r['ms']:.4f} | {graph} | "
                   f"{fig} | {r['pct_ceiling']:.0f}% | {ratio} | {err} |")
    out.append("")
    out.append("'vs best peer' is the best correct PyTorch time over this system's time "
               "(> 1 is faster than PyTorch).")
    return "\n".join(out) + "\n"


def plots(result, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = [r for r in result["rows"] if "ms" in r and r.get("correct")]
    for kind, key, label, fname in [
            ("D", "GBps", "GB/s (KV bytes read / time)", "decode.png"),
            ("P", "TFLOPs", "TFLOP/s (causal FLOPs / time)", "prefill.png")]:
        sel = [r for r in rows if r["workload"].startswith(kind)]
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
        ceiling = result["meta"]["copy_GBps" if kind == "D" else "matmul_TFLOPs"]
        ax.axhline(ceiling, color="k", linestyle="--", linewidth=1, label="ceiling (measured)")
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(workloads))], workloads)
        ax.set_ylabel(label)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, fname), dpi=110)
        plt.close(fig)
