"""Kernel packs verified by a digest list (issues 13 and 15).

A pack is a kernel cache directory whose ``attn-pack.json`` lists the
SHA-256 of every file of every entry (``KernelCache.write_pack``, which
``python -m attn.precompile`` calls). ``python -m attn verify-pack`` reports
missing, extra and changed files by name; a cache that is a pack loads only
entries that match the list, which may come out of band
(``ATTN_PACK_DIGESTS``), so changing a file and the pack's own list is not
enough. CPU only: entries are stored from fake images, the compiler is faked
where precompile runs.
"""

import io
import json
import os
import shutil

import pytest

from attn import __main__ as cli
from attn import compiler, precompile
from attn.cache import PACK_FILE, CachedKernel, KernelCache, cache_key, verify_pack
from attn.errors import KernelNotFoundError
from attn.variants import AttentionSpec

MANIFEST = json.dumps({"kernels": [{"name": "attn_x", "role": "attention"}]})
KEY_A, KEY_B, KEY_C = "a" * 64, "b" * 64, "c" * 64


@pytest.fixture(autouse=True)
def _no_outside_list(monkeypatch):
    monkeypatch.delenv("ATTN_PACK_DIGESTS", raising=False)


def _kernel(image=b"\x7fELF fake cubin", manifest=MANIFEST):
    return CachedKernel(image, manifest, "v1", "compiled")


@pytest.fixture
def pack(tmp_path):
    """A pack of two entries: KEY_A with a cubin, KEY_B manifest-only."""
    c = KernelCache(str(tmp_path / "pack"), writes_pack=True)
    assert c.store(KEY_A, _kernel()) and c.store(KEY_B, _kernel(b""))
    r = c.write_pack(compiler_version="v1")
    assert r["entries"] == 2 and not r["skipped"], r
    return c.directory


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def _verify_cli(*args):
    out = io.StringIO()
    rc = cli.verify_pack(*args, out=out)
    return rc, out.getvalue()


def _problems(directory, digests=None):
    return [(kind, name) for kind, name, _ in verify_pack(directory, digests)["problems"]]


# -- the digest list and verify-pack ---------------------------------------------

def test_a_good_pack_verifies(pack):
    with open(os.path.join(pack, PACK_FILE)) as f:
        doc = json.load(f)
    assert doc["attn_pack"] == 1 and doc["compiler_version"] == "v1" and doc["created"].endswith("Z")
    assert set(doc["entries"]) == {KEY_A, KEY_B}
    assert set(doc["entries"][KEY_A]) == {"kernel.cubin", "kernel.json", "meta.json"}
    assert set(doc["entries"][KEY_B]) == {"kernel.json", "meta.json"}
    open(os.path.join(pack, KEY_A + ".lock"), "w").close()  # precompile leaves these: not extra
    r = verify_pack(pack)
    assert r["problems"] == [] and r["entries"] == 2 and r["files"] == 5
    rc, out = _verify_cli(pack)
    assert rc == 0 and "matches" in out and "2 entries, 5 files" in out, out
    assert cli.main(["verify-pack", pack]) == 0


@pytest.mark.parametrize("name", ["kernel.cubin", "kernel.json", "meta.json"])
def test_a_changed_file_is_named(pack, name):
    path = os.path.join(pack, KEY_A, name)
    with open(path, "rb") as f:
        data = f.read()
    _write(path, data + b" ")  # still valid JSON: only the digest tells
    assert _problems(pack) == [("changed", f"{KEY_A}/{name}")]
    rc, out = _verify_cli(pack)
    assert rc == 1 and f"changed  {KEY_A}/{name}" in out and "does NOT match" in out, out


def test_a_deleted_entry_and_a_deleted_file_are_missing(pack):
    shutil.rmtree(os.path.join(pack, KEY_B))
    os.unlink(os.path.join(pack, KEY_A, "kernel.json"))
    assert _problems(pack) == [("missing", f"{KEY_A}/kernel.json"), ("missing", f"{KEY_B}/")]
    rc, out = _verify_cli(pack)
    assert rc == 1 and f"missing  {KEY_B}/" in out and f"{KEY_A}/kernel.json" in out, out


def test_an_added_entry_and_an_added_file_are_extra(pack):
    assert KernelCache(pack, writes_pack=True).store(KEY_C, _kernel(b"\x7fELF planted"))
    _write(os.path.join(pack, KEY_A, "kernel.ptx"), b"// planted")
    assert _problems(pack) == [("extra", f"{KEY_A}/kernel.ptx"), ("extra", f"{KEY_C}/")]
    rc, out = _verify_cli(pack)
    assert rc == 1 and f"extra    {KEY_C}/" in out, out


