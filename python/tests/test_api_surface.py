"""FlashInfer's API surface as serving engines call it (CPU only).

The parameter lists below are FlashInfer's (flashinfer-ai/flashinfer,
flashinfer/decode.py, prefill.py, cascade.py), written out: an engine calling
``plan(...)`` positionally must reach the same parameters in attn, attn's own
extras must be keyword-only, and what attn does not implement must raise
NotImplementedError naming the argument instead of being swallowed.
"""

import functools
import importlib
import inspect
import math
import types

import pytest

import attn
from attn import core, paged

P = inspect.Parameter

DECODE_INIT = ["float_workspace_buffer", "kv_layout", "use_cuda_graph", "use_tensor_cores", "paged_kv_indptr_buffer",
               "paged_kv_indices_buffer", "paged_kv_last_page_len_buffer", "backend", "jit_args"]
DECODE_PLAN = ["indptr", "indices", "last_page_len", "num_qo_heads", "num_kv_heads", "head_dim", "page_size",
               # FlashInfer 0.6+'s legacy positional arguments after page_size, in order:
               "pos_encoding_mode", "window_left", "logits_soft_cap", "q_data_type", "kv_data_type", "o_data_type",
               "data_type", "sm_scale", "rope_scale", "rope_theta", "non_blocking", "block_tables", "seq_lens",
               "fixed_split_size", "disable_split_kv", "q_len_per_req"]
DECODE_RUN_KW = ["q_scale", "k_scale", "v_scale", "out", "lse", "return_lse", "enable_pdl", "window_left", "sinks",
                 "q_len_per_req", "skip_softmax_threshold_scale_factor", "kv_cache_sf"]
DECODE_FORWARD = ["q", "paged_kv_cache", "pos_encoding_mode", "q_scale", "k_scale", "v_scale", "window_left",
                  "logits_soft_cap", "sm_scale", "rope_scale", "rope_theta"]
FAST_DECODE_PLAN = ["self", "indptr", "indices", "last_page_len", "num_qo_heads", "num_kv_heads", "head_dim",
                    "page_size", "pos_encoding_mode", "window_left", "logits_soft_cap", "q_data_type", "kv_data_type",
                    "data_type", "sm_scale", "rope_scale", "rope_theta", "non_blocking", "fixed_split_size",
                    "disable_split_kv", "q_len_per_req", "global_override_indptr_cpu"]

PAGED_INIT = ["float_workspace_buffer", "kv_layout", "use_cuda_graph", "qo_indptr_buf", "paged_kv_indptr_buf",
              "paged_kv_indices_buf", "paged_kv_last_page_len_buf", "custom_mask_buf", "mask_indptr_buf", "backend",
              "jit_args", "jit_kwargs"]
PAGED_PLAN = ["qo_indptr", "paged_kv_indptr", "paged_kv_indices", "paged_kv_last_page_len", "num_qo_heads",
              "num_kv_heads", "head_dim_qk", "page_size", "head_dim_vo", "custom_mask", "packed_custom_mask",
              "causal", "pos_encoding_mode", "use_fp16_qk_reduction", "sm_scale", "window_left", "logits_soft_cap",
              "rope_scale", "rope_theta", "q_data_type", "kv_data_type", "o_data_type", "non_blocking",
              "prefix_len_ptr", "token_pos_in_items_ptr", "token_pos_in_items_len", "max_item_len_ptr", "seq_lens",
              "seq_lens_q", "block_tables", "max_token_per_sequence", "max_sequence_kv", "fixed_split_size",
              "disable_split_kv"]
PAGED_RUN_KW = ["q_scale", "k_scale", "v_scale", "out", "lse", "return_lse", "enable_pdl", "window_left", "sinks",
                "kv_cache_sf", "skip_softmax_threshold_scale_factor", "use_fp16_softmax", "uses_spcompress"]
PAGED_FORWARD = ["q", "paged_kv_cache", "causal", "pos_encoding_mode", "use_fp16_qk_reduction", "k_scale", "v_scale",
                 "window_left", "logits_soft_cap", "sm_scale", "rope_scale", "rope_theta"]

