"""examples/serve.py: a transformers model served through a continuous-batching
loop over a paged KV cache, its greedy tokens checked against generate().

On CPU the loop runs with the example's pure-PyTorch paged attention
(``--reference``): paging, continuous batching, positions, the sliding window
and soft-cap semantics and the comparison with generate(); a wrong window
must fail it; and serve.py's attn code path runs with stand-ins for attn's
wrappers (calls bound against their signatures). On a GPU it runs
attn's wrappers (prefill, and decode captured in a CUDA graph) for every model;
the kernels must be in the kernel cache (examples/serve_precompile.sh).
Both need transformers (skipped without it).
"""

import importlib.util
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SERVE = os.path.join(HERE, "..", "..", "examples", "serve.py")


def _serve():
    for mod in ("torch", "transformers"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed (examples/serve.py needs it)")
    spec = importlib.util.spec_from_file_location("attn_serve_example", SERVE)
    serve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(serve)
    return serve


def test_reference_loop_matches_generate_on_cpu(capsys):
    serve = _serve()
    rc = serve.main(["--reference", "--device", "cpu", "--model", "qwen2", "--no-timing", "--requests", "6"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "qwen2: OK" in out


def test_comparison_catches_a_wrong_window_on_cpu(capsys):
    # A deliberately wrong sliding window must make the comparison fail: the check has teeth.
    serve = _serve()
    rc = serve.main(["--reference", "--device", "cpu", "--model", "gemma2", "--no-timing", "--requests", "5",
                     "--dtype", "f32", "--perturb-window", "4"])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "NOT within" in out


def test_cpu_without_reference_skips(capsys):
    serve = _serve()
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert serve.main(["--model", "llama3"]) == 0
    assert "skipped: no CUDA device" in capsys.readouterr().out


def _stand_ins(serve, attn):
    """attn's wrappers replaced by the example's PyTorch paged attention: every
    constructor, plan and run call is bound against the real wrapper's
    signature, and plan writes the CUDA-graph buffers as attn's does (after
    filling them with garbage), so the attn code path of serve.py (its calls,
    the graph branch's append through the fixed page table) runs on CPU."""
    import inspect
    import types

    def bind(fn, *a, **k):
        b = inspect.signature(fn).bind(None, *a, **k)
        b.apply_defaults()
        return b.arguments

    class Stand:
        fixed = None

        def __init__(self, *a, **k):
            bind(self.REAL.__init__, *a, **k)
            self.ref = serve.ReferencePagedAttention(serve.PAGE_SIZE)
            if self.REAL is attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper:
                self.fixed = a[1:4]
                for f in self.fixed:
                    f.fill_(12345)

        def run(self, q, kv, **k):
            bind(self.REAL.run, q, kv, **k)
            assert q.is_contiguous()
            return self.ref.run(q, kv)

    class Prefill(Stand):
        REAL = attn.BatchPrefillWithPagedKVCacheWrapper

        def plan(self, *a, **k):
            x = bind(self.REAL.plan, *a, **k)
            assert x["causal"] is True and x["page_size"] == serve.PAGE_SIZE
            self.ref.plan(x["qo_indptr"].tolist(), x["paged_kv_indptr"].tolist(), x["paged_kv_indices"],
                          x["paged_kv_last_page_len"].tolist(), window_left=x["window_left"],
                          logits_soft_cap=x["logits_soft_cap"], sm_scale=x["sm_scale"])

    class Decode(Stand):
        REAL = attn.BatchDecodeWithPagedKVCacheWrapper

        def plan(self, *a, **k):
            x = bind(self.REAL.plan, *a, **k)
            tables = (x["indptr"], x["indices"], x["last_page_len"])
            for f, t in zip(self.fixed or (), tables):
                f[:len(t)].copy_(t)
            self.ref.plan(range(len(tables[2]) + 1), tables[0].tolist(), tables[1], tables[2].tolist(),
                          window_left=x["window_left"], logits_soft_cap=x["logits_soft_cap"],
                          sm_scale=x["sm_scale"])

    class GraphDecode(Decode):
        REAL = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper

    return types.SimpleNamespace(BatchPrefillWithPagedKVCacheWrapper=Prefill,
                                 BatchDecodeWithPagedKVCacheWrapper=Decode,
                                 CUDAGraphBatchDecodeWithPagedKVCacheWrapper=GraphDecode,
                                 append_paged_kv_cache=attn.append_paged_kv_cache,
                                 get_batch_indices_positions=attn.get_batch_indices_positions)


@pytest.mark.parametrize("graph", [True, False], ids=["graph", "no-graph"])
def test_attn_code_path_with_stand_ins_on_cpu(graph, capsys, monkeypatch):
    serve = _serve()
    import argparse

    import attn
    import torch
    import transformers
    transformers.AttentionInterface.register("attn_paged", serve.paged_attention)
    monkeypatch.setattr(serve.Engine, "capture", lambda self: None)  # no CUDA graph on CPU: the graph branch's
    args = argparse.Namespace(reference=False, device="cpu", dtype="bf16", no_graph=not graph,  # tables, eagerly
                              max_batch=8, pages=0, seed=0, init_std=0.02, tie_ulps=4.0, verbose=False,
                              no_timing=True, requests=5, perturb_window=0)
    rc = serve.run_model("gemma2", args, torch, _stand_ins(serve, attn))
    out = capsys.readouterr().out
    assert rc == 0, out
    assert ("decode in a CUDA graph" in out) == graph


@pytest.mark.gpu
def test_attn_loop_matches_generate_on_gpu(capsys):
    serve = _serve()
    rc = serve.main(["--all"])
    out = capsys.readouterr().out
    print(out)
    assert rc == 0, out
    for name in ("gemma2", "llama3", "qwen2"):
        assert f"{name}: OK" in out