def test_an_outside_list_catches_a_pack_whose_list_was_edited_too(pack, tmp_path, monkeypatch):
    """The tamperer changes a cubin and rewrites the pack's list to match; the
    copy of the list kept apart still names the cubin."""
    original = str(tmp_path / "attn-pack.kept.json")
    shutil.copy(os.path.join(pack, PACK_FILE), original)
    os.chmod(original, 0o600)
    _write(os.path.join(pack, KEY_A, "kernel.cubin"), b"\x7fELF evil")
    meta_path = os.path.join(pack, KEY_A, "meta.json")
    with open(meta_path) as f:
        meta = json.load(f)
    import hashlib
    meta["files"]["image"]["sha256"] = hashlib.sha256(b"\x7fELF evil").hexdigest()
    _write(meta_path, json.dumps(meta).encode())
    os.unlink(os.path.join(pack, PACK_FILE))
    KernelCache(pack, writes_pack=True).write_pack()  # the list inside now matches the evil entry
    assert _problems(pack) == []
    assert _problems(pack, original) == [("changed", f"{KEY_A}/kernel.cubin"), ("changed", f"{KEY_A}/meta.json")]
    rc, out = _verify_cli(pack, original)
    assert rc == 1 and f"{KEY_A}/kernel.cubin" in out and original in out, out
    assert cli.main(["verify-pack", pack, "--digests", original]) == 1
    monkeypatch.setenv("ATTN_PACK_DIGESTS", original)
    assert ("changed", f"{KEY_A}/kernel.cubin") in _problems(pack)
    # The runtime, told the same list, does not load the entry.
    c = KernelCache(pack)
    with pytest.warns(RuntimeWarning, match="does not match the kernel pack's digest list") as record:
        assert c.lookup(KEY_A) is None
    msg = str(record[0].message)
    assert os.path.join(pack, KEY_A) in msg and original in msg and "meta.json has changed" in msg, msg
    assert c.lookup(KEY_B) is not None


def test_symbolic_links_and_unusable_lists_are_reported(pack, tmp_path):
    target = str(tmp_path / "elsewhere.cubin")
    shutil.copy(os.path.join(pack, KEY_A, "kernel.cubin"), target)
    os.unlink(os.path.join(pack, KEY_A, "kernel.cubin"))
    os.symlink(target, os.path.join(pack, KEY_A, "kernel.cubin"))
    assert _problems(pack) == [("refused", f"{KEY_A}/kernel.cubin")]
    _write(os.path.join(pack, PACK_FILE), b"{not json")
    rc, out = _verify_cli(pack)
    assert rc == 1 and PACK_FILE in out and "cannot be used" in out, out
    rc, out = _verify_cli(pack, str(tmp_path / "absent.json"))
    assert rc == 1 and "absent.json" in out, out


# -- the runtime loads only what matches ----------------------------------------

def test_the_loader_refuses_a_tampered_entry_and_misses(pack):
    _write(os.path.join(pack, KEY_A, "kernel.json"), MANIFEST.replace("attn_x", "attn_y").encode())
    c = KernelCache(pack)
    with pytest.warns(RuntimeWarning, match="does not match the kernel pack's digest list") as record:
        assert c.lookup(KEY_A, "v1") is None
    msg = str(record[0].message)
    assert os.path.join(pack, KEY_A) in msg and "kernel.json has changed" in msg and "not loading it" in msg, msg
    assert c.stats["corrupt"] == 1 and KEY_A not in c.memory
    assert c.lookup(KEY_B, "v1").manifest == MANIFEST  # an untouched entry still loads


def test_the_loader_refuses_an_entry_not_in_the_list(pack):
    assert KernelCache(pack, writes_pack=True).store(KEY_C, _kernel())
    c = KernelCache(pack)
    with pytest.warns(RuntimeWarning, match="not in the list"):
        assert c.lookup(KEY_C) is None
    assert c.lookup("d" * 64) is None and c.stats["corrupt"] == 1  # absent: a plain miss


def test_a_broken_list_refuses_every_entry(pack):
    _write(os.path.join(pack, PACK_FILE), json.dumps({"attn_pack": 1, "entries": []}).encode())
    with pytest.warns(RuntimeWarning, match="digest list .* cannot be used"):
        assert KernelCache(pack).lookup(KEY_A) is None
    os.unlink(os.path.join(pack, PACK_FILE))
    os.symlink(os.path.join(pack, KEY_A, "meta.json"), os.path.join(pack, PACK_FILE))
    with pytest.warns(RuntimeWarning, match="symbolic link"):
        assert KernelCache(pack).lookup(KEY_A) is None


