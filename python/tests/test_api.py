"""CPU-side checks: import without torch/GPU, argument validation, IR generation."""

import pytest

import attn
from attn import core
from attn.variants import AttentionSpec, Variant, build_variants


class FakeTensor:
    """Enough of torch.Tensor for the duck-typed checks."""

    def __init__(self, shape, dtype="torch.bfloat16", device="cuda:0", contiguous=True):
        self.shape, self.dtype, self.device, self._c = tuple(shape), dtype, device, contiguous

    def is_contiguous(self):
        return self._c


def test_import_without_torch_exports_flashinfer_names():
    for name in ["BatchDecodeWithPagedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper",
                 "BatchPrefillWithRaggedKVCacheWrapper", "MultiLevelCascadeAttentionWrapper", "merge_state",
                 "merge_state_in_place", "merge_states", "append_paged_kv_cache",
                 "single_prefill_with_kv_cache", "single_decode_with_kv_cache"]:
        assert callable(getattr(attn, name)), name


def test_check_tensor_names_the_problem():
    with pytest.raises(TypeError, match="q: expected dtype bf16, got f16"):
        core.check_tensor("q", FakeTensor((2, 32, 128), "torch.float16"), dtype="bf16")
    with pytest.raises(ValueError, match=r"q: expected shape \[nnz_qo=3, num_qo_heads=32, head_dim=128\], got \[2, 32, 128\]"):
        core.check_tensor("q", FakeTensor((2, 32, 128)), shape=(("nnz_qo", 3), ("num_qo_heads", 32), ("head_dim", 128)))
    with pytest.raises(ValueError, match="expected a tensor on cuda:0, got one on cpu"):
        core.check_tensor("o", FakeTensor((1,), device="cpu"), device="cuda:0")
    with pytest.raises(ValueError, match="contiguous"):
        core.check_tensor("k_cache", FakeTensor((1,), contiguous=False))
    with pytest.raises(TypeError, match="expected a torch.Tensor, got list"):
        core.check_tensor("q", [1, 2])


def test_paged_kv_cache_shapes():
    ok = FakeTensor((10, 2, 16, 8, 128))
    assert core.split_paged_kv_cache(ok, "NHD", 16, 8, 128, "bf16", "cuda:0")[2] == 2 * 16 * 8 * 128  # page stride
    with pytest.raises(ValueError, match=r"paged_kv_cache: expected shape \[num_pages, 2=2, num_kv_heads=8, page_size=16"):
        core.split_paged_kv_cache(ok, "HND", 16, 8, 128, "bf16", "cuda:0")
    k, v = FakeTensor((10, 16, 8, 128)), FakeTensor((10, 16, 8, 128))
    assert core.split_paged_kv_cache((k, v), "NHD", 16, 8, 128, "bf16", "cuda:0")[2] == 16 * 8 * 128
    with pytest.raises(ValueError, match="v_cache: expected shape"):
        core.split_paged_kv_cache((k, FakeTensor((10, 16, 4, 128))), "NHD", 16, 8, 128, "bf16", "cuda:0")


def test_wrapper_constructor_validation():
    ws = FakeTensor((1 << 20,), "torch.uint8")
    with pytest.raises(ValueError, match="kv_layout must be 'NHD' or 'HND'"):
        attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NDH")
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        attn.BatchDecodeWithPagedKVCacheWrapper(FakeTensor((1 << 20,), "torch.uint8", "cpu"))
    with pytest.raises(ValueError, match="use_cuda_graph=True needs paged_kv_indptr_buffer"):
        attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_cuda_graph=True)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "HND")
    assert not w.is_cuda_graph_enabled
    # Graph mode's indptr buffers set the maximum batch (the kernels read the plan's copies): they must
    # hold batch + 1 entries, the batch being the last-page-length buffer's (paged) or qo_indptr's.
    i32 = lambda n: FakeTensor((n,), "torch.int32")  # noqa: E731
    with pytest.raises(ValueError, match=r"paged_kv_indptr_buf needs batch \+ 1 entries \(9, from"):
        attn.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", True, i32(9), i32(8), i32(64), i32(8))
    with pytest.raises(ValueError, match=r"qo_indptr_buf needs batch \+ 1 entries \(9, from"):
        attn.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", True, i32(5), i32(9), i32(64), i32(8))
    assert attn.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", True, i32(9), i32(9), i32(64), i32(8))._max_batch == 8
    with pytest.raises(ValueError, match=r"kv_indptr_buf needs batch \+ 1 entries \(9, as qo_indptr_buf\)"):
        attn.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD", True, i32(9), i32(4))


def test_plan_argument_validation_before_any_gpu_work():
    from attn.paged import check_heads, q_kv_dtypes
    with pytest.raises(ValueError, match=r"num_qo_heads \(30\) must be a multiple of num_kv_heads \(8\)"):
        check_heads(30, 8, 128, 16)
    with pytest.raises(ValueError, match="page_size must be a positive int"):
        check_heads(32, 8, 128, 0)
    with pytest.raises(TypeError, match="must equal q_data_type"):
        q_kv_dtypes("bfloat16", "float16")
    with pytest.raises(TypeError, match="unsupported dtype"):
        q_kv_dtypes("float8_e4m3fn", None)
    assert q_kv_dtypes("torch.bfloat16", None) == "bf16"


