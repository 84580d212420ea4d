"""Recording the kernels a runtime-only machine missed, and precompiling them.

With ``ATTN_RECORD_MISSES=PATH`` a lookup that raises KernelNotFoundError
first appends one JSON line to PATH naming the spec (class and fields), the
arch and the emit kind (attn/compiler.py, ``record_miss``); ``python -m
attn.precompile --from-record PATH`` compiles every recorded spec for its
arch into a kernel pack, and the runtime-only lookup then finds it. CPU
only: a runtime-only build is simulated as in test_kernel_pack.py
(``compiler_version`` returns None); the end-to-end compile needs the
binding built with the compiler and skips otherwise.
"""

import json
import logging
import os
import threading

import pytest

from attn import compiler, precompile
from attn.cache import PACK_FILE, KernelCache, verify_pack
from attn.errors import KernelNotFoundError
from attn.rows import AppendKVSpec, MergeStatesSpec
from attn.variants import AttentionSpec

# One small kernel module: a decode (one tile candidate) of head dim 64.
SMALL = AttentionSpec(64, 4, 4, 16, variants=("soft_cap",))

CUSTOM = """attn.variant @tanh_cap(cap : f32, w : i32) {
  attn.hook logits_transform(%s : f32, %q_pos : i32, %k_pos : i32, %head : i32) {
    %c = attn.param "cap" : f32
    %x = arith.divf %s, %c : f32
    %t = math.tanh %x : f32
    %r = arith.mulf %c, %t : f32
    attn.yield %r : f32
  }
}"""


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    monkeypatch.delenv("ATTN_PACK_DIGESTS", raising=False)
    monkeypatch.setattr(compiler, "_recorded", set())


def _runtime_only(monkeypatch):
    monkeypatch.setattr(compiler, "compiler_version", lambda: None)


def _records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_a_miss_is_recorded_before_it_is_raised(tmp_path, monkeypatch):
    _runtime_only(monkeypatch)
    record = tmp_path / "misses.jsonl"
    monkeypatch.setenv("ATTN_RECORD_MISSES", str(record))
    cache = KernelCache(str(tmp_path / "empty"))
    with pytest.raises(KernelNotFoundError):
        compiler.get_kernel(SMALL, "sm_90a", cache=cache, candidate=0)
    with pytest.raises(KernelNotFoundError):
        compiler.describe(SMALL, "sm_90a", cache=cache)
    with pytest.raises(KernelNotFoundError):  # the same miss again: not recorded twice
        compiler.describe(SMALL, "sm_90a", cache=cache)
    recs = _records(record)
    assert [(r["emit"], r["candidate"]) for r in recs] == [("cubin", 0), ("manifest", None)]
    for r in recs:
        assert r["attn_miss"] == 1 and r["arch"] == "sm_90a" and r["cache_dir"] == cache.directory
        assert r["spec"]["class"] == "AttentionSpec" and r["spec"]["fields"]["variants"] == ["soft_cap"]
        spec = compiler.spec_from_json(r["spec"])
        assert spec == SMALL and hash(spec) == hash(SMALL) and spec.to_ir() == SMALL.to_ir()
    assert (os.stat(record).st_mode & 0o777) == 0o600


def test_no_record_without_the_variable(tmp_path, monkeypatch):
    _runtime_only(monkeypatch)
    monkeypatch.delenv("ATTN_RECORD_MISSES", raising=False)
    with pytest.raises(KernelNotFoundError):
        compiler.describe(SMALL, "sm_90", cache=KernelCache(str(tmp_path / "empty")))
    assert [p for p in os.listdir(tmp_path) if p != "empty"] == []


@pytest.mark.parametrize("spec", [
    SMALL,
    AttentionSpec(128, 32, 8, 1, dtype="f16", layout="HND", query_rows=None, custom_mask=True,
                  variants=("rope", "causal", "sliding_window")),
    AttentionSpec(96, 8, 8, indexing="ragged", query_rows=4, variant_defs=CUSTOM,
                  custom_params=(("tanh_cap", (("cap", "f32"), ("w", "i32"))),), variants=("tanh_cap", "causal")),
    MergeStatesSpec("f32", 128, 3, True),
    AppendKVSpec("bf16", 256, 64),
], ids=["decode", "prefill", "custom", "merge", "append"])
def test_specs_round_trip_through_json(spec):
    d = json.loads(json.dumps(compiler.spec_to_json(spec)))
    back = compiler.spec_from_json(d)
    assert back == spec and type(back) is type(spec) and hash(back) == hash(spec)
    assert back.to_ir() == spec.to_ir()


@pytest.mark.parametrize("bad, err", [
    ({"class": "Nope", "fields": {}}, ValueError),
    ({"class": "AttentionSpec", "fields": {"head_dim": 64, "num_qo_heads": 4, "num_kv_heads": 4, "x": 1}},
     ValueError),
    ({"class": "AttentionSpec", "fields": {"head_dim": 65, "num_qo_heads": 4, "num_kv_heads": 4}}, ValueError),
    ({"class": "AttentionSpec", "fields": {"head_dim": "64", "num_qo_heads": 4, "num_kv_heads": 4}}, TypeError),
    ({"class": "MergeStatesSpec", "fields": {"dtype": "bf16"}}, ValueError),
    ([1, 2], ValueError),
])
def test_a_bad_spec_is_refused(bad, err):
    with pytest.raises(err):
        compiler.spec_from_json(bad)


