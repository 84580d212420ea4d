"""attn in the benchmark, through its Python package (the FlashInfer-style
wrappers) on kernels compiled ahead of time on a machine with the compiler
(the GPU machine has no MLIR): set ATTN_CACHE_DIR to the precompiled kernel
directory and put the runtime-only build's python/ on PYTHONPATH.

A workload attn cannot serve yet gets a row saying why; nothing is timed."""

import os
import statistics
import time

import torch

from workloads import HKV, HQ, PAGE

WORKSPACE_BYTES = 1 << 30


def _import():
    try:
        import attn
        return attn, None
    except Exception as e:  # not built or not on the path
        return None, e


def describe():
    attn, err = _import()
    if attn is None:
        return f"python package not importable ({err})"
    return (f"python package from {os.path.dirname(attn.__file__)}, kernels from "
            f"{os.environ.get('ATTN_CACHE_DIR', '~/.cache/attn')}; {plan_figure()}")


def plan_figure(batch=256, calls=100):
    """The plan-only figure of the report (issue #13): the median host time of
    the whole decode plan() at `batch` skewed decode requests (as bench/plan's
    BM_PlanDecodeSkewed), eager and graph-mode wrapper (captured first, as an
    engine's is), next to the planner alone through the binding
    (bench/harness/plan_overhead.py for 1..1024)."""
    try:
        import plan_overhead as po
        attn, _ = _import()
        indptr, indices, last = po.page_table(po.lengths(batch, "skewed"))
        ws = _workspace()
        eager = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
        plan = lambda w: w.plan(indptr, indices, last, HQ, HKV, 128, PAGE, q_data_type=torch.bfloat16)  # noqa: E731
        e_us = po.median_us(lambda: plan(eager), calls)
        alone_us = po.planner_alone_us(eager, indptr, last, calls)
        bufs = (torch.empty(batch + 1, dtype=torch.int32, device="cuda"),
                torch.empty(indices.numel(), dtype=torch.int32, device="cuda"),
                torch.empty(batch, dtype=torch.int32, device="cuda"))
        graph = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(ws, *bufs)
        keep = po.capture_once(graph, lambda: plan(graph), batch, indices.numel())  # noqa: F841
        g_us = po.median_us(lambda: plan(graph), calls)
        return (f"decode plan() at {batch} requests: {e_us:.1f} us eager, {g_us:.1f} us graph-mode wrapper "
                f"(C++ planner alone via the binding {alone_us:.1f} us)")
    except Exception as e:  # reported, never fatal to the run
        return f"decode plan() at {batch} requests: not measured ({type(e).__name__}: {e})"


def _workspace():
    return torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")


def _time_plan(plan, calls=20):
    """Plans once (compiling or loading the kernels), then returns the median
    host time of `calls` more plans in microseconds: the wrapper's whole
    plan(), i.e. argument checks, the C++ planner and the async upload."""
    plan()
    # Work the caller queued (building the workload) must not be timed.
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        plan()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return 1e6 * statistics.median(times)


def _with_plan_time(run, plan_us):
    run.plan_us = plan_us
    return run


def _decode(attn, w, graph):
    d = w["head_dim"]
    b = len(w["kv_lens"])
    kwargs = {}
    if graph:
        kwargs = dict(use_cuda_graph=True,
                      paged_kv_indptr_buffer=torch.empty(b + 1, dtype=torch.int32, device="cuda"),
                      paged_kv_indices_buffer=torch.empty(w["kv_indices"].numel(), dtype=torch.int32,
                                                          device="cuda"),
                      paged_kv_last_page_len_buffer=torch.empty(b, dtype=torch.int32, device="cuda"))
    wrapper = attn.BatchDecodeWithPagedKVCacheWrapper(_workspace(), "NHD", **kwargs)
    indptr, last = w["kv_indptr"].cpu(), w["kv_last_page_len"].cpu()
    plan_us = _time_plan(lambda: wrapper.plan(indptr, w["kv_indices"], last, HQ, HKV, d, PAGE,
                                              q_data_type=torch.bfloat16))
    kv = (w["k_cache"], w["v_cache"])
    return _with_plan_time(lambda: wrapper.run(w["q"], kv), plan_us)


def _prefill(attn, w):
    d = w["head_dim"]
    wrapper_ws = _workspace()
    qo_indptr = w["qo_indptr"].cpu()
    if w.get("paged"):
        wrapper = attn.BatchPrefillWithPagedKVCacheWrapper(wrapper_ws, "NHD")
        indptr, last = w["kv_indptr"].cpu(), w["kv_last_page_len"].cpu()
        plan_us = _time_plan(lambda: wrapper.plan(
            qo_indptr, indptr, w["kv_indices"], last, HQ, HKV, d, PAGE, causal=True,
            q_data_type=torch.bfloat16))
        kv = (w["k_cache"], w["v_cache"])
        return _with_plan_time(lambda: wrapper.run(w["q"], kv), plan_us)
    wrapper = attn.BatchPrefillWithRaggedKVCacheWrapper(wrapper_ws, "NHD")
    # Prefill from scratch: kv_len == qo_len.
    plan_us = _time_plan(lambda: wrapper.plan(qo_indptr, qo_indptr, HQ, HKV, d, causal=True,
                                              q_data_type=torch.bfloat16))
    return _with_plan_time(lambda: wrapper.run(w["q"], w["k"], w["v"]), plan_us)


def _verify(attn, w):
    """Speculative verification through the decode wrapper: every request
    has the same number of new tokens (q_len_per_req)."""
    k = w["qo_lens"][0]
    wrapper = attn.BatchDecodeWithPagedKVCacheWrapper(_workspace(), "NHD")
    indptr, last = w["kv_indptr"].cpu(), w["kv_last_page_len"].cpu()
    plan_us = _time_plan(lambda: wrapper.plan(indptr, w["kv_indices"], last, HQ, HKV, w["head_dim"], PAGE,
                                              q_data_type=torch.bfloat16, q_len_per_req=k))
    kv = (w["k_cache"], w["v_cache"])
    return _with_plan_time(lambda: wrapper.run(w["q"], kv), plan_us)


def systems_for(w):
    """[(name, fn or the exception saying why not)] for workload w."""
    attn, err = _import()
    if attn is None:
        return [("attn", RuntimeError(f"attn python package not importable: {err}"))]
    out = []
    try:
        if w["kind"] == "decode":
            out.append(("attn", _decode(attn, w, graph=False)))
            out.append(("attn (graph-mode wrapper)", _decode(attn, w, graph=True)))
        else:
            out.append(("attn", _prefill(attn, w)))
            if w["kind"] == "append" and len(set(w["qo_lens"])) == 1 and w["qo_lens"][0] <= 16:
                out.append((f"attn (decode wrapper, q_len_per_req={w['qo_lens'][0]})", _verify(attn, w)))
    except Exception as e:
        out.append(("attn", e))
    return out
