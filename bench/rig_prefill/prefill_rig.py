#!/usr/bin/env python3
"""GPU rig for generated work-list prefill kernels (attn-compile, from gen_kernels.sh).

For every <name>/attn_kernels.cubin + attn_kernels.json in --dir (its attention kernel):
  * correctness against a float32 torch reference: fresh N(0,1) inputs, poisoned
    outputs (NaN), NaN in the unused tail of last pages, ragged or paged (scattered
    pages), appends (qo_len < kv_len), qo_len 1, empty requests, qo_len > kv_len,
    and one case with split KV (partial slots + LSE, merged here in torch).
  * timing of the docs/Benchmarks.md P1/P2/P3 shapes the kernel fits, next to torch SDPA
    (flash backend) and a bf16 8192^3 matmul measured in the same run.

The work list comes from a small Python planner mirroring attn/Runtime/Plan.h:
one item per (request, head group, tile of Q packed rows), greedily balanced over
a persistent grid by the causal cost (visible keys).
"""
import argparse, glob, json, math, os, sys, time

import numpy as np
import torch
import cupy as cp

LOG2E = 1.0 / math.log(2.0)
DEV = "cuda"
NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count


def load_kernel(mpath):
    man = json.load(open(mpath))
    k = [k for k in man["kernels"] if k["role"] == "attention"][0]
    fn = cp.RawModule(path=os.path.join(os.path.dirname(mpath), "attn_kernels.cubin")).get_function(k["name"])
    fn.max_dynamic_shared_size_bytes = k["shared_bytes"]
    return fn, k