def test_builtin_variants_from_flashinfer_keywords():
    names, values = build_variants(causal=True, window_left=64, logits_soft_cap=30.0,
                                   pos_encoding_mode="ROPE_LLAMA", rope_theta=5e5)
    assert names == ("rope", "soft_cap", "causal", "sliding_window")
    assert values[("rope", "rope_theta")] == 5e5 and values[("rope", "rope_scale")] == 1.0
    assert values[("sliding_window", "window_left")] == 64
    names, values = build_variants(pos_encoding_mode="ROPE_LLAMA31")
    assert names == ("rope_llama31",) and values[("rope_llama31", "rope_factor")] == 8.0
    with pytest.raises(ValueError, match="pos_encoding_mode must be one of"):
        build_variants(pos_encoding_mode="ROPE")


def test_custom_variant_parsing_and_params():
    v = Variant("attn.variant @scaled(alpha : f32, w : i32) {\n}\nattn.variant @plain {\n}")
    assert v.names == ["scaled", "plain"]
    assert v.params["scaled"] == [("alpha", "f32"), ("w", "i32")]
    names, values = build_variants(variant=v, variant_params={"alpha": 0.5, "w": 3})
    assert names == ("scaled", "plain") and values[("scaled", "alpha")] == 0.5
    with pytest.raises(ValueError, match="needs parameter 'w'"):
        build_variants(variant=v, variant_params={"alpha": 0.5})
    with pytest.raises(ValueError, match="unknown parameters"):
        build_variants(variant=v, variant_params={"alpha": 0.5, "w": 1, "beta": 2})
    with pytest.raises(ValueError, match="shadow the built-in"):
        Variant("attn.variant @causal { }")
    with pytest.raises(ValueError, match="no 'attn.variant @name' definition"):
        Variant("func.func @f() { return }")


def test_ir_text_is_deterministic_and_complete():
    s = AttentionSpec(128, 32, 8, 16, layout="HND", variants=("soft_cap",))
    ir = s.to_ir()
    assert ir == AttentionSpec(128, 32, 8, 16, layout="HND", variants=("soft_cap",)).to_ir()
    assert "tensor<?x8x16x128xbf16>" in ir and "variants [@soft_cap]" in ir and "params(%p0 : f32)" in ir
    r = AttentionSpec(64, 8, 8, indexing="ragged", query_rows=128).to_ir()
    assert "indexing = ragged" in r and "tensor<?x8x64xbf16>" in r and "strided" not in r
    # Strided ragged K/V: another format, so another kernel (and cache key); same tensors.
    st = AttentionSpec(64, 8, 8, indexing="ragged", query_rows=128, strided_kv=True).to_ir()
    assert "indexing = ragged, strided = true>" in st and st.replace(", strided = true", "") == r


def test_precompile_strided_kv_adds_the_strided_ragged_specs():
    from attn import precompile
    specs = precompile.specs_for(32, 8, 128, ["ragged", "prefill"], [16], ["bf16"], ["NHD"], [1],
                                 {"strided_kv": True})
    strided = [s for _, s in specs if s.strided_kv]
    assert len(specs) == 3 and len(strided) == 1 and strided[0].indexing == "ragged"


def test_precompile_cli_lists_models(capsys):
    from attn import precompile
    assert precompile.main(["--list"]) == 0
    assert "llama3-8b" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--heads", "32/0"], "argument --heads: HQ and HKV must be positive and HQ a multiple of HKV, got '32/0'"),
    (["--heads", "32/5"], "HQ a multiple of HKV, got '32/5'"),
    (["--heads", "32"], "argument --heads: expected HQ/HKV, e.g. 32/8, got '32'"),
    (["--heads", "32/8", "--tp", "0"], "argument --tp: expected a comma list of positive integers, got '0'"),
    (["--heads", "32/8", "--page-size", "16,x"], "argument --page-size: expected a comma list of positive"),
    (["--heads", "32/8", "--merge-states", "-2"], "argument --merge-states: expected a comma list of positive"),
    (["--heads", "32/8", "--page-size", "99999"], "page_size must be a positive int <= 65536, got 99999"),
    (["--heads", "32/8", "--head-dim", "100"], "head_dim must be a multiple of 16 in [16, 256], got 100"),
    (["--heads", "32/8", "--dtype", "fp8"], "dtype must be one of ('bf16', 'f16'), got 'fp8'"),
])
def test_precompile_cli_refuses_bad_shapes_before_compiling(tmp_path, capsys, args, message):
    # A command-line error naming the value, before any kernel is compiled or
    # the output folder made (--heads 32/0 used to compile 32/1's kernels).
    from attn import precompile
    if "--head-dim" not in args:
        args = args + ["--head-dim", "128"]
    out = tmp_path / "pack"
    with pytest.raises(SystemExit) as exit_info:
        precompile.main(["--out", str(out), "--kinds", "decode", *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
