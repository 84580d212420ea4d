"""CPU checks of plan()'s per-process memo (attn.core.kernel_info): what depends
only on the spec (launch contracts, candidates, SM count) is computed once per
spec, arch, device and cache directory, and a tile candidate's kernels are
looked up and loaded once, when a plan first picks that candidate."""

import json

import pytest

from attn import core
from attn.paged import make_spec

KERNELS = [
    {"name": "attn_decode_x", "role": "attention", "merge_kernel": "attn_merge_x", "band": {"upper": 0}},
    {"name": "attn_merge_x", "role": "merge"},
    {"name": "attn_prefill_x", "role": "attention", "merge_kernel": "attn_merge_y"},
    {"name": "attn_merge_y", "role": "merge"}]
MANIFEST = json.dumps({"kernels": KERNELS})


class FakeKernel:
    def __init__(self, manifest=MANIFEST, path=None):
        self.manifest, self.path = manifest, path


def fake_candidates(text):
    return [{"q_rows": 16, "kv_tile": 16, "gqa_pack": 4, "ctas_per_sm": 4},
            {"q_rows": 128, "kv_tile": 64, "gqa_pack": 4, "ctas_per_sm": 1}]


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """Replaces the cache lookups, the module load and the device query with counters."""
    calls = {"describe": 0, "get_kernel": 0, "load_module": 0, "parse_manifest": 0, "num_sms": 0}
    kernels = {}

    def describe(spec, arch):
        calls["describe"] += 1
        return kernels.setdefault((spec, arch), FakeKernel())

    def get_kernel(spec, arch, candidate=None):
        calls["get_kernel"] += 1
        one = [KERNELS[2 * candidate], KERNELS[2 * candidate + 1]]
        return kernels.setdefault((spec, arch, candidate), FakeKernel(json.dumps({"kernels": one})))

    def load_module(kernel, device):
        calls["load_module"] += 1
        return ("module", kernel)

    real_parse = core.parse_manifest

    def parse_manifest(text):
        calls["parse_manifest"] += 1
        return real_parse(text)

    def num_sms(device):
        calls["num_sms"] += 1
        return 132

    monkeypatch.setattr(core, "describe", describe)
    monkeypatch.setattr(core, "get_kernel", get_kernel)
    monkeypatch.setattr(core, "manifest_candidates", fake_candidates)
    monkeypatch.setattr(core, "load_module", load_module)
    monkeypatch.setattr(core, "parse_manifest", parse_manifest)
    monkeypatch.setattr(core, "num_sms", num_sms)
    monkeypatch.setattr(core, "_kernel_infos", {})
    monkeypatch.setenv("ATTN_ARCH", "sm_90")
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "a"))
    return calls


def _spec(**kw):
    args = dict(num_qo_heads=32, num_kv_heads=8, head_dim=128, page_size=16, dtype="bf16",
                kv_layout="NHD", query_rows=1)
    args.update(kw)
    return make_spec(**args)[0]


def test_repeated_plans_reuse_the_parsed_manifest(counted):
    first = core.kernel_info(_spec(), "cuda:0")
    assert first.attention == ["attn_decode_x", "attn_prefill_x"]
    assert first.merge == ["attn_merge_x", "attn_merge_y"]
    assert (first.band, first.num_sms) == ({"upper": 0}, 132)
    assert [c["q_rows"] for c in first.candidates] == [16, 128]
    for _ in range(5):
        # An equal spec built anew (as every plan() does) finds the same entry.
        assert core.kernel_info(_spec(), "cuda:0") is first
    # No candidate's code is looked up until a plan picks it.
    assert counted == {"describe": 1, "get_kernel": 0, "load_module": 0, "parse_manifest": 1, "num_sms": 1}


def test_a_candidates_kernels_load_once_when_first_picked(counted):
    info = core.kernel_info(_spec(), "cuda:0")
    for _ in range(3):
        assert info.module(1)[1].manifest.count("attn_prefill_x") == 1
    assert (counted["get_kernel"], counted["load_module"]) == (1, 1)
    info.module(0)
    assert (counted["get_kernel"], counted["load_module"]) == (2, 2)


