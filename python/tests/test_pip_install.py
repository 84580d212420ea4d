"""``pip install .`` into a fresh virtual environment, and attn imported from outside the source tree.

What a user does (docs/Python.md, "Installing"): pip builds the package with scikit-build-core
(pyproject.toml) and installs it; ``import attn`` from any directory gets the installed package and its
native module, whose RUNPATH is ``$ORIGIN`` (no path into the build tree); ``pip wheel`` gives a wheel;
a runtime-only install loads a kernel pack named by ``ATTN_CACHE_DIR``.

CI cost: the install is runtime-only (``cmake.define.ATTN_ENABLE_COMPILER=OFF``): the runtime and the
module build in under a minute on 2 cores, and the build directory persists
(``$ATTN_PIP_BUILD_DIR``, else ``$ATTN_BUILD_DIR/pip-runtime-only``), so a rerun rebuilds nothing and
takes seconds (ccache, which CMake uses, helps a fresh one). The full install (with the compiler) would
take far longer on 2 cores; it is the same rules with ``ATTN_ENABLE_COMPILER=AUTO``, checked by hand.

Offline: the venv has ``--system-site-packages`` (scikit-build-core from scripts/install-deps.sh,
pybind11 from Debian) and pip runs with ``--no-build-isolation --no-index``. Skipped, with the reason,
where venv, pip, scikit-build-core, cmake or ninja is missing, or ``ATTN_SKIP_PIP_INSTALL=1``. Needs
neither torch nor a GPU.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD_DIR = os.path.abspath(os.environ.get("ATTN_BUILD_DIR", os.path.join(REPO, "build")))  # the venv is made from another cwd
RUNTIME_ONLY = "--config-settings=cmake.define.ATTN_ENABLE_COMPILER=OFF"
TIMEOUT = 1800


def _skip_reason():
    if os.environ.get("ATTN_SKIP_PIP_INSTALL") == "1":
        return "ATTN_SKIP_PIP_INSTALL=1"
    if not os.path.isfile(os.path.join(REPO, "pyproject.toml")):
        return f"no pyproject.toml in {REPO}"
    for mod, what in (("venv", "venv"), ("ensurepip", "ensurepip (Debian: python3-venv)"),
                      ("pip", "pip (Debian: python3-pip)"),
                      ("scikit_build_core", "scikit-build-core (scripts/install-deps.sh)")):
        r = subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True)
        if r.returncode != 0:
            return f"{sys.executable} has no {what}"
    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH"
    return None


def _clean_env(**extra):
    """The environment of a user's shell: nothing pointing at the build tree or the sources."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "ATTN_CACHE_DIR", "ATTN_LOGLEVEL", "VIRTUAL_ENV")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    env.update(extra)
    return env


def _run(cmd, cwd, env=None, timeout=TIMEOUT):
    r = subprocess.run(cmd, cwd=cwd, env=env or _clean_env(), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-6000:]}\n{r.stderr[-6000:]}"
    return r


class Venv:
    def __init__(self, root, outside):
        self.root = root
        self.python = os.path.join(root, "bin", "python")
        self.outside = outside  # a directory outside the source tree, the cwd of every command

    def run(self, code, **env):
        """``python -c CODE`` in the venv, from outside the source tree; its stdout parsed as JSON."""
        r = _run([self.python, "-c", textwrap.dedent(code)], self.outside, _clean_env(**env))
        return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv with attn pip-installed (runtime-only) from the checkout, and the wheel."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    base = os.environ.get("ATTN_PIP_BUILD_DIR") or (
        os.path.join(BUILD_DIR, "pip-runtime-only") if os.path.isdir(BUILD_DIR)
        else str(tmp_path_factory.mktemp("pip-runtime-only")))
    build, venv_dir = os.path.join(base, "build"), os.path.join(base, "venv")
    outside = str(tmp_path_factory.mktemp("outside"))
    os.makedirs(base, exist_ok=True)
    # Same venv path every run (--clear empties it): the persistent CMake cache keeps its Python.
    _run([sys.executable, "-m", "venv", "--clear", "--system-site-packages", venv_dir], outside)
    v = Venv(venv_dir, outside)
    # The build backend as the venv sees it (system and user site; not PYTHONPATH).
    r = subprocess.run([v.python, "-c", "import scikit_build_core"], cwd=outside, env=_clean_env(),
                       capture_output=True)
    if r.returncode != 0:
        pytest.skip("scikit-build-core is not importable in a venv of "
                    f"{sys.executable} (scripts/install-deps.sh installs it)")
    pip = [v.python, "-m", "pip"]
    common = ["--no-build-isolation", "--no-index", "--no-deps", RUNTIME_ONLY, f"--config-settings=build-dir={build}"]
    _run(pip + ["install", *common, REPO], outside)
    dist = str(tmp_path_factory.mktemp("dist"))
    _run(pip + ["wheel", *common, "-w", dist, REPO], outside)
    v.wheels = glob.glob(os.path.join(dist, "attn-*.whl"))
    return v