RAGGED_INIT = ["float_workspace_buffer", "kv_layout", "use_cuda_graph", "qo_indptr_buf", "kv_indptr_buf",
               "custom_mask_buf", "mask_indptr_buf", "backend", "jit_args", "jit_kwargs"]
RAGGED_PLAN = ["qo_indptr", "kv_indptr", "num_qo_heads", "num_kv_heads", "head_dim_qk", "head_dim_vo", "custom_mask",
               "packed_custom_mask", "causal", "pos_encoding_mode", "use_fp16_qk_reduction", "window_left",
               "logits_soft_cap", "sm_scale", "rope_scale", "rope_theta", "q_data_type", "kv_data_type",
               "o_data_type", "non_blocking", "prefix_len_ptr", "token_pos_in_items_ptr", "token_pos_in_items_len",
               "max_item_len_ptr", "fixed_split_size", "disable_split_kv", "seq_lens", "seq_lens_q",
               "max_token_per_sequence", "max_sequence_kv", "v_indptr", "o_indptr"]
RAGGED_RUN_KW = ["q_scale", "k_scale", "v_scale", "o_scale", "out", "lse", "return_lse", "enable_pdl", "kv_cache_sf"]
RAGGED_FORWARD = ["q", "k", "v", "causal", "pos_encoding_mode", "use_fp16_qk_reduction", "window_left",
                  "logits_soft_cap", "sm_scale", "rope_scale", "rope_theta"]

CASCADE_INIT = ["num_levels", "float_workspace_buffer", "kv_layout", "use_cuda_graph", "qo_indptr_buf_arr",
                "paged_kv_indptr_buf_arr", "paged_kv_indices_buf_arr", "paged_kv_last_page_len_buf_arr"]
CASCADE_PLAN = ["qo_indptr_arr", "paged_kv_indptr_arr", "paged_kv_indices_arr", "paged_kv_last_page_len",
                "num_qo_heads", "num_kv_heads", "head_dim", "page_size", "causal", "pos_encoding_mode",
                "use_fp16_qk_reduction", "sm_scale", "window_left", "logits_soft_cap", "rope_scale", "rope_theta",
                "q_data_type", "kv_data_type"]

Decode = attn.BatchDecodeWithPagedKVCacheWrapper
Paged = attn.BatchPrefillWithPagedKVCacheWrapper
Ragged = attn.BatchPrefillWithRaggedKVCacheWrapper
Cascade = attn.MultiLevelCascadeAttentionWrapper
SharedDecode = attn.BatchDecodeWithSharedPrefixPagedKVCacheWrapper
SharedPrefill = attn.BatchPrefillWithSharedPrefixPagedKVCacheWrapper
# FlashInfer's (deprecated) two-level shared-prefix wrappers.
SHARED_DECODE_PLAN = ["indptr", "indices", "last_page_len", "num_qo_heads", "num_kv_heads", "head_dim", "page_size",
                      "data_type"]
SHARED_DECODE_RUN = ["q", "k_shared", "v_shared", "unique_kv_cache", "allow_fp16_qk_reduction", "sm_scale",
                     "rope_scale", "rope_theta"]
SHARED_PREFILL_PLAN = ["qo_indptr", "paged_kv_indptr", "paged_kv_indices", "paged_kv_last_page_len",
                       "num_qo_heads", "num_kv_heads", "head_dim", "page_size"]
SHARED_PREFILL_RUN = ["q", "k_shared", "v_shared", "unique_kv_cache", "causal", "allow_fp16_qk_reduction",
                      "sm_scale", "rope_scale", "rope_theta"]

