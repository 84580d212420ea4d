"""Planning, compiling and the kernel cache through the binding module (no GPU)."""

import array
import json
import os
import time
import warnings

import pytest

import attn
from attn import cache as cache_mod
from attn.compiler import get_kernel
from attn.variants import AttentionSpec, Variant

CONFIG = {"num_qo_heads": 32, "num_kv_heads": 8, "head_dim": 128, "block_size": 16, "num_sms": 132,
          "max_batch": 4, "max_total_q_rows": 4,
          "candidates": [{"q_rows": 16, "kv_tile": 64, "gqa_pack": 4, "cost_per_item": 128,
                          "cost_per_kv_token": 1}]}


def i32(*v):
    return array.array("i", v)


def test_plan_sizes_and_summary(native):
    host, device = native.plan_workspace_size(CONFIG)
    assert 0 < host < device
    ws = bytearray(host)
    s = native.plan(CONFIG, ws, i32(0, 1, 2, 3), i32(0, 3, 300, 301), kv_last_len=i32(5, 16, 1))
    assert s["num_items"] >= 3 * 2 and s["plan_bytes"] <= host and s["tile_q"] == 16 and s["gqa_pack"] == 4
    # Splitting the long request: some merges.
    assert s["num_merge_units"] >= 1


def test_plan_summary_reads_as_fields_and_as_a_mapping(native):
    host, _ = native.plan_workspace_size(CONFIG)
    s = native.plan(CONFIG, bytearray(host), i32(0, 1, 2, 3), i32(0, 3, 300, 301), kv_last_len=i32(5, 16, 1))
    names = ["num_ctas", "num_items", "num_merge_units", "num_slots", "candidate", "tile_q", "gqa_pack",
             "plan_bytes", "host_bytes"]
    assert list(s) == s.keys() == names and len(s) == 9 and "tile_q" in s and "tile_k" not in s
    assert all(s[n] == getattr(s, n) for n in names)
    assert s.host_bytes == host and s.candidate == 0 and s.tile_q == 16
    assert repr(s).startswith("PlanSummary(num_ctas=") and f"host_bytes={host})" in repr(s)
    with pytest.raises(KeyError, match="tile_k"):
        s["tile_k"]
    with pytest.raises(AttributeError):
        s.tile_q = 32
    # Equal counts compare equal; another batch does not.
    again = native.plan(CONFIG, bytearray(host), i32(0, 1, 2, 3), i32(0, 3, 300, 301), kv_last_len=i32(5, 16, 1))
    other = native.plan(CONFIG, bytearray(host), i32(0, 1), i32(0, 3), kv_last_len=i32(5))
    assert s == again and s != other


def test_plan_errors_are_named(native):
    host, _ = native.plan_workspace_size(CONFIG)
    ws = bytearray(host)
    with pytest.raises(native.Error, match=r"\[NonMonotoneIndptr\].*kv_indptr") as e:
        native.plan(CONFIG, ws, i32(0, 1, 2), i32(0, 5, 3), kv_last_len=i32(1, 1))
    assert e.value.status == "NonMonotoneIndptr"
    with pytest.raises(native.Error, match=r"LastBlockLenOutOfRange"):
        native.plan(CONFIG, ws, i32(0, 1), i32(0, 2), kv_last_len=i32(17))
    with pytest.raises(native.Error, match=r"WorkspaceTooSmall"):
        native.plan(CONFIG, bytearray(64), i32(0, 1), i32(0, 2), kv_last_len=i32(3))
    with pytest.raises(native.Error, match=r"HeadCountMismatch|InvalidArgument"):
        native.plan(dict(CONFIG, num_kv_heads=7), ws, i32(0, 1), i32(0, 2), kv_last_len=i32(3))
    with pytest.raises(KeyError, match="unknown plan config field 'num_heads'"):
        native.plan_workspace_size({"num_heads": 3})
    with pytest.raises(TypeError, match="expected int32 elements"):
        native.plan(CONFIG, ws, array.array("d", [0, 1]), i32(0, 2))
    with pytest.raises(ValueError, match="kv_last_len has 2 entries, expected batch = 1"):
        native.plan(CONFIG, ws, i32(0, 1), i32(0, 2), kv_last_len=i32(3, 3))


