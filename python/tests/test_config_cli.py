"""``python -m attn show-config`` / ``clear-cache`` and ``ATTN_LOGLEVEL`` (no GPU, no torch needed)."""

import io
import json
import logging
import os
import subprocess
import sys
import warnings

import pytest

import attn
from attn import __main__ as cli
from attn import compiler, log
from attn.cache import CachedKernel, KernelCache
from attn.variants import AttentionSpec

PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(attn.__file__)))
MANIFEST = json.dumps({"kernels": [{"name": "attn_x", "role": "attention"}]})


def run_cli(*args, env=None, cache=None):
    """``python -m attn ARGS`` in a child process, on the attn under test."""
    e = dict(os.environ, PYTHONPATH=PKG_PARENT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    e.pop("ATTN_LOGLEVEL", None)
    if cache is not None:
        e["ATTN_CACHE_DIR"] = str(cache)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "attn", *args], capture_output=True, text=True, env=e,
                          timeout=120)


def store(cache_dir, key, image=b"\x7fELF image", arch="sm_90a", emit="cubin", candidate=0):
    c = KernelCache(str(cache_dir))
    spec = AttentionSpec(128, 32, 8, 16)
    assert c.store(key, CachedKernel(image, MANIFEST, "v1", "compiled"),
                   inputs={"arch": arch, "emit": emit, "candidate": candidate, "spec": repr(spec)}) is not None
    return os.path.join(str(cache_dir), key)


KEY_A, KEY_B = "a" * 64, "b" * 64


# -- show-config ----------------------------------------------------------------