# (callable, FlashInfer's positional parameters after self, attn's keyword-only extras)
POSITIONAL = {
    "decode.__init__": (Decode.__init__, DECODE_INIT, []),
    "shared_decode.plan": (SharedDecode.plan, SHARED_DECODE_PLAN, []),
    "shared_decode.forward": (SharedDecode.forward, SHARED_DECODE_RUN, []),
    "shared_prefill.plan": (SharedPrefill.begin_forward, SHARED_PREFILL_PLAN, []),
    "shared_prefill.forward": (SharedPrefill.forward, SHARED_PREFILL_RUN, []),
    "decode.plan": (Decode.plan, DECODE_PLAN, ["window_right", "sinks", "variant", "variant_params", "logits_scale"]),
    "decode.run": (Decode.run, ["q", "paged_kv_cache"], DECODE_RUN_KW),
    "decode.forward": (Decode.forward, DECODE_FORWARD, []),
    "decode.forward_return_lse": (Decode.forward_return_lse, DECODE_FORWARD, []),
    "paged.__init__": (Paged.__init__, PAGED_INIT, ["max_total_q_rows"]),
    "paged.plan": (Paged.plan, PAGED_PLAN, ["sinks", "variant", "variant_params", "logits_scale"]),
    "paged.run": (Paged.run, ["q", "paged_kv_cache"], PAGED_RUN_KW),
    "paged.forward": (Paged.forward, PAGED_FORWARD, []),
    "paged.forward_return_lse": (Paged.forward_return_lse, PAGED_FORWARD, []),
    "ragged.__init__": (Ragged.__init__, RAGGED_INIT, ["max_total_q_rows"]),
    "ragged.plan": (Ragged.plan, RAGGED_PLAN, ["sinks", "variant", "variant_params", "logits_scale"]),
    "ragged.run": (Ragged.run, ["q", "k", "v"], RAGGED_RUN_KW),
    "ragged.forward": (Ragged.forward, RAGGED_FORWARD, []),
    "ragged.forward_return_lse": (Ragged.forward_return_lse, RAGGED_FORWARD, []),
    "cascade.__init__": (Cascade.__init__, CASCADE_INIT, []),
    "cascade.plan": (Cascade.plan, CASCADE_PLAN, ["variant", "variant_params", "logits_scale"]),
    "cascade.run": (Cascade.run, ["q", "paged_kv_cache"], []),
}


class FakeTensor:
    """Enough of torch.Tensor for the wrappers' constructors and argument checks."""

    def __init__(self, shape=(1,), dtype="torch.int32", device="cuda:0"):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device

    def is_contiguous(self):
        return True


def workspace():
    return FakeTensor((128 << 20,), "torch.uint8")


class Reached(Exception):
    """Raised where plan() first needs torch: every argument check before it passed."""


@pytest.fixture
def no_torch_past_checks(monkeypatch):
    def reached():
        raise Reached
    for module in (attn.decode, attn.paged, attn.core):
        monkeypatch.setattr(module, "torch_module", reached)


def params(fn):
    return list(inspect.signature(fn).parameters.values())


@pytest.mark.parametrize("what", list(POSITIONAL))
def test_signature_is_flashinfers(what):
    fn, positional, extras = POSITIONAL[what]
    ps = params(fn)[1:]  # self
    assert [p.name for p in ps if p.kind == P.POSITIONAL_OR_KEYWORD] == positional
    assert [p.name for p in ps if p.kind == P.KEYWORD_ONLY] == extras
    # Nothing is swallowed: no **kwargs, and *args only where FlashInfer's run() has it.
    assert not any(p.kind == P.VAR_KEYWORD for p in ps)
    var = [p.name for p in ps if p.kind == P.VAR_POSITIONAL]
    assert var == (["args"] if what.endswith(".run") and what != "cascade.run" else [])


@pytest.mark.parametrize("what", [w for w in POSITIONAL if not w.endswith(".run")])
def test_positional_arguments_land_on_flashinfers_parameters(what):
    fn, positional, _ = POSITIONAL[what]
    values = [object() for _ in positional]
    bound = inspect.signature(fn).bind(None, *values)
    for name, value in zip(positional, values):
        assert bound.arguments[name] is value, name
    with pytest.raises(TypeError):  # one more positional value has no parameter (attn's extras are keyword-only)
        inspect.signature(fn).bind(None, *values, object())