def test_module_load_without_gpu_is_a_clear_error(native):
    try:
        native.Module(b"\0" * 16, "{}")
    except native.Error as e:
        assert e.status in ("CudaUnavailable", "ManifestParseError")


@pytest.mark.compiler
def test_compile_decode_to_ptx_and_cubin(native):
    r = native.compile(AttentionSpec(128, 32, 8, 16).to_ir(), chip="sm_90", emit_cubin=True)
    assert r["ok"], r["diagnostics"]
    assert ".entry" in r["ptx"] and len(r["cubin"]) > 1000
    m = json.loads(r["manifest"])
    assert {k["role"] for k in m["kernels"]} == {"attention", "merge"}
    assert [s for s, _ in r["stages"]][-1] == "ptxas"


@pytest.mark.compiler
def test_compile_stage_times_add_up_to_the_compile(native):
    # Each stage's time is its own: the stages add up to no more than the
    # call (the outline stage once counted every later stage as well, which
    # doubled the compile times the benchmark reported).
    ir = AttentionSpec(128, 32, 8, 16).to_ir()
    t0 = time.perf_counter()
    r = native.compile(ir, chip="sm_90", emit_cubin=True)
    wall_ms = (time.perf_counter() - t0) * 1e3
    assert r["ok"], r["diagnostics"]
    names = [n for n, _ in r["stages"]]
    assert "outline" in names and "ptxas" in names
    assert sum(ms for _, ms in r["stages"]) <= wall_ms * 1.02 + 1


@pytest.mark.compiler
@pytest.mark.parametrize("kw", [dict(logits_soft_cap=30.0), dict(window_left=128),
                                dict(pos_encoding_mode="ROPE_LLAMA"), dict(pos_encoding_mode="ROPE_LLAMA31"),
                                dict(pos_encoding_mode="ALIBI")])
def test_compile_builtin_variants_to_ptx(native, kw):
    from attn.paged import make_spec
    spec, _ = make_spec(num_qo_heads=32, num_kv_heads=8, head_dim=128, page_size=16, dtype="bf16",
                        kv_layout="NHD", query_rows=1, **kw)
    r = native.compile(spec.to_ir(), chip="sm_90", emit_cubin=False)
    if r["status"] == "Unsupported":
        pytest.skip("compiler: " + r["diagnostics"].splitlines()[0])
    assert r["ok"], r["diagnostics"]
    assert ".entry" in r["ptx"]


CUSTOM = """attn.variant @tanh_cap(cap : f32) {
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    %c = attn.param "cap" : f32
    %x = arith.divf %s, %c : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %c, %t : f32
    attn.yield %r : f32
  }
}"""


@pytest.mark.compiler
def test_custom_variant_verifies_and_compiles(native):
    v = Variant(CUSTOM).verify()
    from attn.paged import make_spec
    spec, _ = make_spec(num_qo_heads=8, num_kv_heads=8, head_dim=64, page_size=16, dtype="f16", kv_layout="HND",
                        query_rows=1, variant=v, variant_params={"cap": 20.0})
    r = native.compile(spec.to_ir(), chip="sm_80", emit_cubin=False)
    assert r["ok"], r["diagnostics"]


@pytest.mark.compiler
def test_bad_variant_shows_compiler_diagnostics():
    bad = CUSTOM.replace(", %head : i32) {", ") {")
    with pytest.raises(attn.CompileError) as e:
        Variant(bad).verify()
    assert e.value.status == "VerifyError"
    assert "attn.mlir:2:" in str(e.value) and "logits_transform" in str(e.value)
    with pytest.raises(attn.CompileError, match="ParseError"):
        Variant("attn.variant @x { attn.hook }").verify()