def test_import_outside_the_source_tree(installed):
    info = installed.run("""
        import json, os, sys, attn
        from attn import _native
        print(json.dumps({"file": attn.__file__, "version": attn.__version__, "prefix": sys.prefix,
                          "native": _native.native().__file__, "has_compiler": attn.has_compiler(),
                          "cwd": os.getcwd()}))""")
    venv = os.path.realpath(installed.root)
    assert os.path.realpath(info["prefix"]) == venv
    assert os.path.realpath(info["file"]).startswith(venv + os.sep), info
    assert os.path.realpath(info["native"]).startswith(os.path.dirname(os.path.realpath(info["file"])) + os.sep)
    # Not the source package (the venv itself may sit in a build tree inside the checkout).
    assert not os.path.realpath(info["file"]).startswith(os.path.join(REPO, "python") + os.sep)
    assert info["has_compiler"] is False  # runtime-only install
    with open(os.path.join(REPO, "include", "attn", "Version.h")) as f:
        assert f'"{info["version"]}"' in f.read()  # the package's version is the C++ one
    # The runtime (libattn_runtime.so, found through $ORIGIN) answers through the module: a plan, no GPU.
    plan = installed.run("""
        import array, json
        from attn import _native
        n = _native.native()
        cfg = {"num_qo_heads": 32, "num_kv_heads": 8, "head_dim": 128, "block_size": 16, "num_sms": 132,
               "max_batch": 4, "max_total_q_rows": 4,
               "candidates": [{"q_rows": 16, "kv_tile": 64, "gqa_pack": 4, "cost_per_item": 128,
                               "cost_per_kv_token": 1}]}
        host, device = n.plan_workspace_size(cfg)
        i32 = lambda *v: array.array("i", v)
        s = n.plan(cfg, bytearray(host), i32(0, 1, 2, 3), i32(0, 3, 300, 301), kv_last_len=i32(5, 16, 1))
        print(json.dumps({"items": s["num_items"], "tile_q": s["tile_q"]}))""")
    assert plan["items"] >= 6 and plan["tile_q"] == 16, plan