def assign(items, costs, C, sched, KV, fixed):
    """Items -> per-CTA lists under a schedule (the rig's experiments):
      lpt         longest first onto the least loaded CTA (cost: visible keys + 2 tiles)
      walk        the runtime planner's no-split walk: items in (request, row tile, head
                  group) order, CTA after CTA up to a running target of remaining cost /
                  remaining CTAs
      walk-desc   the same walk over the items longest first
      *-round     costs count whole KV tiles (what the kernel iterates)
    `fixed` replaces the per-item cost (default 2 KV tiles)."""
    import heapq
    n = len(items)
    base = sched.replace("-round", "")
    fx = 2 * KV if fixed is None else fixed
    cost = []
    for i in range(n):
        keys = costs[i] - 2 * KV
        if sched.endswith("-round"):
            keys = -(-keys // KV) * KV
        cost.append(keys + fx)
    per = [[] for _ in range(C)]
    if base == "lpt":
        heap = [(0, c) for c in range(C)]
        for i in sorted(range(n), key=lambda i: -cost[i]):
            l, c = heapq.heappop(heap)
            per[c].append(i)
            heapq.heappush(heap, (l + cost[i], c))
        return per
    order = list(range(n))
    if base == "walk":
        order.sort(key=lambda i: (items[i][0], items[i][2], items[i][1]))
    elif base == "walk-desc":
        order.sort(key=lambda i: -cost[i])
    else:
        raise ValueError(f"unknown schedule {sched}")
    left, cta, acc = sum(cost), 0, 0
    target = -(-left // C)
    for i in order:
        c = cost[i]
        if cta < C - 1 and acc > 0 and acc + c > target and acc + c - target > target - acc:
            left -= acc; cta += 1; acc = 0
            target = -(-left // (C - cta))
        per[cta].append(i)
        acc += c
        if cta < C - 1 and acc >= target:
            left -= acc; cta += 1; acc = 0
            target = -(-left // (C - cta))
    return per


# ----------------------------------------------------------------------------
# Planner (mirrors Plan.h's flat layout only as far as the kernel reads it)
# ----------------------------------------------------------------------------

def plan(k, qo_lens, kv_lens, causal, split=False, ctas=None, sched="lpt", fixed=None):
    Q, P = k["tile"]["q"], k["tile"]["gqa_pack"]
    KV = k["tile"]["kv"]
    groups = k["num_qo_heads"] // P
    items, costs = [], []
    slot = 0
    merges = []  # (request, group, row_begin, row_count, [slots])
    for b, (qo, kv) in enumerate(zip(qo_lens, kv_lens)):
        rows = qo * P
        for hg in range(groups):
            for r0 in range(0, rows, Q):
                rc = min(Q, rows - r0)
                last_pos = kv - qo + (r0 + rc - 1) // P
                vis = min(kv, last_pos + 1) if causal else kv
                vis = max(vis, 0)
                if split and vis > 2 * KV:
                    mid = (vis // 2) // KV * KV
                    sl = []
                    for (a, e, fl) in ((0, mid, 1), (mid, kv, 2)):
                        items.append([b, hg, r0, rc, a, e, slot, fl])
                        costs.append(min(e, vis) - a + 2 * KV)
                        sl.append(slot); slot += 1
                    merges.append((b, hg, r0, rc, sl))
                else:
                    items.append([b, hg, r0, rc, 0, kv, -1, 4 | 1 | 2])
                    costs.append(vis + 2 * KV)
    n = len(items)
    C = ctas or max(1, min(n, NUM_SMS * k.get("_ctas_per_sm", 1)))
    per = assign(items, costs, C, sched, KV, fixed)
    indptr = [0]
    flat = []
    for c in range(C):
        for i in per[c]:
            flat.append(items[i])
        indptr.append(len(flat))
    return dict(
        num_ctas=C,
        cta_indptr=torch.tensor(indptr, dtype=torch.int32, device=DEV),
        work_items=torch.tensor(flat if flat else [[0] * 8], dtype=torch.int32, device=DEV).reshape(-1),
        num_slots=slot, merges=merges, slot_rows=Q)


# ----------------------------------------------------------------------------
# Problems
# ----------------------------------------------------------------------------

def make_problem(k, qo_lens, kv_lens, seed, poison_tail=True):
    g = torch.Generator(device="cpu").manual_seed(seed)
    dt = torch.bfloat16 if k["dtype"] == "bf16" else torch.float16
    D, Hq, Hkv = k["head_dim"], k["num_qo_heads"], k["num_kv_heads"]
    fmt = k["format"]
    paged = fmt["indexing"] == "paged"
    PS = fmt["block_cols"]
    qo_indptr = np.concatenate([[0], np.cumsum(qo_lens)]).astype(np.int32)
    q = torch.randn((int(qo_indptr[-1]), Hq, D), generator=g).to(dt)
    pb = dict(B=len(qo_lens), D=D, Hq=Hq, Hkv=Hkv, dt=dt, paged=paged, PS=PS,
              layout=fmt["layout"], qo_lens=list(qo_lens), kv_lens=list(kv_lens))
    if paged:
        pages_per = [(n + PS - 1) // PS for n in kv_lens]
        total = sum(pages_per) + 5
        perm = torch.randperm(total, generator=g)
        indptr = np.concatenate([[0], np.cumsum(pages_per)]).astype(np.int32)
        indices = perm[: int(indptr[-1])].to(torch.int32)
        last = [((n - 1) % PS) + 1 if n > 0 else 0 for n in kv_lens]
        shape = (total, PS, Hkv, D) if fmt["layout"] == "NHD" else (total, Hkv, PS, D)
        kc = torch.randn(shape, generator=g).to(dt)
        vc = torch.randn(shape, generator=g).to(dt)
        if poison_tail:
            for b in range(len(kv_lens)):
                if kv_lens[b] > 0 and last[b] < PS:
                    pg = int(indices[indptr[b + 1] - 1])
                    if fmt["layout"] == "NHD":
                        kc[pg, last[b]:] = float("nan"); vc[pg, last[b]:] = float("nan")
                    else:
                        kc[pg, :, last[b]:] = float("nan"); vc[pg, :, last[b]:] = float("nan")
        pb.update(kv_indptr=torch.tensor(indptr, device=DEV), kv_indices=indices.to(DEV).contiguous(),
                  kv_last=torch.tensor(last, dtype=torch.int32, device=DEV))
    else:
        indptr = np.concatenate([[0], np.cumsum(kv_lens)]).astype(np.int32)
        kc = torch.randn((int(indptr[-1]) + 1, Hkv, D), generator=g).to(dt)
        vc = torch.randn((int(indptr[-1]) + 1, Hkv, D), generator=g).to(dt)
        pb.update(kv_indptr=torch.tensor(indptr, device=DEV))
    pb.update(q=q.to(DEV), kc=kc.to(DEV), vc=vc.to(DEV),
              qo_indptr=torch.tensor(qo_indptr, device=DEV))
    return pb


def request_kv(pb, b):
    ip = pb["kv_indptr"].tolist()
    n = pb["kv_lens"][b]
    if not pb["paged"]:
        return pb["kc"][ip[b]:ip[b] + n], pb["vc"][ip[b]:ip[b] + n]
    pages = pb["kv_indices"][ip[b]:ip[b + 1]].long()
    D, Hkv = pb["D"], pb["Hkv"]
    if pb["layout"] == "NHD":
        k = pb["kc"][pages].reshape(-1, Hkv, D)[:n]; v = pb["vc"][pages].reshape(-1, Hkv, D)[:n]
    else:
        k = pb["kc"][pages].permute(0, 2, 1, 3).reshape(-1, Hkv, D)[:n]
        v = pb["vc"][pages].permute(0, 2, 1, 3).reshape(-1, Hkv, D)[:n]
    return k, v


def reference(pb, sm_scale, causal):
    Hq, Hkv, D = pb["Hq"], pb["Hkv"], pb["D"]
    G = Hq // Hkv
    T = pb["q"].shape[0]
    out = torch.zeros((T, Hq, D), dtype=torch.float32, device=DEV)
    lse = torch.full((T, Hq), float("-inf"), dtype=torch.float32, device=DEV)
    qi = pb["qo_indptr"].tolist()
    for b in range(pb["B"]):
        qo, kv = pb["qo_lens"][b], pb["kv_lens"][b]
        if qo == 0 or kv == 0:
            continue
        k, v = request_kv(pb, b)
        k = k.float().repeat_interleave(G, dim=1); v = v.float().repeat_interleave(G, dim=1)
        q = pb["q"][qi[b]:qi[b] + qo].float()
        s = torch.einsum("ihd,jhd->hij", q, k) * sm_scale
        if causal:
            pos = torch.arange(qo, device=DEV)[:, None] + (kv - qo)
            s = s.masked_fill(torch.arange(kv, device=DEV)[None, :] > pos, float("-inf"))
        l = torch.logsumexp(s, dim=-1)  # [h, i]
        p = torch.where(torch.isfinite(l)[..., None], torch.exp(s - l[..., None]), torch.zeros_like(s))
        out[qi[b]:qi[b] + qo] = torch.einsum("hij,jhd->ihd", p, v)
        lse[qi[b]:qi[b] + qo] = (l * LOG2E).transpose(0, 1)
    return out, lse


def kernel_args(k, pb, pl, o, lse, po, plse, sm_scale):
    """The kernel's arguments in the order its contract names them
    (attn_kernels.json's `args`): the rig binds each role by name, so a kernel
    whose argument list grew (page stride, page count and index-error word of
    the paged kernels) gets what it declares, or a KeyError naming what the
    rig lacks, never a misaligned argument list. Bound once per problem, not
    in the timed loop."""
    u = lambda t: np.uint64(t.data_ptr())
    if pb["paged"] and "index_error" not in pb:
        pb["index_error"] = torch.zeros(1, dtype=torch.int32, device=DEV)
    page_elems = pb["kc"][0].numel() if pb["paged"] else 0
    values = {
        "cta_indptr": lambda: u(pl["cta_indptr"]), "work_items": lambda: u(pl["work_items"]),
        "partial_o": lambda: u(po), "partial_lse": lambda: u(plse),
        "slot_rows": lambda: np.int32(pl["slot_rows"]),
        "q": lambda: u(pb["q"]), "k_cache": lambda: u(pb["kc"]), "v_cache": lambda: u(pb["vc"]),
        "k": lambda: u(pb["kc"]), "v": lambda: u(pb["vc"]),
        "o": lambda: u(o), "lse": lambda: u(lse),
        "qo_indptr": lambda: u(pb["qo_indptr"]), "kv_indptr": lambda: u(pb["kv_indptr"]),
        "kv_indices": lambda: u(pb["kv_indices"]), "kv_last_len": lambda: u(pb["kv_last"]),
        "page_stride": lambda: np.int64(page_elems), "num_pages": lambda: np.int32(pb["kc"].shape[0]),
        "index_error": lambda: u(pb["index_error"]), "sm_scale": lambda: np.float32(sm_scale),
    }
    args = []
    for a in k["args"]:
        if a["name"] not in values:
            raise KeyError(f"the rig has no value for kernel argument {a['name']!r} ({a.get('kind')})")
        args.append(values[a["name"]]())
    return tuple(args)


def launch(fn, k, pl, args, stream=None):
    fn((pl["num_ctas"], 1, 1), (k["threads"], 1, 1), args, shared_mem=k["shared_bytes"], stream=stream)


def merge_partials(pb, k, pl, po, plse, o, lse):
    P = k["tile"]["gqa_pack"]
    qi = pb["qo_indptr"].tolist()
    for (b, hg, r0, rc, slots) in pl["merges"]:
        rows = torch.arange(r0, r0 + rc, device=DEV)
        tok = qi[b] + rows // P
        head = hg * P + rows % P
        ls = torch.stack([plse[s, :rc] for s in slots])          # [n, rc]
        os_ = torch.stack([po[s, :rc] for s in slots])           # [n, rc, D]
        m = ls.max(0).values
        mu = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        w = torch.exp2(ls - mu)
        tot = w.sum(0)
        res = (w[..., None] * os_).sum(0) / torch.where(tot > 0, tot, torch.ones_like(tot))[:, None]
        o[tok, head] = res.to(o.dtype)
        lse[tok, head] = torch.where(tot > 0, mu + torch.log2(tot), torch.full_like(tot, float("-inf")))


def check(fn, k, qo_lens, kv_lens, seed, causal, split=False):
    pb = make_problem(k, qo_lens, kv_lens, seed)
    sm_scale = 1.0 / math.sqrt(pb["D"])
    pl = plan(k, qo_lens, kv_lens, causal, split=split)
    T = pb["q"].shape[0]
    o = torch.full((T, pb["Hq"], pb["D"]), float("nan"), dtype=pb["dt"], device=DEV)
    lse = torch.full((T, pb["Hq"]), float("nan"), dtype=torch.float32, device=DEV)
    ns = max(pl["num_slots"], 1)
    po = torch.full((ns, pl["slot_rows"], pb["D"]), float("nan"), dtype=torch.float32, device=DEV)
    plse = torch.full((ns, pl["slot_rows"]), float("nan"), dtype=torch.float32, device=DEV)
    launch(fn, k, pl, kernel_args(k, pb, pl, o, lse, po, plse, sm_scale))
    torch.cuda.synchronize()
    if split:
        merge_partials(pb, k, pl, po, plse, o, lse)
    ro, rl = reference(pb, sm_scale, causal)
    of = o.float()
    finite = bool(torch.isfinite(of).all())
    err_o = float((of - ro).abs().max()) if finite and T else (0.0 if finite else float("inf"))
    rel = float((of - ro).norm() / ro.norm().clamp_min(1e-6)) if finite and T else 0.0
    fin = torch.isfinite(rl)
    lse_inf_ok = bool(torch.isneginf(lse[~fin]).all())
    err_l = float((lse[fin] - rl[fin]).abs().max()) if fin.any() else 0.0
    if math.isnan(err_l):
        err_l = float("inf")
    tol_o = 3e-2 if k["dtype"] == "bf16" else 5e-3
    ok = finite and err_o < tol_o and err_l < 2e-3 and lse_inf_ok
    return ok, err_o, rel, err_l


# ----------------------------------------------------------------------------
# Timing
# ----------------------------------------------------------------------------

def bench(f, iters=20, reps=5):
    for _ in range(3):
        f()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(iters):
            f()
        e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / iters)
    return float(np.median(ts))


def matmul_tflops():
    a = torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=DEV, dtype=torch.bfloat16)
    ms = bench(lambda: a @ b, iters=10)
    return 2 * 8192 ** 3 / (ms * 1e-3) / 1e12


def causal_flops(qo_lens, kv_lens, D, H):
    return sum(4 * q * kv * D * H / 2 for q, kv in zip(qo_lens, kv_lens))


def time_kernel(fn, k, qo_lens, kv_lens, ctas_per_sm, sched="lpt", fixed=None, pb=None):
    pb = pb or make_problem(k, qo_lens, kv_lens, seed=7, poison_tail=False)
    kk = dict(k); kk["_ctas_per_sm"] = ctas_per_sm
    pl = plan(kk, qo_lens, kv_lens, True, sched=sched, fixed=fixed)
    T = pb["q"].shape[0]
    o = torch.empty((T, pb["Hq"], pb["D"]), dtype=pb["dt"], device=DEV)
    lse = torch.empty((T, pb["Hq"]), dtype=torch.float32, device=DEV)
    po = torch.empty((1, pl["slot_rows"], pb["D"]), dtype=torch.float32, device=DEV)
    plse = torch.empty((1, pl["slot_rows"]), dtype=torch.float32, device=DEV)
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    sm_scale = 1.0 / math.sqrt(pb["D"])
    args = kernel_args(k, pb, pl, o, lse, po, plse, sm_scale)
    ms = bench(lambda: launch(fn, k, pl, args, stream))
    return ms, pb, o


def sdpa_time(pb, qo_lens, kv_lens):
    from torch.nn.attention import sdpa_kernel, SDPBackend
    G = pb["Hq"] // pb["Hkv"]
    qi = pb["qo_indptr"].tolist()
    qs, ks, vs = [], [], []
    for b in range(pb["B"]):
        k, v = request_kv(pb, b)
        qs.append(pb["q"][qi[b]:qi[b + 1]].transpose(0, 1)[None].contiguous())
        ks.append(k.repeat_interleave(G, 1).transpose(0, 1)[None].contiguous())
        vs.append(v.repeat_interleave(G, 1).transpose(0, 1)[None].contiguous())
    F = torch.nn.functional.scaled_dot_product_attention
    outs = []
    def run():
        outs.clear()
        for q, k, v in zip(qs, ks, vs):
            outs.append(F(q, k, v, is_causal=True))
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        ms = bench(run, iters=10)
    return ms, outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="out/prefill")
    ap.add_argument("--no-time", action="store_true")
    ap.add_argument("--schedules", default="",
                    help="comma-separated schedules (see assign()) to time on each perf kernel, "
                         "each optionally with :fixed cost, e.g. walk,lpt,walk-round:384")
    args = ap.parse_args()
    info = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d %H:%M"),
            "torch": torch.__version__, "sms": NUM_SMS}
    print(json.dumps(info), flush=True)
    passed = failed = 0
    rows = []
    for mpath in sorted(glob.glob(os.path.join(args.dir, "*", "attn_kernels.json"))):
        fn, k = load_kernel(mpath)
        causal = "causal" in k.get("variants", [])
        tag = os.path.basename(os.path.dirname(mpath))
        if not tag.startswith("perf_"):
            cases = [
                ([1, 17, 128, 200, 0, 64], [1, 17, 128, 200, 0, 64], False),   # square, qo 1, empty
                ([5, 1, 100, 33], [300, 77, 100, 500], False),                   # appends
                ([300, 7], [200, 7], False),                                     # qo_len > kv_len
                ([0, 0], [0, 10], False),                                        # empty queries
                ([700, 129], [1500, 129], True),                                 # split KV, merged
            ]
            for ci, (qo, kv, split) in enumerate(cases):
                try:
                    ok, eo, rel, el = check(fn, k, qo, kv, seed=100 + ci, causal=causal, split=split)
                except Exception as ex:  # a crash is a failure, not a rig abort
                    ok, eo, rel, el = False, float("inf"), float("inf"), float("inf")
                    print("EXC", tag, ci, repr(ex), flush=True)
                passed += ok; failed += (not ok)
                print(json.dumps({"kernel": tag, "case": ci, "causal": causal, "ok": ok,
                                  "max_err_o": eo, "rel_err_o": rel, "max_err_lse": el}), flush=True)
    if failed or args.no_time:
        print(f"\nPASS {passed} FAIL {failed}")
        if failed:
            sys.exit(1)
    mm = matmul_tflops()
    print(json.dumps({"matmul_bf16_8192_tflops": round(mm, 1)}), flush=True)
    P2 = [1024, 256, 3840, 2048, 512, 3072, 1536, 4096, 768, 2816, 1280, 3584, 1792, 2304, 3328, 2560]
    for mpath in sorted(glob.glob(os.path.join(args.dir, "perf_*", "attn_kernels.json"))):
        fn, k = load_kernel(mpath)
        tag = os.path.basename(os.path.dirname(mpath))
        D = k["head_dim"]
        paged = k["format"]["indexing"] == "paged"
        lens = P2 if paged else [8192]
        wl = ("P2" if paged else ("P1" if D == 128 else "P3")) + f" d{D}"
        cps = int(k.get("_cps", 1)) if False else (2 if k["tile"]["q"] == 64 else 1)
        ms, pb, o = time_kernel(fn, k, lens, lens, cps)
        fl = causal_flops(lens, lens, D, k["num_qo_heads"])
        tf = fl / (ms * 1e-3) / 1e12
        sd_ms, outs = sdpa_time(pb, lens, lens)
        sd_tf = fl / (sd_ms * 1e-3) / 1e12
        # agreement with SDPA on the timed problem (bf16 vs bf16)
        qi = pb["qo_indptr"].tolist()
        err = max(float((o[qi[b]:qi[b + 1]].float() - outs[b][0].transpose(0, 1).float()).abs().max())
                  for b in range(len(lens)))
        res = k.get("resources", {})
        for sc in filter(None, args.schedules.split(",")):
            name, _, fx = sc.partition(":")
            sms, _, _ = time_kernel(fn, k, lens, lens, cps, sched=name, fixed=int(fx) if fx else None, pb=pb)
            print(json.dumps({"workload": wl, "kernel": tag, "schedule": sc, "ms": round(sms, 4),
                              "tflops": round(fl / (sms * 1e-3) / 1e12, 1)}), flush=True)
        rows.append((wl, tag, res.get("registers"), ms, tf, sd_ms, sd_tf, err))
        print(json.dumps({"workload": wl, "kernel": tag, "ms": round(ms, 4), "tflops": round(tf, 1),
                          "sdpa_flash_ms": round(sd_ms, 4), "sdpa_tflops": round(sd_tf, 1),
                          "max_abs_vs_sdpa": err}), flush=True)
    print(f"\nPASS {passed} FAIL {failed}; bf16 matmul 8192^3 {mm:.0f} TFLOP/s")
    print("| workload | kernel | regs | ms | TFLOP/s | % matmul | SDPA flash ms | SDPA TFLOP/s | max |o-sdpa| |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.3f} | {r[4]:.0f} | {100 * r[4] / mm:.0f}% | {r[5]:.3f} | {r[6]:.0f} | {r[7]:.3g} |")
    sys.exit(0 if failed == 0 else 1)


if __name__ == "__main__":
    main()
