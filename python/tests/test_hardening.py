"""Hardening (issue 15), the Python part: each finding a bad input hit is a test here.

Spec fields are checked before any IR text is written (no text injection, no
size that only fails in the compiler or the planner) and without torch; the
mask packers check their bounds; the kernel cache loads only entries this user
wrote (malformed metadata of any shape, names outside the entry, symbolic
links, foreign or writable entries are warned-about misses) and compiles a key
once among concurrent compilers. CPU only; the compiler is faked where a test
compiles.
"""

import json
import os
import stat
import subprocess
import sys
import threading
import time

import pytest

import attn
from attn import cache as cache_mod
from attn.cache import CACHE_FORMAT
from attn import compiler
from attn.cache import CachedKernel, KernelCache, cache_key
from attn.mask import mask_indptr, packbits, segment_packbits
from attn.variants import AttentionSpec, Variant

TANH = """attn.variant @tanh_cap(cap : f32) {
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    %c = attn.param "cap" : f32
    attn.yield %c : f32
  }
}"""


# -- spec validation ------------------------------------------------------------

SPEC_CASES = [
    # Text injection into the IR through a field.
    (("128}", 32, 8), {}, TypeError, r"head_dim must be an int, got str"),
    ((128, "32x8x128xbf16>, %evil", 8), {}, TypeError, r"num_qo_heads must be an int"),
    # Sizes the compiler or the planner would only fail on later (or overflow with).
    ((2 ** 40, 32, 8), {}, ValueError, r"head_dim must be a multiple of 16 in \[16, 256\], got 1099511627776"),
    ((72, 32, 8), {}, ValueError, r"head_dim must be a multiple of 16"),
    ((272, 32, 8), {}, ValueError, r"head_dim must be a multiple of 16"),
    ((0, 32, 8), {}, ValueError, r"head_dim must be a multiple of 16"),
    ((128, True, 8), {}, TypeError, r"num_qo_heads must be an int, got bool"),
    ((128, 32, True), {}, TypeError, r"num_kv_heads must be an int, got bool"),
    ((128, 0, 8), {}, ValueError, r"num_qo_heads must be a positive int"),
    ((128, 1 << 31, 8), {}, ValueError, r"num_qo_heads must be a positive int <= 65536"),
    ((128, 32, -8), {}, ValueError, r"num_kv_heads must be a positive int"),
    ((128, 30, 8), {}, ValueError, r"num_qo_heads \(30\) must be a multiple of num_kv_heads \(8\)"),
    ((128, 32, 8), {"page_size": 0}, ValueError, r"page_size must be a positive int <= 65536, got 0"),
    ((128, 32, 8), {"page_size": -16}, ValueError, r"page_size must be a positive int"),
    ((128, 32, 8), {"page_size": 65537}, ValueError, r"page_size must be a positive int <= 65536"),
    ((128, 32, 8), {"page_size": 16.0}, TypeError, r"page_size must be an int, got float"),
    ((128, 32, 8), {"query_rows": 0}, ValueError, r"query_rows must be a positive int"),
    ((128, 32, 8), {"query_rows": 1 << 62}, ValueError, r"query_rows must be a positive int <= 65536"),
    ((128, 32, 8), {"query_rows": "?"}, TypeError, r"query_rows must be an int"),
    # Unknown choices.
    ((128, 32, 8), {"dtype": "f32"}, ValueError, r"dtype must be one of \('bf16', 'f16'\), got 'f32'"),
    ((128, 32, 8), {"dtype": None}, TypeError, r"dtype must be a str"),
    ((128, 32, 8), {"layout": "NDH"}, ValueError, r"layout must be one of \('NHD', 'HND'\)"),
    ((128, 32, 8), {"indexing": "csr"}, ValueError, r"indexing must be one of \('paged', 'ragged'\)"),
    ((128, 32, 8), {"custom_mask": 1}, TypeError, r"custom_mask must be a bool"),
    ((128, 32, 8), {"strided_kv": 1}, TypeError, r"strided_kv must be a bool"),
    ((128, 32, 8), {"strided_kv": True}, ValueError, r"strided_kv is for ragged K/V"),
    ((128, 32, 8), {"variant_defs": b"attn.variant @x { }"}, TypeError, r"variant_defs must be MLIR text"),
    # Variant names: identifiers, built-in or defined.
    ((128, 32, 8), {"variants": ("causal] {",)}, ValueError, r"variants: 'causal\] \{' is not an identifier"),
    ((128, 32, 8), {"variants": ("no_such",)}, ValueError, r"variants: @no_such is neither built-in"),
    ((128, 32, 8), {"variants": (7,)}, TypeError, r"variants must be a str"),
    ((128, 32, 8), {"variants": "causal"}, TypeError, r"variants must be a tuple, got str"),
    ((128, 32, 8), {"variants": ("tanh_cap",), "custom_params": (("tanh_cap", (("cap", "f32"),)),)},
     ValueError, r"custom_params: @tanh_cap is not defined in variant_defs"),
    ((128, 32, 8), {"variant_defs": TANH, "custom_params": (("causal", ()),)},
     ValueError, r"custom_params: @causal would shadow the built-in"),
    ((128, 32, 8), {"variant_defs": TANH, "custom_params": (("tanh cap", ()),)},
     ValueError, r"custom_params variant: 'tanh cap' is not an identifier"),
    # Parameter names and types.
    ((128, 32, 8), {"variant_defs": TANH, "custom_params": (("tanh_cap", (("cap) {", "f32"),)),)},
     ValueError, r"custom_params of @tanh_cap: parameter name: 'cap\) \{' is not an identifier"),
    ((128, 32, 8), {"variant_defs": TANH, "custom_params": (("tanh_cap", (("cap", "f32>) -> i1"),)),)},
     ValueError, r"custom_params of @tanh_cap: parameter 'cap' has type 'f32>\) -> i1'; the wrappers bind "
                 r"i32, f32, memref<\?xf32>"),
    ((128, 32, 8), {"variant_defs": TANH, "custom_params": (("tanh_cap", (("cap", "f32"), ("cap", "i32"))),)},
     ValueError, r"custom_params of @tanh_cap: parameter names repeat"),
    ((128, 32, 8), {"variant_defs": TANH, "custom_params": (("tanh_cap", ("cap",)),)},
     TypeError, r"custom_params of @tanh_cap: expected \(name, type\) pairs"),
]


