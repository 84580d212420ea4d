"""GPU: @rope_llama31 (Llama-3.1 RoPE scaling) and @logits_scale in decode and prefill.

Against the float32 reference of gpu_reference.py, whose Llama-3.1 frequencies
follow BuiltinVariants.mlir / FlashInfer (rope_inv_freq; checked without a GPU
in test_variant_params.py): theta 5e5, factor 8, low/high frequency factors
1 / 4, original context 8192, q rotated at p = kv_len - qo_len + i and k at j.
Each test also checks that the variant changes the answer, so a kernel that
ignored it would fail.

Skipped without torch, CUDA or a GPU. On a runtime-only build the kernels
come from ATTN_CACHE_DIR (python -m attn.precompile --heads 32/8 --head-dim 128
--kinds decode,prefill,ragged with --pos-encoding-mode ROPE_LLAMA31, and with
--logits-scale 0.5).
"""

import pytest

import attn
from gpu_reference import LLAMA31, attention, indptr_of, paged_batch, rel_err, rope_inv_freq

pytestmark = pytest.mark.gpu

HQ, HKV, D = 32, 8, 128
THETA31 = 5e5

# (wrapper keywords, reference keywords, reference keywords without the variant)
CASES = {
    "rope_llama31": (dict(pos_encoding_mode="ROPE_LLAMA31"),
                     dict(rope=(rope_inv_freq(D, THETA31, LLAMA31), 1.0)),
                     dict(rope=(rope_inv_freq(D, THETA31), 1.0))),  # unscaled RoPE at the same theta
    "rope_llama31_scaled_pos": (dict(pos_encoding_mode="ROPE_LLAMA31", rope_scale=2.0, rope_theta=1e5),
                                dict(rope=(rope_inv_freq(D, 1e5, LLAMA31), 2.0)),
                                dict(rope=(rope_inv_freq(D, 1e5, LLAMA31), 1.0))),
    "logits_scale": (dict(logits_scale=0.5), dict(logits_scale=0.5), dict()),
}


# Sharper softmax: the variants' effect on the logits shows in the output.
Q_SCALE = 2.0


def check_variant(torch, o, lse, q, k, v, qo_lens, kv_lens, causal, ref_kw, without):
    """attn's output and LSE match the reference with the variant, and the
    reference without it differs clearly (the case tests the variant)."""
    ro, rl = attention(q, k, v, qo_lens, kv_lens, causal=causal, **ref_kw)
    err = rel_err(o, ro)
    assert err < 2e-2, f"relative error {err:.2e}"
    torch.testing.assert_close(lse, rl, atol=5e-2, rtol=1e-2)
    other, _ = attention(q, k, v, qo_lens, kv_lens, causal=causal, **without)
    assert rel_err(other, ro) > 5 * max(err, 1e-2), "the variant does not change this test's answer"


@pytest.mark.parametrize("case", list(CASES))
def test_decode(case):
    import torch
    kw, ref_kw, without = CASES[case]
    gen = torch.Generator().manual_seed(41)
    kv_lens = [3000, 17, 1, 1200, 2500, 640, 4000]
    kv, kv_indptr, kv_indices, last, k_tok, v_tok = paged_batch(torch, kv_lens, 16, HKV, D, torch.bfloat16, gen)
    q = (Q_SCALE * torch.randn(len(kv_lens), HQ, D, generator=gen)).to(torch.bfloat16).cuda()
    w = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"), "NHD")
    w.plan(kv_indptr, kv_indices.cuda(), last, HQ, HKV, D, 16, q_data_type=torch.bfloat16, **kw)
    out = torch.full_like(q, float("nan"))
    o, lse = w.run(q, kv.cuda(), out=out, return_lse=True)
    k_tok, v_tok = k_tok.cuda(), v_tok.cuda()
    check_variant(torch, o, lse, q, k_tok, v_tok, [1] * len(kv_lens), kv_lens, False, ref_kw, without)


@pytest.mark.parametrize("case", list(CASES))
def test_ragged_prefill(case):
    import torch
    kw, ref_kw, without = CASES[case]
    gen = torch.Generator().manual_seed(42)
    lens = [300, 1, 1500, 64, 777]
    total = sum(lens)
    q = (Q_SCALE * torch.randn(total, HQ, D, generator=gen)).to(torch.bfloat16).cuda()
    k = torch.randn(total, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    v = torch.randn(total, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    indptr = indptr_of(torch, lens)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    w.plan(indptr, indptr, HQ, HKV, D, causal=True, q_data_type=torch.bfloat16, **kw)
    out = torch.full_like(q, float("nan"))
    o, lse = w.run(q, k, v, out=out, return_lse=True)
    check_variant(torch, o, lse, q, k, v, lens, lens, True, ref_kw, without)


@pytest.mark.parametrize("case", list(CASES))
def test_paged_prefill(case):
    """Appends over a paged cache: q positions start at kv_len - qo_len."""
    import torch
    kw, ref_kw, without = CASES[case]
    gen = torch.Generator().manual_seed(43)
    qo_lens, kv_lens = [5, 64, 1, 200, 128], [40, 64, 900, 333, 3000]
    kv, kv_indptr, kv_indices, last, k_tok, v_tok = paged_batch(torch, kv_lens, 16, HKV, D, torch.bfloat16, gen)
    q = (Q_SCALE * torch.randn(sum(qo_lens), HQ, D, generator=gen)).to(torch.bfloat16).cuda()
    w = attn.BatchPrefillWithPagedKVCacheWrapper(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"), "NHD")
    w.plan(indptr_of(torch, qo_lens), kv_indptr, kv_indices.cuda(), last, HQ, HKV, D, 16, causal=True,
           q_data_type=torch.bfloat16, **kw)
    out = torch.full_like(q, float("nan"))
    o, lse = w.run(q, kv.cuda(), out=out, return_lse=True)
    k_tok, v_tok = k_tok.cuda(), v_tok.cuda()
    check_variant(torch, o, lse, q, k_tok, v_tok, qo_lens, kv_lens, True, ref_kw, without)
