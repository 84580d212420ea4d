"""The row kernels' specs compile to one kernel each whose launch contract the
runtime accepts (no GPU needed; the compiler is)."""

import json

import pytest

from attn.compiler import spec_summary
from attn.rows import PLAN_COPIES, AppendKVSpec, CopyIndicesSpec, MergeStatesSpec


def test_specs_name_themselves():
    assert spec_summary(MergeStatesSpec("bf16", 128, 2, False)) == "merge_states of 2 d=128 bf16"
    assert spec_summary(MergeStatesSpec("f32", 64, 3, True)) == "merge_states of 3 d=64 f32 masked"
    assert spec_summary(AppendKVSpec("f16", 96, 3)) == "append_kv d=96 page=3 f16"
    assert spec_summary(CopyIndicesSpec(3)) == "copy_indices of 3 arrays"


def test_copy_spec_round_trips_through_json():
    from attn.compiler import spec_from_json, spec_to_json
    assert spec_from_json(spec_to_json(PLAN_COPIES)) == CopyIndicesSpec(8)


@pytest.mark.compiler
@pytest.mark.parametrize("spec,name,role", [
    (MergeStatesSpec("bf16", 128, 2, False), "attn_merge_states_bf16_d128_n2", "merge_states"),
    (MergeStatesSpec("f16", 256, 5, True), "attn_merge_states_f16_d256_n5_masked", "merge_states"),
    (MergeStatesSpec("f32", 64, 3, False), "attn_merge_states_f32_d64_n3", "merge_states"),
    (AppendKVSpec("bf16", 128, 16), "attn_append_kv_bf16_d128_p16", "append_kv"),
    (AppendKVSpec("f16", 80, 544), "attn_append_kv_f16_d80_p544", "append_kv"),
])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_spec_compiles_to_one_row_kernel(tmp_path, spec, name, role, arch):
    import attn._native as native
    from attn.cache import KernelCache
    from attn.compiler import get_kernel
    k = get_kernel(spec, arch, cache=KernelCache(str(tmp_path)))
    kernels = json.loads(k.manifest)["kernels"]
    assert [(x["name"], x["role"]) for x in kernels] == [(name, role)]
    # A CTA step: two rows per thread, head_dim / 8 threads a row (a grid
    # sized for fewer rows per CTA would leave CTAs without a row).
    assert kernels[0]["rows_per_cta"] == 2 * (256 // (spec.head_dim // 8))
    assert kernels[0]["resources"]["spill_store_bytes"] == 0
    assert len(k.image) > 0
    # The runtime parses the manifest (no device needed to parse).
    native.native().manifest_candidates(k.manifest)


@pytest.mark.compiler
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_copy_spec_compiles_to_one_word_kernel(tmp_path, arch):
    import attn._native as native
    from attn.cache import KernelCache
    from attn.compiler import get_kernel
    k = get_kernel(PLAN_COPIES, arch, cache=KernelCache(str(tmp_path)))
    (kernel,) = json.loads(k.manifest)["kernels"]
    assert (kernel["name"], kernel["role"], kernel["dtype"]) == ("attn_copy_indices_n8", "copy_indices", "i32")
    # A word a thread per CTA step; the arguments plan() binds by name.
    assert kernel["rows_per_cta"] == kernel["threads"] == 256
    assert [a["name"] for a in kernel["args"]] == ["num_rows"] + [
        f"{x}{i}" for i in range(8) for x in ("n", "src", "dst")]
    assert kernel["resources"]["spill_store_bytes"] == 0
    native.native().manifest_candidates(k.manifest)


@pytest.mark.compiler
def test_copy_spec_refuses_more_arrays_than_a_kernel_takes(tmp_path):
    from attn.cache import KernelCache
    from attn.compiler import get_kernel
    from attn.errors import CompileError
    with pytest.raises(CompileError, match="copies 1 to 8 arrays in one kernel, got 9"):
        get_kernel(CopyIndicesSpec(9), "sm_90", cache=KernelCache(str(tmp_path)))


@pytest.mark.compiler
def test_precompile_writes_the_row_kernels(tmp_path, capsys):
    from attn import precompile
    from attn.cache import KernelCache
    from attn.compiler import get_kernel
    out = tmp_path / "pack"
    assert precompile.main(["--heads", "8/8", "--head-dim", "64", "--out", str(out), "--kinds", "merge,append",
                            "--page-size", "16,3", "--merge-states", "2,3", "--arch", "sm_80"]) == 0
    text = capsys.readouterr().out
    assert text.count("1 row kernel") == 6   # 2 counts x (plain, masked) + 2 page sizes
    cache = KernelCache(str(out))
    for spec in (MergeStatesSpec("bf16", 64, 3, True), AppendKVSpec("bf16", 64, 3)):
        assert get_kernel(spec, "sm_80", cache=cache).source == "disk"


def test_precompile_refuses_an_unknown_kind(tmp_path):
    from attn import precompile
    with pytest.raises(SystemExit):
        precompile.main(["--heads", "8/8", "--head-dim", "64", "--out", str(tmp_path), "--kinds", "merg"])


def test_no_copy_kernel_for_a_device_that_is_not_cuda():
    """Graph mode's plan() launches the copy kernel on CUDA devices only; on
    any other (the CPU stand-ins of test_plan_fast.py) it copies as before."""
    from types import SimpleNamespace
    from attn.core import plan_copier
    assert plan_copier(SimpleNamespace(type="cpu", index=None)) is None