@pytest.mark.parametrize("args,kwargs,error,match", SPEC_CASES,
                         ids=[f"{i}-{c[3].split()[0]}" for i, c in enumerate(SPEC_CASES)])
def test_spec_fields_are_validated_before_ir_text(args, kwargs, error, match):
    with pytest.raises(error, match="attn: " + match):
        AttentionSpec(*args, **kwargs)


def test_valid_specs_still_build_and_lists_become_tuples():
    # Any page size in [1, 65536] and any head dim that is a multiple of 16 up to 256.
    for ps, d in ((12, 80), (1, 16), (65536, 256)):
        assert f"x{d}xbf16>" in AttentionSpec(d, 32, 8, ps).to_ir()
    v = Variant(TANH)
    s = AttentionSpec(128, 32, 8, variants=["soft_cap", "tanh_cap"], variant_defs=v.text,
                      custom_params=[["tanh_cap", [["cap", "f32"]]]])
    assert s.variants == ("soft_cap", "tanh_cap") and s.custom_params == (("tanh_cap", (("cap", "f32"),)),)
    assert hash(s) == hash(AttentionSpec(128, 32, 8, variants=("soft_cap", "tanh_cap"), variant_defs=v.text,
                                         custom_params=(("tanh_cap", (("cap", "f32"),)),)))


def test_variant_names_must_be_identifiers():
    with pytest.raises(ValueError, match=r"attn: variant name: 'a\.b' is not an identifier"):
        Variant("attn.variant @a.b { }")


