"""Variant parameters without a GPU: sinks (a table) in prefill, logits_scale, Llama-3.1 RoPE.

The kernels' side of the parameter ABI (names, kinds, the manifest) through
the compiler; the wrappers' side (keywords, argument binding, checks); the
precompile flags; and the Llama-3.1 frequencies of the GPU tests' reference
(gpu_reference.py) against FlashInfer's formulation.
"""

import json
import math

import pytest

from attn import core, precompile
from attn.paged import make_spec
from attn.variants import build_variants
from gpu_reference import LLAMA31, rope_inv_freq

HQ, HKV, D = 32, 8, 128


class FakeTensor:
    """Enough of a torch.Tensor for the wrappers' checks."""

    def __init__(self, shape, dtype="torch.float32", device="cuda:0", ptr=0x1000):
        self.shape, self.dtype, self.device, self._ptr = tuple(shape), dtype, device, ptr

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return self._ptr


def spec_for(kind, **kw):
    prefill = kind != "decode"
    return make_spec(num_qo_heads=HQ, num_kv_heads=HKV, head_dim=D, page_size=16, dtype="bf16", kv_layout="NHD",
                     query_rows=None if prefill else 1, indexing="ragged" if kind == "ragged" else "paged",
                     causal=prefill, **kw)


def test_logits_scale_keyword_and_order():
    names, values = build_variants(causal=True, logits_soft_cap=30.0, pos_encoding_mode="ROPE_LLAMA31",
                                   logits_scale=0.25, sinks="table")
    assert names == ("rope_llama31", "logits_scale", "soft_cap", "causal", "sinks")
    assert values[("logits_scale", "scale")] == 0.25 and values[("sinks", "sinks")] == "table"
    assert build_variants(pos_encoding_mode="ALIBI", logits_scale=2)[0] == ("logits_scale", "alibi")
    assert build_variants()[0] == ()


@pytest.mark.parametrize("kind", ["prefill", "ragged", "decode"])
def test_sinks_ir_is_a_table_parameter(kind):
    spec, _ = spec_for(kind, sinks=FakeTensor((HQ,)))
    ir = spec.to_ir()
    assert "@sinks]" in ir and "memref<?xf32>" in ir
    assert spec.param_list() == [("sinks", "sinks", "memref<?xf32>")]
    # The value is not part of the kernel: any table gives the same IR (the cache key).
    assert spec_for(kind, sinks=FakeTensor((HQ,), ptr=0x2000))[0].to_ir() == ir


def test_variant_args_bind_the_sinks_table_by_pointer():
    spec, values = spec_for("ragged", sinks=FakeTensor((HQ,), ptr=0xabc0), logits_scale=0.5)
    w = core.WrapperBase.__new__(core.WrapperBase)
    w._device = "cuda:0"
    assert w._variant_args(spec, values) == [("scale", "f32", 0.5), ("sinks", "ptr", 0xabc0)]
    for bad, err, match in [(FakeTensor((HQ - 1,)), ValueError, "sinks: expected shape"),
                            (FakeTensor((HQ,), dtype="torch.bfloat16"), TypeError, "sinks: expected dtype f32"),
                            (FakeTensor((HQ,), device="cuda:1"), ValueError, "sinks: expected a tensor on cuda:0"),
                            (FakeTensor((1, HQ)), ValueError, "sinks: expected 1 dimensions")]:
        spec, values = spec_for("prefill", sinks=bad)
        with pytest.raises(err, match=match):
            w._variant_args(spec, values)


@pytest.mark.compiler
@pytest.mark.parametrize("kind", ["prefill", "ragged", "decode"])
def test_sinks_kernels_take_the_table_as_a_pointer(native, kind):
    spec, _ = spec_for(kind, sinks=FakeTensor((HQ,)))
    r = native.compile(spec.to_ir(), chip="sm_90", emit_cubin=False)
    assert r["ok"], r["diagnostics"]
    kernels = [k for k in json.loads(r["manifest"])["kernels"] if k["role"] == "attention"]
    # Decode has one tile; prefill every candidate (q 16 / 64 / 128), each taking the table.
    assert [k["tile"]["q"] for k in kernels] == ([16] if kind == "decode" else [16, 64, 128])
    for k in kernels:
        assert k["name"].endswith("_causal_sinks" if kind != "decode" else "_sinks")
        assert k["variant_params"] == [{"name": "sinks", "type": "ptr"}]
        assert k["args"][-1] == {"name": "sinks", "kind": "ptr", "dtype": "f32"}  # [num_qo_heads]
        assert k["args"][-2]["name"] == "sm_scale"


