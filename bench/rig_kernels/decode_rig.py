#!/usr/bin/env python3
"""GPU rig for generated decode kernels (attn-gen-kernel --emit=cubin).

For every <name>.cubin with a <name>.cubin.json manifest in --dir:
  * correctness: fresh N(0,1) q/k/v, pages scattered by a seeded permutation,
    ragged lengths (incl. 0, 1, page-1, page+1), poisoned outputs, NaN in the
    unused tail of every last page; compared with a float32 torch reference
    (out: max abs error; lse: base 2, -inf for empty requests).
  * timing (kernels whose shape matches D1, and --time-all): D1 = batch 64 x
    2048, timed with CUDA events (median of 3 x 50 launches) next to a
    device-to-device copy measured in the same run.
Prints one JSON line per result and a summary table.
"""
import argparse, glob, json, math, os, sys, time

import numpy as np
import torch
import cupy as cp

LOG2E = 1.0 / math.log(2.0)


def load_kernel(cubin, manifest):
    mod = cp.RawModule(path=cubin)
    k = manifest["kernels"][0]
    fn = mod.get_function(k["name"])
    fn.max_dynamic_shared_size_bytes = k["shared_bytes"]
    return fn, k


def make_problem(k, kv_lens, seed, poison_tail=True):
    g = torch.Generator(device="cpu").manual_seed(seed)
    dt = torch.bfloat16 if k["dtype"] == "bf16" else torch.float16
    D, Hq, Hkv = k["head_dim"], k["num_qo_heads"], k["num_kv_heads"]
    P = k["format"]["block_cols"]
    layout = k["format"]["layout"]
    pages_per = [(n + P - 1) // P for n in kv_lens]
    total_pages = sum(pages_per) + 7  # spare pages nobody points at
    perm = torch.randperm(total_pages, generator=g)
    indptr = [0]
    for n in pages_per:
        indptr.append(indptr[-1] + n)
    indices = perm[: indptr[-1]].to(torch.int32)
    last = [((n - 1) % P) + 1 if n > 0 else 0 for n in kv_lens]
    shape = (total_pages, P, Hkv, D) if layout == "NHD" else (total_pages, Hkv, P, D)
    kc = torch.randn(shape, generator=g).to(dt)
    vc = torch.randn(shape, generator=g).to(dt)
    B = len(kv_lens)
    q = torch.randn((B, Hq, D), generator=g).to(dt)
    if poison_tail:  # unused slots of last pages hold NaN: must never leak in
        for b in range(B):
            if kv_lens[b] > 0 and last[b] < P:
                pg = int(indices[indptr[b + 1] - 1])
                if layout == "NHD":
                    kc[pg, last[b]:] = float("nan"); vc[pg, last[b]:] = float("nan")
                else:
                    kc[pg, :, last[b]:] = float("nan"); vc[pg, :, last[b]:] = float("nan")
    dev = "cuda"
    return dict(q=q.to(dev), kc=kc.to(dev), vc=vc.to(dev),
                indptr=torch.tensor(indptr, dtype=torch.int32, device=dev),
                indices=indices.to(dev),
                last=torch.tensor(last, dtype=torch.int32, device=dev),
                kv_lens=kv_lens, B=B, D=D, Hq=Hq, Hkv=Hkv, P=P, layout=layout, dt=dt)


def reference(pb, sm_scale):
    B, D, Hq, Hkv, P = pb["B"], pb["D"], pb["Hq"], pb["Hkv"], pb["P"]
    G = Hq // Hkv
    out = torch.zeros((B, Hq, D), dtype=torch.float32, device="cuda")
    lse = torch.full((B, Hq), float("-inf"), dtype=torch.float32, device="cuda")
    indptr = pb["indptr"].tolist()
    for b in range(B):
        n = pb["kv_lens"][b]
        if n == 0:
            continue
        pages = pb["indices"][indptr[b]:indptr[b + 1]].long()
        if pb["layout"] == "NHD":
            k = pb["kc"][pages].reshape(-1, Hkv, D)[:n].float()
            v = pb["vc"][pages].reshape(-1, Hkv, D)[:n].float()
        else:
            k = pb["kc"][pages].permute(0, 2, 1, 3).reshape(-1, Hkv, D)[:n].float()
            v = pb["vc"][pages].permute(0, 2, 1, 3).reshape(-1, Hkv, D)[:n].float()
        q = pb["q"][b].float().reshape(Hkv, G, D)
        s = torch.einsum("hgd,nhd->hgn", q, k) * sm_scale
        lse[b] = (torch.logsumexp(s, dim=-1) * LOG2E).reshape(Hq)
        out[b] = torch.einsum("hgn,nhd->hgd", torch.softmax(s, -1), v).reshape(Hq, D)
    return out, lse


def launch(fn, k, pb, out, lse, sm_scale, stream=None):
    grid = (pb["Hkv"], pb["B"], 1)
    block = (k["threads"], 1, 1)
    args = (np.uint64(pb["q"].data_ptr()), np.uint64(pb["kc"].data_ptr()),
            np.uint64(pb["vc"].data_ptr()), np.uint64(pb["indptr"].data_ptr()),
            np.uint64(pb["indices"].data_ptr()), np.uint64(pb["last"].data_ptr()),
            np.uint64(out.data_ptr()), np.uint64(lse.data_ptr()), np.float32(sm_scale))
    fn(grid, block, args, shared_mem=k["shared_bytes"], stream=stream)


def check(fn, k, kv_lens, seed):
    pb = make_problem(k, kv_lens, seed)
    sm_scale = 1.0 / math.sqrt(pb["D"])
    out = torch.full((pb["B"], pb["Hq"], pb["D"]), float("nan"), dtype=pb["dt"], device="cuda")
    lse = torch.full((pb["B"], pb["Hq"]), float("nan"), dtype=torch.float32, device="cuda")
    launch(fn, k, pb, out, lse, sm_scale)
    torch.cuda.synchronize()
    ro, rl = reference(pb, sm_scale)
    o = out.float()
    finite = bool(torch.isfinite(o).all())
    err_o = float((o - ro).abs().max()) if finite else float("inf")
    empty = torch.tensor([n == 0 for n in kv_lens], device="cuda")
    lse_ok_empty = bool(torch.isneginf(lse[empty]).all()) if empty.any() else True
    ne = ~empty
    err_l = float((lse[ne] - rl[ne]).abs().max()) if ne.any() else 0.0
    tol_o = 2e-2 if k["dtype"] == "bf16" else 4e-3
    ok = finite and err_o < tol_o and err_l < 1e-3 and lse_ok_empty
    return ok, err_o, err_l


def time_d1(fn, k, iters=50, reps=3):
    kv_lens = [2048] * 64
    pb = make_problem(k, kv_lens, seed=1234, poison_tail=False)
    sm_scale = 1.0 / math.sqrt(pb["D"])
    out = torch.empty((pb["B"], pb["Hq"], pb["D"]), dtype=pb["dt"], device="cuda")
    lse = torch.empty((pb["B"], pb["Hq"]), dtype=torch.float32, device="cuda")
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    for _ in range(5):
        launch(fn, k, pb, out, lse, sm_scale, stream)
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(iters):
            launch(fn, k, pb, out, lse, sm_scale, stream)
        e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / iters)
    kv_bytes = 2 * sum(kv_lens) * pb["Hkv"] * pb["D"] * 2
    return float(np.median(ts)), kv_bytes