def _dynamic(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    paths = []
    for line in out.splitlines():
        if "(RUNPATH)" in line or "(RPATH)" in line:
            paths += line.split("[", 1)[1].rstrip("]").split(":")
    needed = [line.split("[", 1)[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
    return [p for p in paths if p], needed


@pytest.mark.skipif(shutil.which("readelf") is None, reason="no readelf (binutils)")
def test_relocatable(installed):
    pkg = installed.run("import json, os, attn; print(json.dumps(os.path.dirname(attn.__file__)))")
    libs = sorted(glob.glob(os.path.join(pkg, "*.so")))
    names = [os.path.basename(p) for p in libs]
    assert "libattn_runtime.so" in names and any(n.startswith("_attn.") for n in names), names
    assert "libattn_compiler.so" not in names  # runtime-only
    for lib in libs:
        runpath, needed = _dynamic(lib)
        for p in runpath:
            # $ORIGIN-relative, or LLVM's lib directory for libattn_compiler.so; never the build tree.
            assert p.startswith("$ORIGIN") or p.startswith("/usr/lib/llvm-"), (lib, runpath)
        if os.path.basename(lib).startswith("_attn."):
            assert runpath == ["$ORIGIN"], runpath
            assert "libattn_runtime.so" in needed


def test_wheel(installed):
    assert len(installed.wheels) == 1, installed.wheels
    whl = os.path.basename(installed.wheels[0])
    assert whl.startswith("attn-") and "-cp3" in whl and "linux" in whl, whl  # a platform wheel
    names = zipfile.ZipFile(installed.wheels[0]).namelist()
    for f in ("attn/__init__.py", "attn/cache.py", "attn/precompile.py", "attn/libattn_runtime.so"):
        assert f in names, (f, names)
    assert any(n.startswith("attn/_attn.") and n.endswith(".so") for n in names), names
    # Only the package: no headers, static libraries, CMake package or tools.
    assert all(n.startswith("attn/") or ".dist-info/" in n for n in names), names
    assert not any(n.endswith(".a") or "__pycache__" in n for n in names), names


MANIFEST = json.dumps({"kernels": [{"name": "attn_x", "role": "attention"}]})

_SPEC = "AttentionSpec(64, 4, 4, 16, query_rows=1)"


def test_runtime_only_install_loads_a_kernel_pack(installed, tmp_path):
    """A pack is a kernel cache directory (written by `python -m attn.precompile --out PACK`);
    ATTN_CACHE_DIR=PACK makes a runtime-only install load from it. Here the pack's entries are
    written by the cache itself (no compiler needed): the lookups are what is tested."""
    pack = tmp_path / "pack"
    installed.run(f"""
        import json
        from attn.cache import CachedKernel, KernelCache, cache_key
        from attn.variants import AttentionSpec
        spec, c = {_SPEC}, KernelCache({str(pack)!r})
        ir = spec.to_ir()
        c.store(cache_key(ir, "sm_90", "manifest", None), CachedKernel(b"", {MANIFEST!r}, "v1", "compiled"))
        c.store(cache_key(ir, "sm_90", "cubin", 0), CachedKernel(b"\\x7fELF image", {MANIFEST!r}, "v1", "compiled"))
        print(json.dumps(True))""")
    got = installed.run(f"""
        import json
        import attn
        from attn.compiler import get_all_kernels
        from attn.errors import KernelNotFoundError
        from attn.variants import AttentionSpec
        contracts, kernels = get_all_kernels({_SPEC}, "sm_90")
        try:
            get_all_kernels(AttentionSpec(128, 4, 4, 16, query_rows=1), "sm_90")
            missing = None
        except KernelNotFoundError as e:
            missing = str(e)
        print(json.dumps({{"dir": attn.default_cache_dir(), "sources": [k.source for k in [contracts] + kernels],
                          "paths": [k.path for k in [contracts] + kernels], "image": kernels[0].image.decode("latin1"),
                          "missing": missing}}))""", ATTN_CACHE_DIR=str(pack))
    assert got["dir"] == str(pack)
    assert got["sources"] == ["disk", "disk"], got
    assert all(p.startswith(str(pack) + os.sep) for p in got["paths"]), got
    assert got["image"] == "\x7fELF image"
    assert got["missing"] and "ATTN_CACHE_DIR" in got["missing"], got
    # show-config reports the pack and that this install cannot compile.
    r = _run([installed.python, "-m", "attn", "show-config", "--json"], installed.outside,
             _clean_env(ATTN_CACHE_DIR=str(pack)))
    cfg = json.loads(r.stdout)
    assert cfg["cache"]["dir"] == str(pack) and cfg["cache"]["count"] == 2, cfg["cache"]
    assert cfg["native"]["present"] and not cfg["native"]["has_compiler"]


def _build_tree_compiler():
    pkg = os.path.join(BUILD_DIR, "python")
    if not glob.glob(os.path.join(pkg, "attn", "_attn*.so")) or \
            not os.path.isfile(os.path.join(BUILD_DIR, "lib", "libattn_compiler.so")):
        return None
    return pkg


def test_runtime_only_install_loads_a_precompiled_pack(installed, tmp_path):
    """The real route: the build tree's compiler precompiles a pack (one small decode module,
    about a second), the runtime-only install finds every entry of it by the same keys."""
    pkg = _build_tree_compiler()
    if pkg is None:
        pytest.skip(f"no build with the compiler under {BUILD_DIR} to precompile with")
    cuda = os.environ.get("CUDA_HOME") or ("/usr/local/cuda" if os.path.isdir("/usr/local/cuda") else "")
    if not (cuda and os.access(os.path.join(cuda, "bin", "ptxas"), os.X_OK)):
        pytest.skip("no ptxas (CUDA_HOME) to assemble the pack's cubins")
    pack = tmp_path / "pack"
    args = ["--heads", "4/4", "--head-dim", "64", "--kinds", "decode", "--arch", "sm_90"]
    _run([sys.executable, "-m", "attn.precompile", *args, "--out", str(pack)], str(tmp_path),
         _clean_env(PYTHONPATH=pkg, CUDA_HOME=cuda))
    got = installed.run("""
        import json
        from attn.compiler import get_all_kernels
        from attn.precompile import specs_for
        out = []
        for label, spec in specs_for(4, 4, 64, ["decode"], [16], ["bf16"], ["NHD"], [1], {}):
            contracts, kernels = get_all_kernels(spec, "sm_90")
            out.append({"label": label, "sources": [k.source for k in [contracts] + kernels],
                        "elf": [k.image[:4] == b"\\x7fELF" for k in kernels]})
        print(json.dumps(out))""", ATTN_CACHE_DIR=str(pack))
    assert got, got
    for m in got:
        assert set(m["sources"]) == {"disk"} and len(m["sources"]) >= 2, m
        assert all(m["elf"]), m