def test_vllm_style_positional_decode_plan_binds_split_arguments(no_torch_past_checks):
    # vLLM's fast_plan_decode calls plan() with every argument positional.
    args = (FakeTensor(), FakeTensor(), FakeTensor(), 32, 8, 128, 16, "NONE", -1, None, "bfloat16", "bfloat16",
            None, None, 0.088, None, None, True, None, None, 2048, True)
    bound = inspect.signature(Decode.plan).bind(None, *args)
    assert bound.arguments["sm_scale"] == 0.088
    assert bound.arguments["fixed_split_size"] == 2048 and bound.arguments["disable_split_kv"] is True
    assert "variant_params" not in bound.arguments and "logits_scale" not in bound.arguments
    # Both are implemented (batch-invariant decode, test_batch_invariant.py): the checks pass.
    with pytest.raises(Reached):
        Decode(workspace()).plan(*args)


def test_fast_decode_plan_signature_and_semantics(monkeypatch):
    assert [p.name for p in params(attn.decode.fast_decode_plan)] == FAST_DECODE_PLAN
    assert attn.fast_decode_plan is attn.decode.fast_decode_plan
    w = Decode(workspace())
    calls = []
    monkeypatch.setattr(Decode, "plan", lambda self, *a, **k: calls.append((a, k)))
    host, dev = [0, 3], FakeTensor((2,))
    # SGLang installs it as the wrapper's begin_forward.
    w.begin_forward = functools.partial(attn.fast_decode_plan, w)
    w.begin_forward(dev, FakeTensor((3,)), [5], 32, 8, 128, 16, data_type="bfloat16", non_blocking=True,
                    fixed_split_size=None, disable_split_kv=False, global_override_indptr_cpu=host)
    (a, k), = calls
    assert a[0] is host and a[3:] == (32, 8, 128, 16)
    assert k["q_data_type"] == "bfloat16" and k["kv_data_type"] == "bfloat16"
    assert k["fixed_split_size"] is None and k["disable_split_kv"] is False and k["q_len_per_req"] == 1
    calls.clear()
    attn.fast_decode_plan(w, dev, FakeTensor((3,)), [5], 32, 8, 128, 16)
    assert calls[0][0][0] is dev and calls[0][1]["q_data_type"] == "float16"
    # FlashInfer's tests install it as the instance's plan: it calls the class's plan, not itself.
    calls.clear()
    w.plan = functools.partial(attn.fast_decode_plan, w)
    w.plan(dev, FakeTensor((3,)), [5], 32, 8, 128, 16)
    assert len(calls) == 1 and calls[0][0][0] is dev


def test_multi_token_decode_names_q_len_per_req_in_a_q_shape_error():
    w = Decode(workspace())
    p = core.PlannedRun()
    p.spec = types.SimpleNamespace(num_qo_heads=8, head_dim=128)
    p.total_q, p.q_len_per_req, p.dtype, p.sinks = 8, 2, "bf16", None
    w._planned = p
    with pytest.raises(ValueError, match=r"q: expected shape \[batch 4 \* q_len_per_req 2=8, .*got \[12, 8, 128\]"):
        w._run_paged(FakeTensor((12, 8, 128), "torch.bfloat16"), FakeTensor(), out=None, lse=None, return_lse=False)


def test_decode_wrapper_keeps_use_tensor_cores():
    assert Decode(workspace()).use_tensor_cores is False
    assert Decode(workspace(), "NHD", use_tensor_cores=True).use_tensor_cores is True


def test_aliases():
    for cls in (Decode, Paged, Ragged, Cascade):
        assert cls.begin_forward is cls.plan, cls.__name__
    for cls in (Decode, Paged, Ragged):
        assert callable(cls.end_forward) and callable(cls.forward) and callable(cls.forward_return_lse)
        lse = cls.__dict__["run_return_lse"]
        assert isinstance(lse, functools.partialmethod) and lse.func is cls.run and lse.keywords == {"return_lse": True}
    assert Cascade.forward is Cascade.run
    assert attn.single_prefill_with_kv_cache_return_lse.keywords == {"return_lse": True}


