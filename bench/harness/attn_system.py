"""attn in the benchmark, through its Python package (the FlashInfer-style
wrappers) on kernels compiled ahead of time on a machine with the compiler
(the GPU machine has no MLIR): set ATTN_CACHE_DIR to the precompiled kernel
directory and put the runtime-only build's python/ on PYTHONPATH.

A workload attn cannot serve yet gets a row saying why; nothing is timed."""

import os

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
            f"{os.environ.get('ATTN_CACHE_DIR', '~/.cache/attn')}")


def _workspace():
    return torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")


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
    wrapper.plan(w["kv_indptr"].cpu(), w["kv_indices"], w["kv_last_page_len"].cpu(), HQ, HKV, d,
                 PAGE, q_data_type=torch.bfloat16)
    kv = (w["k_cache"], w["v_cache"])
    return lambda: wrapper.run(w["q"], kv)


def _prefill(attn, w):
    d = w["head_dim"]
    wrapper_ws = _workspace()
    if w.get("paged"):
        wrapper = attn.BatchPrefillWithPagedKVCacheWrapper(wrapper_ws, "NHD")
        wrapper.plan(w["qo_indptr"].cpu(), w["kv_indptr"].cpu(), w["kv_indices"],
                     w["kv_last_page_len"].cpu(), HQ, HKV, d, PAGE, causal=True,
                     q_data_type=torch.bfloat16)
        kv = (w["k_cache"], w["v_cache"])
        return lambda: wrapper.run(w["q"], kv)
    wrapper = attn.BatchPrefillWithRaggedKVCacheWrapper(wrapper_ws, "NHD")
    kv_indptr = w["qo_indptr"].cpu()  # prefill from scratch: kv_len == qo_len
    wrapper.plan(w["qo_indptr"].cpu(), kv_indptr, HQ, HKV, d, causal=True,
                 q_data_type=torch.bfloat16)
    return lambda: wrapper.run(w["q"], w["k"], w["v"])


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
    except Exception as e:
        out.append(("attn", e))
    return out
