#!/usr/bin/env python3
"""What paging costs a prefill: the same prefill batch through attn's paged
prefill wrapper (16-token pages scattered as in the benchmark) and its ragged
one (each request's K/V contiguous), same tile choice, same checks; and, as
"shared", the paged batch with every request reading the same pages (request
b's i-th page is page i of the pool): the K/V the batch touches then fits in
L2, which bounds what the order of the work could gain.

    python3 bench/harness/paging_cost.py            # P2, P5, P5-full, every layout
    python3 bench/harness/paging_cost.py P5 ragged  # one case (for ncu)
    PAGE=1 python3 bench/harness/paging_cost.py P2 paged   # another page size

Figures: triton do_bench median (L2 flushed between calls), TFLOP/s (the
FLOPs the mask leaves: all of them for P5-full); each output checked against
the float32 reference of the benchmark. Needs what bench/gpu_run.sh sets up
(PYTHONPATH, ATTN_CACHE_DIR)."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads  # noqa: E402
from reference import reference, rel_error  # noqa: E402
from workloads import HKV, HQ  # noqa: E402

# The pages' size (the benchmark's 16 unless PAGE says otherwise).
workloads.PAGE = int(os.environ.get("PAGE", workloads.PAGE))

def unmasked(w):
    """w without the causal mask (every row sees every key)."""
    w = dict(w, causal=False)
    w["flops"] = sum(4 * HQ * w["head_dim"] * qo * kv for qo, kv in zip(w["qo_lens"], w["kv_lens"]))
    return w


CASES = {
    "P2": lambda: workloads.prefill("P2", workloads.P2_LENS, paged=True),
    "P5": lambda: workloads.append("P5", [512] * 16, [4096] * 16, "TFLOPs"),
    # P5's batch without the mask (bidirectional chunks, a cascade's level).
    "P5-full": lambda: unmasked(workloads.append("P5-full", [512] * 16, [4096] * 16, "TFLOPs")),
}


def contiguous(w):
    """The paged workload's K/V gathered per request into [tokens, HKV, D]."""
    k, v = [], []
    indptr, idx = w["kv_indptr"].tolist(), w["kv_indices"].long()
    for r, n in enumerate(w["kv_lens"]):
        pages = idx[indptr[r]:indptr[r + 1]]
        k.append(w["k_cache"][pages].flatten(0, 1)[:n])
        v.append(w["v_cache"][pages].flatten(0, 1)[:n])
    kv_indptr = torch.tensor([0] + list(workloads.itertools_accumulate(w["kv_lens"])),
                             dtype=torch.int32)
    return torch.cat(k), torch.cat(v), kv_indptr


def shared(w):
    """w with every request's pages the first pages of the pool."""
    w = dict(w)
    indptr = w["kv_indptr"].tolist()
    w["kv_indices"] = torch.cat([torch.arange(indptr[r + 1] - indptr[r], dtype=torch.int32)
                                 for r in range(len(indptr) - 1)]).cuda()
    return w


def runner(attn, w, layout):
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    d, qo = w["head_dim"], w["qo_indptr"].cpu()
    if layout == "paged":
        wr = attn.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD")
        wr.plan(qo, w["kv_indptr"].cpu(), w["kv_indices"], w["kv_last_page_len"].cpu(),
                HQ, HKV, d, workloads.PAGE, causal=w["causal"], q_data_type=torch.bfloat16)
        kv = (w["k_cache"], w["v_cache"])
        return wr, lambda: wr.run(w["q"], kv)
    k, v, kv_indptr = contiguous(w)
    wr = attn.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD")
    wr.plan(qo, kv_indptr, HQ, HKV, d, causal=w["causal"], q_data_type=torch.bfloat16)
    return wr, lambda: wr.run(w["q"], k, v)


def main():
    import attn
    import triton.testing
    names = [sys.argv[1]] if len(sys.argv) > 1 else list(CASES)
    layouts = [sys.argv[2]] if len(sys.argv) > 2 else ["paged", "ragged", "shared"]
    for name in names:
        base = CASES[name]()
        ref = reference(base)
        for layout in layouts:
            w = shared(base) if layout == "shared" else base
            wr, fn = runner(attn, w, "paged" if layout == "shared" else layout)
            err = rel_error(fn(), reference(w) if layout == "shared" else ref)
            if os.environ.get("PROFILE_ONLY"):
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
                print(f"{name} {layout}: profiled", flush=True)
                continue
            ms = triton.testing.do_bench(fn, warmup=25, rep=300, return_mode="median")
            print(f"{name} page {workloads.PAGE} {layout:6s} {ms:.4f} ms {w['flops'] / ms / 1e9:6.0f} TFLOP/s "
                  f"err {err:.1e}", flush=True)
        del w, base, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