ENGINE_IMPORTS = {
    "attn": ["BatchDecodeWithPagedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper",
             "BatchPrefillWithRaggedKVCacheWrapper", "MultiLevelCascadeAttentionWrapper", "fast_decode_plan",
             "get_seq_lens", "merge_state", "merge_state_in_place", "merge_states", "append_paged_kv_cache",
             "get_batch_indices_positions", "single_decode_with_kv_cache", "single_prefill_with_kv_cache",
             "single_prefill_with_kv_cache_return_lse", "packbits", "segment_packbits", "next_positive_power_of_2",
             "BatchMLAPagedAttentionWrapper", "BatchDecodeMlaWithPagedKVCacheWrapper", "decode", "prefill",
             "cascade", "page", "utils", "mla"],
    "attn.decode": ["BatchDecodeWithPagedKVCacheWrapper", "BatchDecodeMlaWithPagedKVCacheWrapper", "_get_range_buf",
                    "get_seq_lens", "fast_decode_plan", "single_decode_with_kv_cache",
                    "trtllm_batch_decode_with_kv_cache", "trtllm_batch_decode_with_kv_cache_mla"],
    "attn.prefill": ["BatchPrefillWithPagedKVCacheWrapper", "BatchPrefillWithRaggedKVCacheWrapper",
                     "single_prefill_with_kv_cache", "single_prefill_with_kv_cache_return_lse",
                     "trtllm_batch_context_with_kv_cache"],
    "attn.cascade": ["MultiLevelCascadeAttentionWrapper", "merge_state", "merge_state_in_place", "merge_states",
                     "BatchDecodeWithSharedPrefixPagedKVCacheWrapper",
                     "BatchPrefillWithSharedPrefixPagedKVCacheWrapper"],
    "attn.page": ["append_paged_kv_cache", "get_batch_indices_positions", "get_seq_lens",
                  "nvfp4_quantize_append_paged_kv_cache", "nvfp4_quantize_append_paged_kv_cache_with_slot_mapping"],
    "attn.utils": ["FP4Tensor", "PosEncodingMode", "MaskMode", "TensorLayout", "_get_range_buf", "_get_cache_buf",
                   "get_compute_capability", "is_float8", "canonicalize_torch_dtype", "ceil_div", "round_up",
                   "next_positive_power_of_2"],
    "attn.mla": ["BatchMLAPagedAttentionWrapper", "trtllm_batch_decode_with_kv_cache_mla"],
}


@pytest.mark.parametrize("module", list(ENGINE_IMPORTS))
def test_module_level_names_engines_import(module):
    m = importlib.import_module(module)
    missing = [n for n in ENGINE_IMPORTS[module] if not hasattr(m, n)]
    assert not missing, f"{module} lacks {missing}"


def test_utils_values_are_flashinfers():
    u = attn.utils
    assert [(e.name, e.value) for e in u.PosEncodingMode] == [("NONE", 0), ("ROPE_LLAMA", 1), ("ALIBI", 2)]
    assert [(e.name, e.value) for e in u.MaskMode] == [("NON_CAUSAL", 0), ("CAUSAL", 1), ("CUSTOM", 2),
                                                       ("MULTIITEMSCORING", 3)]
    assert [(e.name, e.value) for e in u.TensorLayout] == [("NHD", 0), ("HND", 1)]
    assert [u.next_positive_power_of_2(x) for x in (-3, 0, 1, 2, 3, 64, 65)] == [1, 1, 1, 2, 4, 64, 128]
    assert (u.ceil_div(7, 4), u.round_up(7, 4), u.round_up(8, 4)) == (2, 8, 8)


def test_get_seq_lens_and_range_buf_follow_flashinfer():
    torch = pytest.importorskip("torch")
    indptr = torch.tensor([0, 3, 7, 7], dtype=torch.int32)
    last = torch.tensor([5, 16, 1], dtype=torch.int32)
    # max(pages - 1, 0) * page_size + last_page_len, as FlashInfer (a request without pages counts last).
    assert attn.decode.get_seq_lens(indptr, last, 16).tolist() == [37, 64, 1]
    r = attn.utils._get_range_buf(5, "cpu")
    assert r.dtype == torch.int32 and r.tolist() == [0, 1, 2, 3, 4]
    assert attn.utils._get_range_buf(3, "cpu").data_ptr() == r.data_ptr()


# -- what attn does not implement raises NotImplementedError naming it ---------