@pytest.mark.compiler
def test_bad_target_and_unsupported_are_errors(native):
    ir = AttentionSpec(128, 32, 8, 16).to_ir()
    r = native.compile(ir, chip="sm_5x")
    assert not r["ok"] and r["status"] == "InvalidArgument" and "chip" in r["diagnostics"]
    r = native.compile(ir, chip="sm_90", features="+ptx60", emit_cubin=False)
    assert not r["ok"] and r["status"] == "InvalidArgument"
    r = native.compile("func.func @f(", emit_cubin=False)
    assert r["status"] == "ParseError" and "attn.mlir:1:" in r["diagnostics"]
    r = native.compile(AttentionSpec(128, 32, 8, 16, query_rows=128).to_ir(), emit_cubin=False)
    assert r["ok"] or r["status"] == "Unsupported"


@pytest.mark.compiler
def test_cache_miss_then_hit_then_new_process_layer(cache_dir):
    spec = AttentionSpec(128, 32, 8, 16)
    c = cache_mod.KernelCache(str(cache_dir))
    k1 = get_kernel(spec, "sm_90", cache=c)
    assert k1.source == "compiled" and c.stats["misses"] == 1
    assert os.path.exists(os.path.join(k1.path, "meta.json"))
    assert get_kernel(spec, "sm_90", cache=c) is k1 and c.stats["hits"] == 1
    fresh = cache_mod.KernelCache(str(cache_dir))  # as a second process would
    k2 = get_kernel(spec, "sm_90", cache=fresh)
    assert k2.source == "disk" and k2.image == k1.image and fresh.stats == {
        "hits": 1, "misses": 0, "corrupt": 0, "stale": 0}
    # Another arch or variant is another key.
    assert cache_mod.cache_key(spec.to_ir(), "sm_80") != cache_mod.cache_key(spec.to_ir(), "sm_90")


@pytest.mark.compiler
def test_corrupt_cache_entry_warns_and_recompiles(cache_dir):
    spec = AttentionSpec(128, 32, 8, 16)
    k = get_kernel(spec, "sm_90", cache=cache_mod.KernelCache(str(cache_dir)))
    with open(os.path.join(k.path, "kernel.cubin"), "r+b") as f:
        f.write(b"garbage")
    c = cache_mod.KernelCache(str(cache_dir))
    with pytest.warns(RuntimeWarning, match="is corrupt .*kernel.cubin does not match its checksum.*recompiling"):
        k2 = get_kernel(spec, "sm_90", cache=c)
    assert k2.source == "compiled" and c.stats["corrupt"] == 1
    with open(os.path.join(k.path, "meta.json"), "w") as f:
        f.write("{not json")
    with pytest.warns(RuntimeWarning, match="is corrupt"):
        get_kernel(spec, "sm_90", cache=cache_mod.KernelCache(str(cache_dir)))