def copy_bw(nbytes=1 << 30, iters=20):
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        b.copy_(a)
    e.record(); torch.cuda.synchronize()
    ms = s.elapsed_time(e) / iters
    return 2 * nbytes / (ms * 1e-3) / 1e9  # GB/s, read + write


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="out")
    ap.add_argument("--time-all", action="store_true")
    args = ap.parse_args()
    print(json.dumps({"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d %H:%M"),
                      "torch": torch.__version__}), flush=True)
    bw = copy_bw()
    print(json.dumps({"copy_GBps": round(bw, 1)}), flush=True)
    passed = failed = 0
    rows = []
    for mpath in sorted(glob.glob(os.path.join(args.dir, "*.cubin.json"))):
        manifest = json.load(open(mpath))
        if manifest["arch"] not in ("sm_90", "sm_90a"):
            continue
        fn, k = load_kernel(mpath[:-5], manifest)
        P = k["format"]["block_cols"]
        cases = [[1, 0, 17, P - 1 if P > 1 else 2, P + 1, 300, 2048, 5],
                 [2048] * 8,
                 [0, 0, 0],
                 list(np.random.RandomState(7).randint(1, 4000, size=24))]
        for ci, lens in enumerate(cases):
            ok, eo, el = check(fn, k, [int(x) for x in lens], seed=100 + ci)
            passed += ok; failed += (not ok)
            print(json.dumps({"kernel": k["name"], "case": ci, "ok": ok, "max_err_out": eo,
                              "max_err_lse": el}), flush=True)
        d1 = (k["head_dim"] == 128 and k["num_qo_heads"] == 32 and k["num_kv_heads"] == 8
              and P == 16 and k["dtype"] == "bf16")
        if d1 or args.time_all:
            ms, kvb = time_d1(fn, k)
            gbps = kvb / (ms * 1e-3) / 1e9
            rows.append((k["name"], k.get("resources", {}).get("registers"), ms, gbps, 100 * gbps / bw))
            print(json.dumps({"kernel": k["name"], "d1_ms": round(ms, 4), "GBps": round(gbps, 1),
                              "pct_copy": round(100 * gbps / bw, 1)}), flush=True)
    print(f"\nPASS {passed} FAIL {failed}; copy {bw:.0f} GB/s")
    print("| kernel | regs | D1 ms | KV GB/s | % of copy |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.4f} | {r[3]:.0f} | {r[4]:.1f} |")
    sys.exit(0 if failed == 0 else 1)


if __name__ == "__main__":
    main()