INDPTR, LAST = [0, 1], [1]

DECODE_PLAN_UNSUPPORTED = [dict(block_tables=FakeTensor((1, 4))), dict(seq_lens=FakeTensor()),
                           dict(window_right=-1),
                           dict(o_data_type="float32")]
PREFILL_PLAN_UNSUPPORTED = [dict(prefix_len_ptr=FakeTensor()), dict(token_pos_in_items_ptr=FakeTensor((8,))),
                            dict(token_pos_in_items_len=20), dict(max_item_len_ptr=FakeTensor()),
                            dict(seq_lens=FakeTensor()), dict(seq_lens_q=FakeTensor()),
                            dict(max_token_per_sequence=128), dict(max_sequence_kv=4096),
                            dict(fixed_split_size=4096), dict(disable_split_kv=True), dict(o_data_type="float32")]


def name_of(kw):
    return next(iter(kw))


@pytest.mark.parametrize("kw", DECODE_PLAN_UNSUPPORTED, ids=name_of)
def test_decode_plan_unsupported(kw, no_torch_past_checks):
    with pytest.raises(NotImplementedError, match=name_of(kw)):
        Decode(workspace()).plan(INDPTR, FakeTensor(), LAST, 32, 8, 128, 16, **kw)


def test_decode_plan_accepts_the_off_values(no_torch_past_checks):
    with pytest.raises(Reached):
        Decode(workspace()).plan(INDPTR, FakeTensor(), LAST, 32, 8, 128, 16, q_data_type="bfloat16",
                                 o_data_type="bfloat16", block_tables=None, seq_lens=None, fixed_split_size=-1,
                                 disable_split_kv=False, window_right=0)
    with pytest.raises(Reached):  # implemented
        Decode(workspace()).plan(INDPTR, FakeTensor(), LAST, 32, 8, 128, 16, q_data_type="bfloat16",
                                 fixed_split_size=2048, disable_split_kv=True)


@pytest.mark.parametrize("kw", PREFILL_PLAN_UNSUPPORTED + [dict(block_tables=FakeTensor((1, 4)))], ids=name_of)
def test_paged_prefill_plan_unsupported(kw, no_torch_past_checks):
    with pytest.raises(NotImplementedError, match=name_of(kw)):
        Paged(workspace()).plan(INDPTR, INDPTR, FakeTensor(), LAST, 32, 8, 128, 16, causal=True, **kw)


@pytest.mark.parametrize("kw", PREFILL_PLAN_UNSUPPORTED + [dict(v_indptr=FakeTensor()), dict(o_indptr=FakeTensor())],
                         ids=name_of)
def test_ragged_prefill_plan_unsupported(kw, no_torch_past_checks):
    with pytest.raises(NotImplementedError, match=name_of(kw)):
        Ragged(workspace()).plan(INDPTR, INDPTR, 32, 8, 128, causal=True, **kw)


def test_prefill_plans_accept_the_off_values(no_torch_past_checks):
    off = dict(prefix_len_ptr=None, token_pos_in_items_ptr=None, token_pos_in_items_len=0, max_item_len_ptr=None,
               fixed_split_size=-1, disable_split_kv=False, seq_lens=None, o_data_type="float16")
    with pytest.raises(Reached):
        Paged(workspace()).plan(INDPTR, INDPTR, FakeTensor(), LAST, 32, 8, 128, 16, causal=True, **off)
    with pytest.raises(Reached):
        Ragged(workspace()).plan(INDPTR, INDPTR, 32, 8, 128, causal=True, v_indptr=None, **off)