@pytest.mark.compiler
def test_unwritable_cache_compiles_in_memory(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    c = cache_mod.KernelCache(str(blocker / "kernels"))
    with pytest.warns(RuntimeWarning, match="not writable .* kept in memory"):
        k = get_kernel(AttentionSpec(128, 32, 8, 16), "sm_90", cache=c)
    assert k.source == "compiled" and k.path is None
    assert get_kernel(AttentionSpec(128, 32, 8, 16), "sm_90", cache=c) is k


def test_cache_without_compiler_reports_how_to_precompile(tmp_path, monkeypatch):
    from attn import compiler
    monkeypatch.setattr(compiler, "compiler_version", lambda: None)
    with pytest.raises(attn.KernelNotFoundError, match="attn.precompile"):
        get_kernel(AttentionSpec(128, 32, 8, 16), "sm_90", cache=cache_mod.KernelCache(str(tmp_path)))


@pytest.mark.compiler
def test_precompile_writes_a_loadable_cache(tmp_path, capsys):
    from attn import precompile
    out = tmp_path / "kernels"
    assert precompile.main(["--model", "llama3-8b", "--out", str(out), "--kinds", "decode"]) == 0
    # decode's, and plan()'s two copy kernels (copy_indices, and graph mode's copy_by_table)
    assert "3 kernel modules" in capsys.readouterr().out
    from attn.paged import make_spec
    spec, _ = make_spec(num_qo_heads=32, num_kv_heads=8, head_dim=128, page_size=16, dtype="bf16",
                        kv_layout="NHD", query_rows=1)
    cache = cache_mod.KernelCache(str(out))
    assert cache.lookup(cache_mod.cache_key(spec.to_ir(), "sm_90", "manifest")) is not None
    assert cache.lookup(cache_mod.cache_key(spec.to_ir(), "sm_90", "cubin", 0)) is not None


@pytest.mark.compiler
def test_rebuilt_compiler_misses_the_old_cache_entries(tmp_path, monkeypatch):
    from attn import compiler
    version = compiler.compiler_version()
    assert " build " in version  # the loaded libattn_compiler.so's size and mtime
    c = cache_mod.KernelCache(str(tmp_path))
    spec = AttentionSpec(128, 32, 8, 16)
    first = get_kernel(spec, "sm_90", cache=c)
    key = cache_mod.cache_key(spec.to_ir(), "sm_90")
    assert cache_mod.KernelCache(str(tmp_path)).lookup(key, version) is not None
    # The same version number from a rebuilt library: a miss, compiled again.
    monkeypatch.setattr(compiler, "_build_id", "0-0")
    assert cache_mod.KernelCache(str(tmp_path)).lookup(key, compiler.compiler_version()) is None
    again = get_kernel(spec, "sm_90", cache=cache_mod.KernelCache(str(tmp_path)))
    assert again.source == "compiled" and again.image == first.image


@pytest.mark.compiler
@pytest.mark.parametrize("spec,box", [
    (AttentionSpec(128, 32, 8, indexing="ragged", query_rows=None, variants=("causal",)), 128),
    (AttentionSpec(128, 32, 8, 16, query_rows=None, variants=("causal",)), 16),
    (AttentionSpec(128, 32, 8, 3, query_rows=None, variants=("causal",)), None)])
def test_kv_tma_compiles_kernels_with_tensor_maps(native, spec, box):
    """kv_tma=True: the 128-row candidate loads K/V by TMA (tensor-map
    arguments named by their source buffer, boxes of a tile or of a page)
    where the pages can be boxes; 3-token pages keep cp.async."""
    r = native.compile(spec.to_ir(), chip="sm_90a", emit_cubin=False, manifest_only=True, kv_tma=True)
    assert r["ok"], r["diagnostics"]
    kernels = {k["tile"]["q"]: k for k in json.loads(r["manifest"])["kernels"] if k["role"] == "attention"}
    assert all("kv_tma" not in kernels[q]["tile"] for q in (16, 64))
    if box is None:
        assert '"tensormap"' not in r["manifest"] and "kv_tma" not in r["manifest"]
        return
    assert kernels[128]["tile"].get("kv_tma") is True and "_tma" in kernels[128]["name"]
    maps = [(a["name"], a["source"], a["box_rows"]) for a in kernels[128]["args"] if a["kind"] == "tensormap"]
    assert maps == [("k_map", "k_cache", box), ("v_map", "v_cache", box)]


def test_kv_tma_is_an_opt_in_with_keys_of_its_own(monkeypatch):
    """ATTN_KV_TMA=1 keys attention specs apart (the keys of before stay as
    they were); row kernels keep theirs; other values are refused by name."""
    from attn import compiler
    ragged = AttentionSpec(128, 32, 8, indexing="ragged", query_rows=None)
    paged = AttentionSpec(128, 32, 8, 16)
    monkeypatch.delenv("ATTN_KV_TMA", raising=False)
    assert not compiler.kv_tma_for(ragged)
    ir = ragged.to_ir()
    assert cache_mod.cache_key(ir, "sm_90a", "cubin", 2, kv_tma=False) == cache_mod.cache_key(ir, "sm_90a", "cubin", 2)
    assert cache_mod.cache_key(ir, "sm_90a", "cubin", 2, kv_tma=True) != cache_mod.cache_key(ir, "sm_90a", "cubin", 2)
    monkeypatch.setenv("ATTN_KV_TMA", "1")
    from attn.rows import MergeStatesSpec
    assert compiler.kv_tma_for(ragged) and compiler.kv_tma_for(paged)
    assert not compiler.kv_tma_for(MergeStatesSpec("bf16", 128, 2, False))
    monkeypatch.setenv("ATTN_KV_TMA", "yes")
    with pytest.raises(ValueError, match="ATTN_KV_TMA must be 0 or 1"):
        compiler.kv_tma_for(ragged)