def test_an_outside_list_that_is_absent_refuses_every_entry(pack, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_PACK_DIGESTS", str(tmp_path / "absent.json"))
    with pytest.warns(RuntimeWarning, match="absent.json"):
        assert KernelCache(pack).lookup(KEY_A) is None


def test_a_pack_is_not_written_to_at_run_time(pack):
    c = KernelCache(pack)
    with pytest.warns(RuntimeWarning, match="is a kernel pack") as record:
        assert c.store(KEY_C, _kernel()) is None
        assert c.store("d" * 64, _kernel()) is None
    assert len(record) == 1  # warned once
    assert not os.path.exists(os.path.join(pack, KEY_C)) and c.lookup(KEY_C) is not None  # in memory
    assert _problems(pack) == []


def test_a_runtime_only_lookup_of_a_tampered_entry_raises_not_found(pack, monkeypatch):
    spec = AttentionSpec(128, 32, 8, 16)
    key = cache_key(spec.to_ir(), "sm_90", "cubin", 0)
    c = KernelCache(pack, writes_pack=True)
    c.store(key, _kernel())
    c.write_pack([key])  # produced by this "run": entries added beside an old list need naming
    monkeypatch.setattr(compiler, "compiler_version", lambda: None)  # runtime-only: cannot recompile
    assert compiler.get_kernel(spec, "sm_90", cache=KernelCache(pack), candidate=0).source == "disk"
    _write(os.path.join(pack, key, "kernel.cubin"), b"\x7fELF evil")
    with pytest.warns(RuntimeWarning, match=key), pytest.raises(KernelNotFoundError):
        compiler.get_kernel(spec, "sm_90", cache=KernelCache(pack), candidate=0)


def test_a_cache_without_a_list_behaves_as_before(tmp_path):
    c = KernelCache(str(tmp_path / "plain"))
    assert c.pack() is None and c.store(KEY_A, _kernel()) is not None
    _write(os.path.join(c.directory, KEY_A, "kernel.ptx"), b"// unrelated")  # inert outside a pack
    assert KernelCache(c.directory).lookup(KEY_A, "v1").image == b"\x7fELF fake cubin"


def test_show_config_names_the_list(pack, capsys):
    cfg = cli.collect(pack)
    assert cfg["cache"]["pack_digests"] == os.path.join(pack, PACK_FILE)
    assert "ATTN_PACK_DIGESTS" in cfg["env"]
    assert cli.collect(os.path.dirname(pack))["cache"]["pack_digests"] is None


# -- precompile writes the list ---------------------------------------------------

def test_precompile_writes_a_pack_that_verifies(tmp_path, capsys, fake_compiler):
    calls = fake_compiler()
    out = str(tmp_path / "pack")
    args = ["--heads", "8/8", "--head-dim", "128", "--kinds", "decode", "--out", out]
    assert precompile.main(args + ["--arch", "sm_90"]) == 0
    assert "digest list" in capsys.readouterr().out
    with open(os.path.join(out, PACK_FILE)) as f:
        doc = json.load(f)
    # contracts + one candidate, and plan()'s two copy kernels
    assert doc["compiler_version"] == "fake 1" and len(doc["entries"]) == 4
    assert verify_pack(out)["problems"] == []
    first = set(doc["entries"])
    # Again, for another arch: the list keeps the first run's entries and adds the new ones.
    assert precompile.main(args + ["--arch", "sm_80"]) == 0
    assert len(calls) == 8 and verify_pack(out)["problems"] == []
    with open(os.path.join(out, PACK_FILE)) as f:
        doc = json.load(f)
    assert first < set(doc["entries"]) and len(doc["entries"]) == 8
    # An entry changed in the pack since is left out of the next list (not blessed), and reported.
    changed = sorted(first)[0]
    _write(os.path.join(out, changed, "kernel.json"), b"{}")
    assert precompile.main(args + ["--arch", "sm_80"]) == 0
    assert f"not in the digest list: {changed}" in capsys.readouterr().out
    with open(os.path.join(out, PACK_FILE)) as f:
        assert changed not in json.load(f)["entries"]
    assert ("extra", changed + "/") in _problems(out)


def test_clear_cache_of_a_whole_pack_removes_its_list(pack):
    out = io.StringIO()
    assert cli.clear_cache(pack, dry_run=True, out=out) == 0
    assert "would remove the kernel pack's digest list" in out.getvalue()
    assert os.path.exists(os.path.join(pack, PACK_FILE))
    assert cli.clear_cache(pack, out=io.StringIO()) == 0
    assert not os.path.exists(os.path.join(pack, PACK_FILE))
    assert KernelCache(pack).store(KEY_A, _kernel()) is not None  # a plain cache again: written to