@pytest.mark.parametrize("cls,args,kw", [
    (Decode, (FakeTensor(), FakeTensor()), dict(kv_cache_sf=FakeTensor())),
    (Decode, (FakeTensor(), FakeTensor()), dict(skip_softmax_threshold_scale_factor=0.5)),
    (Paged, (FakeTensor(), FakeTensor()), dict(kv_cache_sf=FakeTensor())),
    (Paged, (FakeTensor(), FakeTensor()), dict(skip_softmax_threshold_scale_factor=0.5)),
    (Paged, (FakeTensor(), FakeTensor()), dict(use_fp16_softmax=True)),
    (Paged, (FakeTensor(), FakeTensor()), dict(uses_spcompress=True)),
    (Ragged, (FakeTensor(), FakeTensor(), FakeTensor()), dict(kv_cache_sf=FakeTensor())),
    (Ragged, (FakeTensor(), FakeTensor(), FakeTensor()), dict(o_scale=2.0)),
    (Ragged, (FakeTensor(), FakeTensor(), FakeTensor()), dict(k_scale=0.5)),
], ids=lambda x: x.__name__ if isinstance(x, type) else name_of(x) if isinstance(x, dict) else "")
def test_run_unsupported(cls, args, kw):
    w = cls(workspace())
    with pytest.raises(NotImplementedError, match=name_of(kw)):
        w.run(*args, **kw)
    with pytest.raises(RuntimeError, match=r"call plan\(\) before run\(\)"):  # the off values pass
        w.run(*args, **{name_of(kw): None})


@pytest.mark.parametrize("cls,tensors", [(Decode, 2), (Paged, 2), (Ragged, 3)])
def test_run_rejects_custom_kernel_positional_arguments(cls, tensors):
    # FlashInfer's ragged run(q, k, v, sinks, sm_scale) of a jit_args kernel, for instance.
    with pytest.raises(NotImplementedError, match=r"2 positional argument\(s\).*jit_args"):
        cls(workspace()).run(*[FakeTensor()] * tensors, FakeTensor(), 0.1)


@pytest.mark.parametrize("cls,kw", [(Decode, dict(jit_args=["uri"])), (Paged, dict(jit_args=["uri"])),
                                    (Paged, dict(jit_kwargs={"a": 1})), (Ragged, dict(jit_args=["uri"])),
                                    (Ragged, dict(jit_kwargs={"a": 1}))])
def test_constructors_reject_jit_kernels(cls, kw):
    with pytest.raises(NotImplementedError, match=f"{name_of(kw)}=.*attn.Variant"):
        cls(workspace(), "NHD", **kw)
    cls(workspace(), "NHD", backend="fa2", **{name_of(kw): None})  # backend is accepted


@pytest.mark.parametrize("entry", [attn.decode.trtllm_batch_decode_with_kv_cache,
                                   attn.decode.trtllm_batch_decode_with_kv_cache_mla,
                                   attn.prefill.trtllm_batch_context_with_kv_cache,
                                   attn.mla.trtllm_batch_decode_with_kv_cache_mla,
                                   attn.BatchMLAPagedAttentionWrapper, attn.BatchDecodeMlaWithPagedKVCacheWrapper,
                                   attn.utils.FP4Tensor, attn.page.nvfp4_quantize_append_paged_kv_cache,
                                   attn.nvfp4_quantize_append_paged_kv_cache_with_slot_mapping],
                         ids=lambda e: e.__name__)
def test_missing_entry_points_raise_naming_themselves(entry):
    with pytest.raises(NotImplementedError, match=f"attn: {entry.__name__} .*not implemented; .*\\w"):
        entry(FakeTensor(), kv_cache=FakeTensor(), workspace_buffer=workspace())


# -- the deprecated forward(): variant arguments must be plan()'s ----------------

def planned(w, head_dim=128, has_mask=False, sinks=None, **plan_kw):
    """Gives ``w`` the plan state a real plan() with ``plan_kw`` leaves for forward()/run()."""
    p = core.PlannedRun()
    p.spec = types.SimpleNamespace(head_dim=head_dim)
    p.keywords = paged.planned_keywords(head_dim, has_mask, plan_kw.pop("causal", False),
                                        plan_kw.pop("window_left", -1), plan_kw.pop("sm_scale", None), plan_kw)
    p.sinks, p.window_left, p.q_len_per_req = sinks, -1, 1
    w._planned = p
    ran = []
    w.run = lambda *a, **k: ran.append((a, k)) or "ran"
    return ran


