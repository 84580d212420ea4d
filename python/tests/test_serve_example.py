"""examples/serve.py: a transformers model served through a continuous-batching
loop over a paged KV cache, its greedy tokens checked against generate().

On CPU the loop runs with the example's pure-PyTorch paged attention
(``--reference``): paging, continuous batching, positions, the sliding window
and soft-cap semantics and the comparison with generate(). On a GPU it runs
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


@pytest.mark.gpu
def test_attn_loop_matches_generate_on_gpu(capsys):
    serve = _serve()
    rc = serve.main(["--all"])
    out = capsys.readouterr().out
    print(out)
    assert rc == 0, out
    for name in ("gemma2", "llama3", "qwen2"):
        assert f"{name}: OK" in out