def test_show_config_text(tmp_path):
    store(tmp_path, KEY_A)
    store(tmp_path, KEY_B, image=b"", emit="manifest", candidate=None)
    r = run_cli("show-config", cache=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert f"attn {attn.__version__}" in out
    assert "torch:" in out and "native module:" in out and "compiler:" in out and "CUDA:" in out
    assert f"kernel cache: {tmp_path} (ok): 2 entries" in out
    assert f"{KEY_A[:16]}" in out and "sm_90a cubin candidate 0 decode heads 32/8 d=128 page=16 bf16 NHD" in out
    assert f"{KEY_B[:16]}" in out and "sm_90a manifest" in out
    assert f"ATTN_CACHE_DIR={tmp_path}" in out and "ATTN_LOGLEVEL=(unset)" in out and "ATTN_ARCH=" in out


def test_show_config_json(tmp_path):
    store(tmp_path, KEY_A)
    os.makedirs(tmp_path / ("c" * 64), mode=0o700)  # an entry without meta.json yet
    r = run_cli("show-config", "--json", cache=tmp_path, env={"ATTN_ARCH": "sm_90"})
    assert r.returncode == 0, r.stderr
    cfg = json.loads(r.stdout)
    assert cfg["attn_version"] == attn.__version__
    assert cfg["native"]["present"] == attn.has_native()
    assert cfg["native"]["has_compiler"] == attn.has_compiler()
    if attn.has_native():
        assert cfg["native"]["path"].endswith(".so")
    if attn.has_compiler():
        assert cfg["native"]["compiler_version"] == compiler.compiler_version()
    assert cfg["cuda"]["arch"] == "sm_90" and cfg["cuda"]["arch_source"] == "ATTN_ARCH"
    c = cfg["cache"]
    assert c["dir"] == str(tmp_path) and c["status"] == "ok" and c["count"] == 2
    entries = {e["key"]: e for e in c["entries"]}
    assert entries[KEY_A]["status"] == "ok" and entries[KEY_A]["bytes"] > len(b"\x7fELF image")
    assert entries[KEY_A]["what"] == "sm_90a cubin candidate 0" and entries[KEY_A]["age_s"] >= 0
    assert entries["c" * 64]["status"] == "incomplete"
    assert c["bytes"] == sum(e["bytes"] for e in c["entries"])
    assert cfg["env"]["ATTN_CACHE_DIR"] == str(tmp_path) and cfg["env"]["ATTN_ARCH"] == "sm_90"
    assert set(cfg["env"]) >= {"ATTN_CACHE_DIR", "ATTN_ARCH", "ATTN_LOGLEVEL", "CUDA_HOME"}


def test_show_config_absent_and_untrusted_cache(tmp_path):
    cfg = cli.collect(str(tmp_path / "none"))
    assert cfg["cache"]["status"].startswith("absent") and cfg["cache"]["count"] == 0
    d = tmp_path / "open"
    d.mkdir()
    os.chmod(d, 0o777)
    cfg = cli.collect(str(d))
    assert cfg["cache"]["status"].startswith("not trusted") and "world-writable" in cfg["cache"]["status"]


def test_show_config_marks_entries_it_would_not_trust(tmp_path):
    store(tmp_path, KEY_A)
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    outside.mkdir()
    os.symlink(outside, tmp_path / KEY_B)
    with open(os.path.join(tmp_path, KEY_A, "meta.json"), "w") as f:
        f.write("[1, 2]")
    entries = {e["key"]: e for e in KernelCache(str(tmp_path)).entries()}
    assert entries[KEY_A]["status"] == "corrupt"
    assert entries[KEY_B]["status"] == "refused" and "symbolic link" in entries[KEY_B]["reason"]


def test_every_environment_variable_attn_reads_is_listed():
    """The variables grep finds in the package are those show-config lists."""
    import re
    found = set()
    pkg = os.path.dirname(attn.__file__)
    for name in os.listdir(pkg):
        if name.endswith(".py"):
            with open(os.path.join(pkg, name)) as f:
                text = f.read()
            found |= set(re.findall(r"os\.environ(?:\.get)?[\[(]\"([A-Z_]+)\"", text))
            found |= set(re.findall(r"getenv\(\"([A-Z_]+)\"", text))
    found.add(log.ENV)
    assert found <= set(cli.ENV_VARS), found - set(cli.ENV_VARS)


# -- clear-cache ----------------------------------------------------------------


def test_clear_cache_dry_run_then_real(tmp_path):
    a, b = store(tmp_path, KEY_A), store(tmp_path, KEY_B)
    with KernelCache(str(tmp_path)).locked(KEY_A):
        pass  # leaves <key>.lock behind, as a compile does
    (tmp_path / "notes.txt").write_text("not attn's")
    r = run_cli("clear-cache", "--dry-run", cache=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"would remove {KEY_A}" in r.stdout and f"would remove {KEY_B}" in r.stdout
    assert "would remove 2 entries" in r.stdout
    assert os.path.isdir(a) and os.path.isdir(b) and (tmp_path / (KEY_A + ".lock")).exists()
    r = run_cli("clear-cache", cache=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "removed 2 entries" in r.stdout
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]
    r = run_cli("show-config", "--json", cache=tmp_path)
    assert json.loads(r.stdout)["cache"]["count"] == 0


def test_clear_cache_leaves_what_attn_did_not_write(tmp_path):
    a = store(tmp_path, KEY_A)
    with open(os.path.join(a, "mine.bin"), "w") as f:
        f.write("someone's file")
    outside = tmp_path.parent / (tmp_path.name + "-target")
    outside.mkdir()
    (outside / "meta.json").write_text("precious")
    os.symlink(outside, tmp_path / KEY_B)           # a link at an entry's name: not followed
    os.symlink(outside / "meta.json", tmp_path / ("d" * 64 + ".lock"))
    out = io.StringIO()
    assert cli.clear_cache(str(tmp_path), out=out) == 1
    text = out.getvalue()
    assert f"kept {KEY_A}: holds files attn does not write (mine.bin)" in text
    assert f"kept {KEY_B}" in text and "symbolic link" in text
    assert os.listdir(a) == ["mine.bin"]
    assert (outside / "meta.json").read_text() == "precious" and os.path.islink(tmp_path / KEY_B)


def test_clear_cache_skips_an_entry_being_compiled(tmp_path):
    store(tmp_path, KEY_A)
    store(tmp_path, KEY_B)
    with KernelCache(str(tmp_path)).locked(KEY_A):
        r = KernelCache(str(tmp_path)).clear()
    assert [k for k, _ in r["removed"]] == [KEY_B]
    assert r["kept"] == [(KEY_A, "being compiled now (its lock is held)")]
    assert os.path.isdir(os.path.join(tmp_path, KEY_A)) and not os.path.exists(os.path.join(tmp_path, KEY_B))


def test_clear_cache_refuses_an_untrusted_directory(tmp_path):
    a = store(tmp_path, KEY_A)
    os.chmod(tmp_path, 0o777)
    try:
        r = run_cli("clear-cache", cache=tmp_path)
    finally:
        os.chmod(tmp_path, 0o700)
    assert r.returncode == 1 and "refusing" in r.stdout and "world-writable" in r.stdout
    assert os.path.isdir(a)


def test_clear_cache_of_an_absent_directory(tmp_path):
    r = run_cli("clear-cache", cache=tmp_path / "none")
    assert r.returncode == 0 and "removed 0 entries" in r.stdout
    assert not (tmp_path / "none").exists()


def test_unknown_command_is_an_error():
    r = run_cli("clean-cache")
    assert r.returncode == 2
    assert "invalid choice: 'clean-cache'" in r.stderr and "show-config" in r.stderr and "clear-cache" in r.stderr
    r = run_cli()
    assert r.returncode == 2 and "a command is required" in r.stderr


# -- ATTN_LOGLEVEL --------------------------------------------------------------


@pytest.mark.parametrize("value,level", [(None, logging.WARNING), ("", logging.WARNING), ("DEBUG", logging.DEBUG),
                                         ("info", logging.INFO), (" Warning ", logging.WARNING),
                                         ("ERROR", logging.ERROR)])
def test_log_level_parsing(value, level):
    assert log.parse_level(value) == (level, None)


@pytest.fixture
def restore_logger():
    yield
    log.configure(os.environ.get(log.ENV))


def test_invalid_log_level_warns_and_falls_back(restore_logger):
    level, problem = log.parse_level("verbose")
    assert level == logging.WARNING and "DEBUG, INFO, WARNING, ERROR" in problem and "'verbose'" in problem
    with pytest.warns(RuntimeWarning, match="ATTN_LOGLEVEL='verbose' is not a log level; use one of DEBUG, INFO"):
        assert log.configure("verbose", stream=io.StringIO()) == logging.WARNING
    assert logging.getLogger("attn").level == logging.WARNING


def test_invalid_log_level_at_import_warns(tmp_path):
    r = run_cli("show-config", "--json", cache=tmp_path, env={"ATTN_LOGLEVEL": "loud"})
    assert r.returncode == 0
    assert "ATTN_LOGLEVEL='loud' is not a log level; use one of DEBUG, INFO, WARNING, ERROR" in r.stderr


def _fake_compiler(monkeypatch):
    def compile_ir(ir, arch, emit_cubin=True, what="attention", manifest_only=False, candidate=None, kv_tma=False):
        return {"ok": True, "cubin": b"\x7fELF compiled", "ptx": "// ptx", "manifest": MANIFEST,
                "stages": [("parse", 0.5), ("ptxas", 12.0)], "generator": "fake"}
    monkeypatch.setattr(compiler, "compile_ir", compile_ir)
    monkeypatch.setattr(compiler, "compiler_version", lambda: "fake 1")


def test_compiles_log_at_info_and_hits_at_debug(tmp_path, monkeypatch, restore_logger):
    _fake_compiler(monkeypatch)
    stream = io.StringIO()
    log.configure("INFO", stream=stream)
    spec = AttentionSpec(128, 32, 8, 16, variants=("soft_cap",))
    compiler.get_kernel(spec, "sm_90a", cache=KernelCache(str(tmp_path)), candidate=1)
    text = stream.getvalue()
    assert "attn INFO: compiled tile candidate 1's kernels of decode heads 32/8 d=128 page=16 bf16 NHD " \
           "[soft_cap] for sm_90a (cubin, key " in text
    assert " ms (stages, ms: parse 0.5, ptxas 12.0)" in text
    compiler.get_kernel(spec, "sm_90a", cache=KernelCache(str(tmp_path)), candidate=1)
    assert stream.getvalue() == text  # a disk hit is DEBUG: not shown at INFO
    log.configure("DEBUG", stream=stream)
    compiler.get_kernel(spec, "sm_90a", cache=KernelCache(str(tmp_path)), candidate=1)
    assert "attn DEBUG: kernel cache hit (disk): tile candidate 1's kernels of decode heads 32/8" in stream.getvalue()


def test_warning_level_is_quiet_about_compiles(tmp_path, monkeypatch, restore_logger):
    _fake_compiler(monkeypatch)
    stream = io.StringIO()
    log.configure("WARNING", stream=stream)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiler.describe(AttentionSpec(128, 32, 8, 16), "sm_90a", cache=KernelCache(str(tmp_path)))
    assert stream.getvalue() == ""


def test_log_level_from_the_environment_in_a_child(tmp_path):
    code = "import logging, attn; print(logging.getLogger('attn').getEffectiveLevel())"
    e = dict(os.environ, PYTHONPATH=PKG_PARENT, ATTN_LOGLEVEL="debug")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=60)
    assert r.stdout.strip() == str(logging.DEBUG), r.stderr