def test_spec_errors_need_no_torch():
    """`import attn` and building (or refusing) a spec import neither torch nor the binding's GPU side."""
    code = ("import sys\n"
            "class NoTorch:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'torch':\n"
            "            sys.exit('torch imported')\n"
            "sys.meta_path.insert(0, NoTorch())\n"
            "import attn\n"
            "from attn.variants import AttentionSpec\n"
            "AttentionSpec(128, 32, 8, 16).to_ir()\n"
            "for bad in (('128}', 32, 8), (2 ** 40, 32, 8), (128, True, 8)):\n"
            "    try:\n"
            "        AttentionSpec(*bad)\n"
            "    except (TypeError, ValueError):\n"
            "        pass\n"
            "    else:\n"
            "        sys.exit('accepted %r' % (bad,))\n"
            "sys.exit(0)\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(attn.__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# -- mask packers -----------------------------------------------------------------

@pytest.mark.parametrize("indptr,error,match", [
    ([0, 4, 12], ValueError, r"indptr\[-1\] = 12 is past the end of x \(11 elements\)"),
    ([0, 6, 4, 11], ValueError, r"indptr decreases at entry 2 \(6 -> 4\)"),
    ([-3, 4, 11], ValueError, r"indptr\[0\] is negative \(-3\)"),
    ([], ValueError, r"indptr must have batch \+ 1 entries"),
    ([[0, 4], [4, 11]], TypeError, r"indptr must be a 1-D integer tensor or sequence"),
    ([0, 4.5, 11], TypeError, r"indptr must be a 1-D integer tensor or sequence"),
], ids=["past-the-data", "decreasing", "negative", "empty", "2-D", "float"])
def test_segment_packbits_checks_the_indptr_bounds(indptr, error, match):
    with pytest.raises(error, match="attn: " + match):
        segment_packbits([1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1], indptr)


def test_mask_packers_check_their_other_arguments():
    with pytest.raises(ValueError, match=r"attn: qo_lens \(2 entries\) and kv_lens \(1\)"):
        mask_indptr([1, 2], [3])
    with pytest.raises(ValueError, match=r"attn: kv_lens\[1\] is negative \(-3\)"):
        mask_indptr([1, 2], [3, -3])
    with pytest.raises(ValueError, match="attn: bitorder must be 'big' or 'little', got 'BIG'"):
        segment_packbits([1], [0, 1], bitorder="BIG")
    with pytest.raises(TypeError, match="attn: x must be a tensor or a sequence of booleans, got int"):
        packbits(5)


def test_mask_packers_default_to_flashinfers_big_endian_order():
    import inspect
    for f in (packbits, segment_packbits):
        assert inspect.signature(f).parameters["bitorder"].default == "big"
    assert packbits([1, 0, 1, 1, 0, 0, 1, 1]) == [0b10110011]  # numpy.packbits
    packed, indptr = segment_packbits([1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1], [0, 4, 7, 11])
    assert packed == [0b10110000, 0b00100000, 0b11010000] and indptr == [0, 1, 2, 3]
    # Segments need not start at 0 (each is x[indptr[b]:indptr[b+1]]).
    assert segment_packbits([0, 0, 1, 1], [2, 4], bitorder="little") == ([0b11], [0, 1])


# -- kernel cache -----------------------------------------------------------------

KEY = "ab" * 32
MANIFEST = json.dumps({"kernels": []})


def _kernel(image=b"\x7fELF fake cubin"):
    return CachedKernel(image, MANIFEST, "v1", "compiled")


@pytest.fixture
def entry(tmp_path):
    """A cache (0o700, as the cache creates it) holding one valid entry for KEY."""
    c = KernelCache(str(tmp_path / "kernels"))
    d = c.store(KEY, _kernel())
    assert d is not None and KernelCache(c.directory).lookup(KEY, "v1") is not None
    return c.directory, d


def _refused(directory, key=KEY, match=None):
    """Looks ``key`` up in a fresh cache (as a new process): a miss with a warning naming the entry."""
    c = KernelCache(directory)
    with pytest.warns(RuntimeWarning, match=match or "") as record:
        assert c.lookup(key, "v1") is None
    assert any(os.path.join(directory, key) in str(w.message) for w in record), [str(w.message) for w in record]
    assert c.stats["corrupt"] == 1
    return [str(w.message) for w in record]


def _write_meta(d, text):
    with open(os.path.join(d, "meta.json"), "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())


@pytest.mark.parametrize("text", [
    "[]", "null", '"a string"', "42", "true", "{",
    '{"format": %d, "key": "%s", "files": []}' % (CACHE_FORMAT, KEY),
    '{"format": %d, "key": "%s", "files": {"manifest": "kernel.json"}}' % (CACHE_FORMAT, KEY),
    '{"format": %d, "key": "%s", "files": {"manifest": {"name": 3, "sha256": "x"}}}' % (CACHE_FORMAT, KEY),
    '{"format": %d, "key": "%s", "compiler_version": ["v1"], "files": {}}' % (CACHE_FORMAT, KEY),
    "[" * 200000 + "]" * 200000,
    '{"a": ' * 200000 + "0" + "}" * 200000,
    b"\xff\xfe not utf-8",
], ids=lambda text: repr(text)[:24])
def test_malformed_meta_of_any_shape_is_a_warned_miss(entry, text):
    directory, d = entry
    _write_meta(d, text)
    _refused(directory, match="is corrupt")


def test_truncated_meta_is_a_warned_miss(entry):
    directory, d = entry
    with open(os.path.join(d, "meta.json"), "rb") as f:
        data = f.read()
    with open(os.path.join(d, "meta.json"), "wb") as f:
        f.write(data[:len(data) // 2])
    _refused(directory, match="is corrupt")


def test_a_malformed_entry_is_recompiled(entry, monkeypatch):
    """Through the compiler's lookup: warn, compile again, overwrite the entry."""
    directory, _ = entry
    calls = _fake_compiler(monkeypatch)
    spec = AttentionSpec(128, 32, 8, 16)
    d = os.path.join(directory, cache_key(spec.to_ir(), "sm_90", "cubin", 0))
    assert compiler.get_kernel(spec, "sm_90", cache=KernelCache(directory), candidate=0).source == "compiled"
    _write_meta(d, "null")
    with pytest.warns(RuntimeWarning, match="is corrupt .*meta.json holds a JSON NoneType"):
        k = compiler.get_kernel(spec, "sm_90", cache=KernelCache(directory), candidate=0)
    assert k.source == "compiled" and len(calls) == 2
    assert compiler.get_kernel(spec, "sm_90", cache=KernelCache(directory), candidate=0).source == "disk"


@pytest.mark.parametrize("name", ["../outside.json", "/tmp/outside.json", "sub/kernel.json", "..", "", "a\\b"])
def test_file_names_in_meta_are_confined_to_the_entry(entry, tmp_path, name):
    directory, d = entry
    # A manifest outside the entry whose checksum meta.json gets right.
    outside = tmp_path / "kernels" / "outside.json"
    outside.write_text(MANIFEST)
    meta = json.loads(open(os.path.join(d, "meta.json")).read())
    meta["files"]["manifest"]["name"] = name.replace("/tmp/outside.json", str(outside))
    _write_meta(d, json.dumps(meta))
    _refused(directory, match="is not trusted .*not a file name inside the entry")


def test_symlinked_entries_and_files_are_not_followed(entry, tmp_path):
    directory, d = entry
    elsewhere = tmp_path / "elsewhere"
    os.rename(d, elsewhere)
    os.symlink(elsewhere, d)
    _refused(directory, match="is not trusted .*symbolic link")
    # Storing over the link replaces the link; nothing is written through it.
    before = sorted(os.listdir(elsewhere))
    assert KernelCache(directory).store(KEY, _kernel(b"new image")) == d
    assert not os.path.islink(d) and sorted(os.listdir(elsewhere)) == before
    # A symbolic link to a file with the right contents, inside a real entry.
    for name in ("kernel.json", "meta.json"):
        target = tmp_path / ("linked-" + name)
        os.replace(os.path.join(d, name), target)
        os.symlink(target, os.path.join(d, name))
        _refused(directory, match=f"is not trusted .*{name} is a symbolic link")
        os.replace(target, os.path.join(d, name))
    # A FIFO is not read (it would block): refused as not a regular file.
    os.replace(os.path.join(d, "kernel.json"), tmp_path / "kernel.json")
    os.mkfifo(os.path.join(d, "kernel.json"), 0o600)
    _refused(directory, match="is not trusted .*kernel.json is not a regular file")


def test_writable_or_foreign_entries_and_directories_are_refused(entry, monkeypatch):
    directory, d = entry
    os.chmod(d, 0o770)
    _refused(directory, match=r"is not trusted \(the entry directory is group- or world-writable \(mode 770")
    os.chmod(d, 0o700)
    os.chmod(os.path.join(d, "kernel.cubin"), 0o666)
    _refused(directory, match=r"is not trusted \(kernel.cubin is group- or world-writable")
    os.chmod(os.path.join(d, "kernel.cubin"), 0o600)
    # A shared, world-writable cache directory: no lookups, no writes (memory only).
    os.chmod(directory, 0o777)
    _refused(directory, match="is not trusted .*the cache directory .* is group- or world-writable")
    c = KernelCache(directory)
    with pytest.warns(RuntimeWarning, match=r"kernel cache directory .* is not trusted .*kept in memory"):
        assert c.store("cd" * 32, _kernel()) is None
    assert c.lookup("cd" * 32) is not None and not os.path.exists(os.path.join(directory, "cd" * 32))
    os.chmod(directory, 0o700)
    # Owned by another user (as this process sees it): refused too.
    real = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: real + 1)
    _refused(directory, match=f"is not trusted .*owned by uid {real}, not by this user")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_another_users_entry_is_refused_and_left_alone(entry):
    directory, d = entry
    os.chown(d, 4242, -1)
    _refused(directory, match="is not trusted .*owned by uid 4242")
    c = KernelCache(directory)
    with pytest.warns(RuntimeWarning, match=f"cannot write kernel cache entry {d} .*owned by uid 4242"):
        assert c.store(KEY, _kernel()) is None
    assert c.lookup(KEY, "v1") is not None  # kept in memory


def test_new_entries_are_this_users_alone(tmp_path):
    directory = str(tmp_path / "new" / "kernels")
    d = KernelCache(directory).store(KEY, _kernel())
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    for name in os.listdir(d):
        assert stat.S_IMODE(os.stat(os.path.join(d, name)).st_mode) == 0o600, name
    # An old entry with looser (not writable) modes is still read, and tightened when rewritten.
    os.chmod(d, 0o755)
    assert KernelCache(directory).lookup(KEY, "v1") is not None
    KernelCache(directory).store(KEY, _kernel())
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


def _fake_compiler(monkeypatch, seconds=0.0):
    """compile_ir replaced by a slow fake; returns the list of its calls."""
    calls = []

    def compile_ir(ir, arch, emit_cubin=True, what="attention", manifest_only=False, candidate=None, kv_tma=False):
        calls.append(candidate)
        time.sleep(seconds)
        return {"ok": True, "cubin": b"\x7fELF compiled", "ptx": "// ptx", "manifest": MANIFEST,
                "stages": [], "generator": "fake"}

    monkeypatch.setattr(compiler, "compile_ir", compile_ir)
    monkeypatch.setattr(compiler, "compiler_version", lambda: "fake 1")
    return calls


def test_concurrent_compilers_of_one_key_compile_once(tmp_path, monkeypatch):
    """flock locks belong to open files, so threads with their own caches
    (their own lock files' descriptors) contend as processes do."""
    calls = _fake_compiler(monkeypatch, seconds=0.3)
    directory = str(tmp_path / "kernels")
    spec = AttentionSpec(128, 32, 8, 16)
    sources, errors = [], []

    def worker():
        try:
            sources.append(compiler.get_kernel(spec, "sm_90", cache=KernelCache(directory), candidate=0).source)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(calls) == 1
    assert sorted(sources) == ["compiled", "disk", "disk", "disk"]
    key = cache_key(spec.to_ir(), "sm_90", "cubin", 0)
    assert os.path.exists(os.path.join(directory, key + ".lock"))
    # A runtime-only lookup takes no lock (it cannot compile), nor does a memory hit.
    monkeypatch.setattr(cache_mod.KernelCache, "locked", None)
    c = KernelCache(directory)
    monkeypatch.setattr(compiler, "compiler_version", lambda: None)
    first = compiler.get_kernel(spec, "sm_90", cache=c, candidate=0)
    monkeypatch.setattr(compiler, "compiler_version", lambda: "fake 1")
    assert first.source == "disk" and compiler.get_kernel(spec, "sm_90", cache=c, candidate=0) is first