@pytest.mark.compiler
@pytest.mark.parametrize("kind", ["prefill", "ragged", "decode"])
@pytest.mark.parametrize("kw,variant,params", [
    (dict(logits_scale=0.5), "logits_scale", [("scale", "f32")]),
    (dict(pos_encoding_mode="ROPE_LLAMA31"), "rope_llama31",
     [(n, "f32") for n in ("rope_scale", "rope_theta", "rope_factor", "low_freq_factor", "high_freq_factor",
                           "original_context")]),
    (dict(pos_encoding_mode="ROPE_LLAMA31", logits_scale=0.5, sinks=FakeTensor((HQ,))), "rope_llama31_logits_scale",
     [(n, "f32") for n in ("rope_scale", "rope_theta", "rope_factor", "low_freq_factor", "high_freq_factor",
                           "original_context", "scale")] + [("sinks", "ptr")]),
], ids=["logits_scale", "rope_llama31", "all_three"])
def test_scalar_and_table_parameters_in_order(native, kind, kw, variant, params):
    spec, values = spec_for(kind, **kw)
    r = native.compile(spec.to_ir(), chip="sm_90", emit_cubin=False)
    assert r["ok"], r["diagnostics"]
    k = next(k for k in json.loads(r["manifest"])["kernels"] if k["role"] == "attention")
    assert variant in k["name"]
    assert [(p["name"], p["type"]) for p in k["variant_params"]] == params
    assert [(a["name"], a["kind"]) for a in k["args"][-len(params):]] == params
    # The wrappers bind the same names, in the same order.
    w = core.WrapperBase.__new__(core.WrapperBase)
    w._device = "cuda:0"
    assert [(n, t) for n, t, _ in w._variant_args(spec, values)] == params


def test_precompile_flags_select_the_wrappers_kernels():
    kw = {"sinks": precompile.SINKS_AT_PLAN_TIME, "logits_scale": 0.5, "pos_encoding_mode": "ROPE_LLAMA31"}
    got = precompile.specs_for(HQ, HKV, D, ["decode", "prefill", "ragged"], [16], ["bf16"], ["NHD"], [1], kw)
    assert [s.variants for _, s in got] == [("rope_llama31", "logits_scale", "sinks")] + \
        [("rope_llama31", "logits_scale", "causal", "sinks")] * 2
    # The same IR (the cache key) as a wrapper's plan with a real table and another scale.
    for (_, s), kind in zip(got, ["decode", "prefill", "ragged"]):
        mine, _ = spec_for(kind, sinks=FakeTensor((HQ,)), logits_scale=3.0, pos_encoding_mode="ROPE_LLAMA31")
        assert s.to_ir() == mine.to_ir()


@pytest.mark.compiler
def test_precompile_sinks_is_found_by_the_ragged_wrapper(tmp_path, capsys):
    from attn import cache as cache_mod
    out = tmp_path / "kernels"
    assert precompile.main(["--heads", "32/8", "--head-dim", "128", "--kinds", "ragged", "--sinks",
                            "--out", str(out)]) == 0
    assert "0 skipped" in capsys.readouterr().out
    spec, _ = spec_for("ragged", sinks=FakeTensor((HQ,)))
    cache = cache_mod.KernelCache(str(out))
    contracts = cache.lookup(cache_mod.cache_key(spec.to_ir(), "sm_90", "manifest"))
    assert contracts is not None and contracts.image == b""
    # Every tile candidate the planner may pick has its own entry.
    n = sum(1 for k in json.loads(contracts.manifest)["kernels"] if k["role"] == "attention")
    assert n == 3
    for i in range(n):
        assert cache.lookup(cache_mod.cache_key(spec.to_ir(), "sm_90", "cubin", i)).image


def flashinfer_llama31_inv_freq(head_dim, theta, factor, low, high, ctx):
    """FlashInfer's formulation (pos_enc.cuh): a clamped linear blend in the frequency."""
    out = []
    smooth_a = ctx / (2 * math.pi * (high - low))
    smooth_b = -low / (high - low)
    for j in range(head_dim // 2):
        f = 1.0 / theta ** (2.0 * j / head_dim)
        smooth = min(1.0, max(0.0, f * smooth_a + smooth_b))
        out.append((1 - smooth) * f / factor + smooth * f)
    return out


@pytest.mark.parametrize("theta,head_dim", [(5e5, 128), (1e4, 64), (5e5, 256)])
def test_reference_llama31_frequencies_match_flashinfer(theta, head_dim):
    mine = rope_inv_freq(head_dim, theta, LLAMA31)
    theirs = flashinfer_llama31_inv_freq(head_dim, theta, 8.0, 1.0, 4.0, 8192.0)
    for a, b in zip(mine, theirs):
        assert a == pytest.approx(b, rel=1e-12)
    plain = rope_inv_freq(head_dim, theta)
    # High frequencies stay, low ones are divided by the factor, and (for
    # Llama-3.1's own theta) some lie in the blended band.
    assert mine[0] == plain[0] and mine[-1] == pytest.approx(plain[-1] / 8.0)
    if theta == 5e5:
        blended = [m for m, p in zip(mine, plain) if p / 8.0 < m < p]
        assert blended, "no frequency in the blended band"


def test_reference_llama31_bands():
    """Wavelengths under 8192 / 4 are kept, over 8192 / 1 divided by 8 (Llama-3.1, D = 128)."""
    f = rope_inv_freq(D, 5e5, LLAMA31)
    p = rope_inv_freq(D, 5e5)
    for fj, pj in zip(f, p):
        w = 2 * math.pi / pj
        if w < 2048:
            assert fj == pj
        elif w > 8192:
            assert fj == pytest.approx(pj / 8)
