"""pytest setup: find the built package, and mark what needs a GPU or torch.

The package under test is the one CMake lays out in the build directory:
``$ATTN_BUILD_DIR/python`` (default: the checkout's ``build``) goes first on
sys.path, so ``import attn`` gets the binding module built there. Without
that build, an ``attn`` already on PYTHONPATH is used; failing that, the
sources, where the pure-Python tests still run and the binding and GPU tests
skip.

Markers: ``gpu`` (needs torch with CUDA and a GPU; skipped with a reason
otherwise), ``compiler`` (needs a binding built with the compiler).
"""

import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.environ.get("ATTN_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
if os.path.isdir(os.path.join(BUILD_DIR, "python", "attn")):
    sys.path.insert(0, os.path.join(BUILD_DIR, "python"))
elif importlib.util.find_spec("attn") is None:
    # No built package anywhere: test the sources (binding tests skip).
    sys.path.insert(0, os.path.join(HERE, ".."))


@pytest.fixture(autouse=True)
def _default_kernel_keys(request, monkeypatch):
    """ATTN_KV_TMA (a GPU run's choice of kernels, keyed apart) applies to
    the GPU tests only: the CPU tests of the cache compute their own keys."""
    if "gpu" not in request.keywords:
        monkeypatch.delenv("ATTN_KV_TMA", raising=False)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs PyTorch with CUDA and a GPU")
    config.addinivalue_line("markers", "compiler: needs the binding built with the compiler")


def _gpu_reason():
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    return None


def pytest_collection_modifyitems(config, items):
    import attn
    gpu = _gpu_reason()
    native = attn.has_native()
    compiler = attn.has_compiler()
    for item in items:
        if "gpu" in item.keywords and gpu:
            item.add_marker(pytest.mark.skip(reason=gpu))
        elif "gpu" in item.keywords and not native:
            item.add_marker(pytest.mark.skip(reason=f"binding module not built under {BUILD_DIR}/python"))
        if "native" in item.fixturenames and not native:
            item.add_marker(pytest.mark.skip(reason=f"binding module not built under {BUILD_DIR}/python"))
        if "compiler" in item.keywords and not compiler:
            item.add_marker(pytest.mark.skip(reason="the binding module was built without the compiler"))


@pytest.fixture
def native():
    from attn import _native
    return _native.native()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "kernels"
    monkeypatch.setenv("ATTN_CACHE_DIR", str(d))
    return d


@pytest.fixture
def fake_compiler(monkeypatch):
    """Replaces the compiler with a stand-in: ``fake_compiler(*kernel_names)``
    makes every compile return a tiny "cubin" and a manifest of those
    attention kernels (one tile candidate each), and returns the list of its
    calls, ``(arch, "manifest")`` for a launch-contract compile and
    ``(arch, candidate)`` otherwise."""
    import json

    from attn import compiler

    def install(*kernels):
        calls = []
        manifest = json.dumps({"kernels": [{"name": k, "role": "attention"} for k in kernels or ("attn_x",)]})

        def compile_ir(ir, arch, emit_cubin=True, what="attention", manifest_only=False, candidate=None, kv_tma=False):
            calls.append((arch, "manifest" if manifest_only else candidate))
            return {"ok": True, "cubin": b"\x7fELF " + arch.encode(), "ptx": "// ptx", "manifest": manifest,
                    "stages": [], "generator": "fake"}

        monkeypatch.setattr(compiler, "compile_ir", compile_ir)
        monkeypatch.setattr(compiler, "compiler_version", lambda: "fake 1")
        return calls
    return install