def test_a_stale_candidate_entry_is_an_error(counted, monkeypatch):
    info = core.kernel_info(_spec(), "cuda:0")
    monkeypatch.setattr(core, "get_kernel", lambda spec, arch, candidate=None: FakeKernel(
        json.dumps({"kernels": KERNELS[:2]}), path="/cache/entry"))
    with pytest.raises(RuntimeError, match="tile candidate 1 .*/cache/entry.* do not hold attn_prefill_x"):
        info.module(1)


def test_a_different_spec_device_or_cache_dir_is_its_own_entry(counted, monkeypatch, tmp_path):
    a = core.kernel_info(_spec(), "cuda:0")
    b = core.kernel_info(_spec(head_dim=64), "cuda:0")
    c = core.kernel_info(_spec(logits_soft_cap=30.0), "cuda:0")
    d = core.kernel_info(_spec(), "cuda:1")
    assert len({id(a), id(b), id(c), id(d)}) == 4
    assert counted["parse_manifest"] == 4
    # Parameter values are kernel arguments, not part of the spec: same entry.
    assert core.kernel_info(_spec(logits_soft_cap=20.0), "cuda:0") is c
    monkeypatch.setenv("ATTN_ARCH", "sm_100")
    assert core.kernel_info(_spec(), "cuda:0") is not a
    monkeypatch.setenv("ATTN_ARCH", "sm_90")
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "b"))  # another cache: looked up again
    assert core.kernel_info(_spec(), "cuda:0") is not a
    assert counted["describe"] == 6


def test_failures_are_not_memoized(counted, monkeypatch):
    from attn.errors import KernelNotFoundError

    def missing(spec, arch):
        counted["describe"] += 1
        raise KernelNotFoundError("attn: no precompiled kernel")

    monkeypatch.setattr(core, "describe", missing)
    for _ in range(2):
        with pytest.raises(KernelNotFoundError):
            core.kernel_info(_spec(), "cuda:0")
    assert counted["describe"] == 2 and core._kernel_infos == {}
    monkeypatch.setattr(core, "describe", lambda spec, arch: FakeKernel(json.dumps({"kernels": []})))
    with pytest.raises(RuntimeError, match="no attention kernel"):
        core.kernel_info(_spec(), "cuda:0")
    assert core._kernel_infos == {}


def test_unindexed_device_is_not_memoized(counted):
    # "cuda" follows the current device, so it never keys the memo.
    core.kernel_info(_spec(), "cuda")
    core.kernel_info(_spec(), "cuda")
    assert counted["describe"] == 2


def test_the_planner_clips_to_the_kernels_mask_band():
    assert core.plan_mask({"upper": 0}, []) == (True, -1)
    assert core.plan_mask({"lower_param": "window_left"}, [("window_left", "i32", 64)]) == (False, 64)
    # A band the planner cannot express (upper offset 2) is not clipped.
    assert core.plan_mask({"upper": 2}, []) == (False, -1)


def test_host_i32_of_sequences():
    assert list(core.host_i32("qo_indptr", [0, 3, 7])) == [0, 3, 7]
    assert list(core.host_i32("qo_indptr", range(3))) == [0, 1, 2]
    with pytest.raises(TypeError, match="qo_indptr: expected a 1-D integer tensor or sequence"):
        core.host_i32("qo_indptr", [[0, 1]])


def test_memo_keys_tell_values_and_types_apart():
    key = core.memo_keys()
    a = key(32, 8, 128, "NONE", None, 0.5, False)
    assert key(32, 8, 128, "NONE", None, 0.5, False) is a
    # Equal values of other types are other configurations (True is not 1, nor 1.0 1).
    others = {key(32, 8, 128, "NONE", None, 0.5, 0), key(32.0, 8, 128, "NONE", None, 0.5, False),
              key(32, 8, 128, "NONE", None, 0.5, True)}
    assert a not in others and len(others) == 3
    with pytest.raises(TypeError):
        key(32, 8, [128])  # unhashable: plan() takes the full path, which says what is wrong