def test_a_record_that_cannot_be_written_warns_and_the_miss_is_still_raised(tmp_path, monkeypatch, caplog):
    _runtime_only(monkeypatch)
    monkeypatch.setenv("ATTN_RECORD_MISSES", str(tmp_path))  # a directory: os.open fails
    with caplog.at_level(logging.WARNING, logger="attn"), pytest.raises(KernelNotFoundError):
        compiler.describe(SMALL, "sm_90", cache=KernelCache(str(tmp_path / "empty")))
    assert "cannot record the missed kernel" in caplog.text


def test_concurrent_writers_append_whole_lines(tmp_path, monkeypatch):
    record = tmp_path / "misses.jsonl"
    monkeypatch.setenv("ATTN_RECORD_MISSES", str(record))
    specs = [AttentionSpec(64, 4, 4, page_size=p) for p in range(1, 9)]

    def write(spec):
        for i in range(25):
            compiler.record_miss(spec, "sm_90a", "cubin", i, f"{spec.page_size:02x}{i:062x}", "/c")

    threads = [threading.Thread(target=write, args=(s,)) for s in specs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    recs = _records(record)
    assert len(recs) == 200 and len({r["key"] for r in recs}) == 200
    assert {compiler.spec_from_json(r["spec"]) for r in recs} == set(specs)


# -- precompile --from-record ---------------------------------------------------

def test_from_record_dedups_reports_bad_lines_and_writes_a_pack(tmp_path, capsys, fake_compiler):
    record = tmp_path / "misses.jsonl"
    good = {"attn_miss": 1, "spec": compiler.spec_to_json(SMALL), "arch": "sm_90a", "emit": "cubin", "candidate": 0}
    row = {"attn_miss": 1, "spec": compiler.spec_to_json(AppendKVSpec("f16", 64, 16)), "arch": "sm_90a",
           "emit": "cubin", "candidate": None}
    lines = [json.dumps(good), "not json", json.dumps(dict(good, candidate=1)),  # the same module again
             json.dumps(dict(good, attn_miss=7)), json.dumps(dict(good, arch="sm 90; rm")),
             json.dumps(dict(good, spec={"class": "AttentionSpec", "fields": {"head_dim": 65}})),
             "", json.dumps(dict(good, arch="sm_80")), json.dumps(row)]
    record.write_text("\n".join(lines) + "\n")
    calls = fake_compiler("attn_x", "attn_y")
    out = str(tmp_path / "pack")
    assert precompile.main(["--from-record", str(record), "--out", out]) == 0
    text = capsys.readouterr().out
    for n in (2, 4, 5, 6):
        assert f"{record}:{n}: skipped" in text, text
    assert f"{record}:1:" not in text and f"{record}:3:" not in text
    # sm_90a and sm_80 each: contracts + both candidates; the row kernel: one compile.
    assert sorted(calls, key=str) == sorted([("sm_90a", "manifest"), ("sm_90a", 0), ("sm_90a", 1),
                                             ("sm_80", "manifest"), ("sm_80", 0), ("sm_80", 1),
                                             ("sm_90a", None)], key=str)
    with open(os.path.join(out, PACK_FILE)) as f:
        assert len(json.load(f)["entries"]) == 7
    assert verify_pack(out)["problems"] == []


def test_from_record_with_nothing_compiled_fails(tmp_path, capsys, fake_compiler):
    record = tmp_path / "misses.jsonl"
    record.write_text("garbage\n")
    fake_compiler()
    assert precompile.main(["--from-record", str(record), "--out", str(tmp_path / "pack")]) == 1
    assert f"{record}:1: skipped" in capsys.readouterr().out
    assert precompile.main(["--from-record", str(tmp_path / "absent"), "--out", str(tmp_path / "pack")]) == 1
    with pytest.raises(SystemExit):  # the record names the arch
        precompile.main(["--from-record", str(record), "--arch", "sm_90"])


@pytest.mark.compiler
def test_record_then_precompile_then_the_runtime_finds_it(tmp_path, monkeypatch, capsys):
    """The whole workflow with the real compiler: miss on a "runtime-only"
    build, precompile from the record, load from the pack runtime-only."""
    record = tmp_path / "misses.jsonl"
    pack = str(tmp_path / "pack")
    monkeypatch.setenv("ATTN_RECORD_MISSES", str(record))
    with monkeypatch.context() as m:
        _runtime_only(m)
        with pytest.raises(KernelNotFoundError):
            compiler.describe(SMALL, "sm_90", cache=KernelCache(pack))
    monkeypatch.delenv("ATTN_RECORD_MISSES")
    assert precompile.main(["--from-record", str(record), "--out", pack]) == 0, capsys.readouterr().out
    assert verify_pack(pack)["problems"] == []
    _runtime_only(monkeypatch)
    contracts = compiler.describe(SMALL, "sm_90", cache=KernelCache(pack))
    n = sum(1 for k in json.loads(contracts.manifest)["kernels"] if k.get("role") == "attention")
    assert n >= 1 and contracts.source == "disk"
    for i in range(n):
        assert compiler.get_kernel(SMALL, "sm_90", cache=KernelCache(pack), candidate=i).source == "disk"