def test_decode_forward_checks_against_the_plan():
    w = Decode(workspace())
    ran = planned(w, logits_soft_cap=30.0)
    # FlashInfer's defaults and explicit spellings of the same values pass.
    q, kv = FakeTensor(), FakeTensor()
    assert w.forward(q, kv, logits_soft_cap=30.0, sm_scale=1 / math.sqrt(128), k_scale=0.5) == "ran"
    assert ran[0][1] == {"q_scale": None, "k_scale": 0.5, "v_scale": None}
    w.forward_return_lse(FakeTensor(), FakeTensor(), "NONE", None, None, None, -1, 30.0)
    assert ran[1][1]["return_lse"] is True
    with pytest.raises(ValueError, match=r"forward\(logits_soft_cap=0.0\) differs from plan\(\)'s 30.0"):
        w.forward(FakeTensor(), FakeTensor())          # FlashInfer would run without the cap: attn says so
    with pytest.raises(ValueError, match="pass window_left= to plan"):
        w.forward(FakeTensor(), FakeTensor(), logits_soft_cap=30.0, window_left=64)
    with pytest.raises(ValueError, match="sm_scale"):
        w.forward_return_lse(FakeTensor(), FakeTensor(), logits_soft_cap=30.0, sm_scale=0.5)


def test_prefill_forward_checks_causal_and_rope():
    w = Ragged(workspace())
    planned(w, causal=False)
    # SGLang plans the ragged wrapper without causal, then calls forward(causal=True).
    with pytest.raises(ValueError, match=r"forward\(causal=True\) differs from plan\(\)'s False.*pass causal="):
        w.forward(FakeTensor(), FakeTensor(), FakeTensor(), causal=True)
    assert w.forward(FakeTensor(), FakeTensor(), FakeTensor(), use_fp16_qk_reduction=True) == "ran"
    w = Paged(workspace())
    planned(w, causal=True, pos_encoding_mode="ROPE_LLAMA", rope_theta=5e5)
    assert w.forward_return_lse(FakeTensor(), FakeTensor(), True, "ROPE_LLAMA", rope_theta=5e5) == "ran"
    with pytest.raises(ValueError, match="rope_theta"):
        w.forward(FakeTensor(), FakeTensor(), True, "ROPE_LLAMA")   # FlashInfer's default theta is 1e4
    with pytest.raises(ValueError, match="pos_encoding_mode"):
        w.forward(FakeTensor(), FakeTensor(), True)
    planned(w, has_mask=True, causal=False)   # a custom mask replaces causal, in FlashInfer too
    assert w.forward(FakeTensor(), FakeTensor(), causal=True) == "ran"


def test_run_sinks_must_be_the_plans():
    w, sinks = Decode(workspace()), FakeTensor((32,), "torch.float32")
    planned(w, sinks=sinks)
    del w.run   # the real run()
    with pytest.raises(ValueError, match=r"run\(sinks=...\) is not the tensor given to plan\(\)"):
        w.run(FakeTensor(), FakeTensor(), sinks=FakeTensor((32,), "torch.float32"))
    with pytest.raises(ValueError, match="window_left"):
        w.run(FakeTensor(), FakeTensor(), window_left=8)


def test_cascade_plan_passes_flashinfers_arguments_to_each_level():
    c = Cascade.__new__(Cascade)
    c._num_levels = 2
    calls = []
    c._wrappers = [types.SimpleNamespace(plan=lambda *a, **k: calls.append((a, k))) for _ in range(2)]
    c.plan([0, 1], [2, 3], [4, 5], [6, 7], 32, 8, 128, 16, True, "NONE", False, 0.1, -1, None, None, None,
           "bfloat16", "bfloat16", logits_scale=0.5)
    assert [a[:4] for a, _ in calls] == [(0, 2, 4, 6), (1, 3, 5, 7)]
    assert [k["causal"] for _, k in calls] == [False, True]   # only the last level is causal
    assert all(k["kv_data_type"] == "bfloat16" and k["sm_scale"] == 0.1 and k["logits_scale"] == 0.5
               for _, k in calls)
    with pytest.raises(TypeError):   # each level's softmax would count sinks again
        c.plan([0], [0], [0], [0], 32, 8, 128, 16, sinks=FakeTensor())
