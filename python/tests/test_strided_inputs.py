"""Strided q, KV cache views, SGLang's 3-D page-size-1 buffers and ragged HND (issue #13).

Paged kernels take a page stride, ragged ones a token and a head stride. CPU checks (no GPU;
the first group needs no torch: a stand-in with ``stride()``) cover what is
accepted and what raises with which message; the GPU tests (marked ``gpu``)
compare the strided / HND / 3-D results with the contiguous NHD path.
"""

import math

import pytest

import attn
from attn import core, prefill
from attn.paged import make_spec

H, D = 8, 128


class Strided:
    """Enough of torch.Tensor for split_paged_kv_cache: shape, strides, dtype, device."""

    def __init__(self, shape, strides=None, dtype="torch.bfloat16", device="cuda:0"):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device
        self._strides = tuple(strides) if strides is not None else core.row_major(shape)

    def stride(self):
        return self._strides

    def is_contiguous(self):
        return core.dense_after(self.shape, self._strides, 0)


def split(cache, page=16, layout="NHD"):
    return core.split_paged_kv_cache(cache, layout, page, H, D, "bf16", "cuda:0")


# -- paged KV cache views (no torch) -------------------------------------------

def test_contiguous_forms_are_unchanged():
    P = 16 * H * D
    _, _, stride, v_offset = split(Strided((10, 2, 16, H, D)))
    assert stride == 2 * P and v_offset == P               # combined: V right after K, pages 2P apart
    _, _, stride, v_offset = split((Strided((10, 16, H, D)), Strided((10, 16, H, D))))
    assert stride == P and v_offset is None                # a contiguous tuple


def test_halves_of_a_combined_cache_are_read_in_place():
    P = 16 * H * D
    combined = core.row_major((10, 2, 16, H, D))
    half = Strided((10, 16, H, D), (combined[0],) + combined[2:])   # kv[:, 0] and kv[:, 1]
    _, _, stride, v_offset = split((half, half))
    assert stride == 2 * P and v_offset is None and half.stride()[0] == 2 * P


def test_a_permuted_two_by_pages_cache_is_read_in_place():
    # [2, pages, page, H, D] permuted to [pages, 2, ...]: pages P apart, V pages * P after K.
    P = 16 * H * D
    s = core.row_major((2, 10, 16, H, D))
    _, _, stride, v_offset = split(Strided((10, 2, 16, H, D), (s[1], s[0]) + s[2:]))
    assert stride == P and v_offset == 10 * P


def test_any_page_stride_is_read_in_place():
    P = 16 * H * D
    layers = core.row_major((10, 3, 2, 16, H, D))           # one layer of [pages, layers, 2, ...]
    _, _, stride, v_offset = split(Strided((10, 2, 16, H, D), (layers[0],) + layers[2:]))
    assert stride == 6 * P and v_offset == P
    half = Strided((10, 16, H, D), (layers[0],) + layers[3:])
    _, _, stride, v_offset = split((half, half))
    assert stride == 6 * P and v_offset is None
    _, _, stride, _ = split((Strided((1, 16, H, D), (7,) + layers[3:]),) * 2)   # one page: any stride
    assert stride == P


def test_k_and_v_with_different_page_strides_raise():
    P = 16 * H * D
    combined = core.row_major((10, 2, 16, H, D))
    with pytest.raises(ValueError, match=f"k_cache and v_cache must have identical strides: k_cache pages are {2 * P} elements "
                       f"apart but v_cache pages {P}"):
        split((Strided((10, 16, H, D), (combined[0],) + combined[2:]), Strided((10, 16, H, D))))


def test_a_page_that_is_not_dense_raises_naming_the_strides():
    # An HND-ordered page viewed as NHD: the last dims are not row-major.
    s = core.row_major((10, H, 16, D))
    bad = Strided((10, 16, H, D), (s[0], s[2], s[1], s[3]))
    with pytest.raises(ValueError, match=r"k_cache: strides \[16384, 128, 2048, 1\].*dense \[page_size, num_kv_heads, "
                                         r"head_dim\] block"):
        split((bad, Strided((10, 16, H, D))))


def test_a_stand_in_without_strides_must_be_contiguous():
    class NoStrides:
        shape, dtype, device = (10, 16, H, D), "torch.bfloat16", "cuda:0"

        def is_contiguous(self):
            return False
    with pytest.raises(ValueError, match="k_cache: expected a contiguous tensor"):
        split((NoStrides(), NoStrides()))


def test_an_out_that_is_not_16_byte_aligned_raises_naming_it():
    # The kernels write each output row in 16-byte chunks.
    class At(Strided):
        def __init__(self, shape, address, **kw):
            super().__init__(shape, **kw)
            self.address = address

        def data_ptr(self):
            return self.address
    wrapper = type("W", (), {"_device": "cuda:0"})()
    q, lse = At((4, H, D), 0x1000), At((4, H), 0x2000, dtype="torch.float32")
    out, _ = core.WrapperBase._outputs(wrapper, None, q, At((4, H, D), 0x3000), lse, True)
    assert out.address == 0x3000
    with pytest.raises(ValueError, match="out: expected a 16-byte aligned tensor, got address 0x3008"):
        core.WrapperBase._outputs(wrapper, None, q, At((4, H, D), 0x3008), lse, True)


def test_sglang_three_d_buffers_are_page_size_one():
    k = Strided((100, H, D))
    for layout in ("NHD", "HND"):
        got_k, got_v, stride, v_offset = split((k, k), page=1, layout=layout)
        assert got_k is k and stride == H * D and v_offset is None
    _, _, stride, v_offset = split(Strided((100, 2, H, D)), page=1)    # [num_tokens, 2, H, D]
    assert stride == 2 * H * D and v_offset == H * D
    with pytest.raises(ValueError, match=r"k_cache: a 3-D cache \[100, 8, 128\] is \[num_tokens, num_kv_heads, "
                                         r"head_dim\], a page-size-1 cache, but plan\(\) was given page_size=16"):
        split((k, k), page=16)
    with pytest.raises(ValueError, match=r"v_cache: expected shape \[num_tokens, num_kv_heads=8, head_dim=128\]"):
        split((k, Strided((100, 4, D))), page=1)
    with pytest.raises(ValueError, match=r"paged_kv_cache: expected shape \[num_pages, 2=2, page_size=16"):
        split(Strided((100, 2, H, D)), page=16)


def test_ragged_specs_are_nhd_whatever_the_layout():
    # The kernels read ragged K/V as [tokens, heads, dim]; an HND ragged wrapper hands them that view.
    kw = dict(num_qo_heads=32, num_kv_heads=8, head_dim=128, page_size=1, dtype="bf16", query_rows=None,
              indexing="ragged")
    assert make_spec(kv_layout="HND", **kw)[0] == make_spec(kv_layout="NHD", **kw)[0]
    paged = dict(kw, indexing="paged", page_size=16)
    assert make_spec(kv_layout="HND", **paged)[0].layout == "HND"


# -- q and ragged K/V (CPU torch) -------------------------------------------------

class FakeWrapper:
    def __init__(self, graph=False, layout="NHD"):
        self._use_cuda_graph, self._kv_layout = graph, layout


@pytest.fixture
def torch_cpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    return torch


def test_dense_q_copies_only_a_strided_q(torch_cpu):
    torch = torch_cpu
    qkv = torch.randn(5, (32 + 2 * H) * D)
    q = qkv[:, :32 * D].view(-1, 32, D)
    assert not q.is_contiguous()
    dense = core.dense_q(FakeWrapper(), q)
    assert dense.is_contiguous() and torch.equal(dense, q)
    c = q.contiguous()
    assert core.dense_q(FakeWrapper(), c) is c


def test_graph_mode_stages_q_in_one_buffer(torch_cpu, monkeypatch):
    torch = torch_cpu
    w = FakeWrapper(graph=True)
    qkv = torch.randn(8, (32 + 2 * H) * D)
    q = qkv[:, :32 * D].view(-1, 32, D)
    first = core.dense_q(w, q, max_rows=8)                   # the warm-up run allocates the buffer
    assert torch.equal(first, q) and w._q_buf.shape == (8, 32, D)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    again = core.dense_q(w, qkv[:3, :32 * D].view(-1, 32, D), max_rows=8)   # captured: no allocation
    assert again.data_ptr() == first.data_ptr() and torch.equal(again, q[:3])
    with pytest.raises(RuntimeError, match="strided .* q, and this CUDA-graph wrapper has no staging buffer"):
        core.dense_q(FakeWrapper(graph=True), q, max_rows=8)


def test_ragged_kv_strides(torch_cpu):
    torch = torch_cpu
    strides = prefill.ragged_kv_strides
    nhd = torch.randn(20, H, D)
    assert strides(nhd, nhd.clone(), "NHD") == (H * D, D)
    # A fused QKV projection's K and V slices: read in place at its row stride.
    qkv = torch.randn(20, (32 + 2 * H) * D).view(20, 32 + 2 * H, D)
    k, v = qkv[:, 32:32 + H], qkv[:, 32 + H:]
    assert not k.is_contiguous() and strides(k, v, "NHD") == ((32 + 2 * H) * D, D)
    # HND: a dense [H, nnz, D] tensor and an HND view of NHD memory.
    hnd = torch.randn(H, 20, D)
    assert strides(hnd, hnd.clone(), "HND") == (D, 20 * D)
    assert strides(nhd.transpose(0, 1), nhd.transpose(0, 1), "HND") == (H * D, D)
    # A size-1 dimension's stride is free; the other tensor's decides.
    one = torch.randn(1, H, D)
    assert strides(one, one, "NHD") == (H * D, D)
    assert strides(qkv[:1, 32:32 + H], qkv[:1, 32 + H:], "NHD") == (H * D, D)
    # Refused, naming the strides: K and V apart, head_dim not dense, unaligned strides or address.
    with pytest.raises(ValueError, match=r"k \(strides \[1024, 128, 1\]\) and v \(strides \[6144, 128, 1\]\)"):
        strides(nhd, qkv[:, 32:32 + H], "NHD")
    with pytest.raises(ValueError, match=r"k: strides \[1, 20, 160\].*head_dim elements dense"):
        strides(torch.randn(D, H, 20).permute(2, 1, 0), nhd, "NHD")
    odd = torch.randn(20 * (H * D + 4), dtype=torch.bfloat16).as_strided((20, H, D), (H * D + 4, D, 1))
    with pytest.raises(ValueError, match=r"k: strides \[1028, 128, 1\].*multiples of 8 elements"):
        strides(odd, odd, "NHD")
    shifted = torch.randn(20 * H * D + 1)[1:].view(20, H, D)
    with pytest.raises(ValueError, match=r"16-byte aligned"):
        strides(shifted, shifted, "NHD")


def test_strided_kernels_are_the_planned_tile_of_the_strided_build(monkeypatch):
    """run() of strided K/V: the plan's candidate in the strided build, its tiles checked once per KernelInfo."""
    import dataclasses
    import types
    from attn.variants import AttentionSpec
    dense = AttentionSpec(128, 32, 8, indexing="ragged")
    looked_up = []

    def info(spec, device, candidates=((128, 128),)):
        return types.SimpleNamespace(candidates=candidates, attention=[f"att{spec.strided_kv}"],
                                     merge=[f"merge{spec.strided_kv}"], module=lambda c: f"mod{spec.strided_kv}{c}")
    strided = dataclasses.replace(dense, strided_kv=True)
    infos = {dense: info(dense, None), strided: info(strided, None)}
    monkeypatch.setattr(core, "kernel_info", lambda spec, device: looked_up.append(spec.strided_kv) or infos[spec])
    monkeypatch.setattr(prefill, "_strided", {})
    p = types.SimpleNamespace(spec=dense, summary={"candidate": 0})
    assert prefill._strided_kernels(p, "cuda:0") == ("modTrue0", "attTrue", "mergeTrue")
    assert prefill._strided_kernels(p, "cuda:0") == ("modTrue0", "attTrue", "mergeTrue")
    assert looked_up == [True, False, True]          # the dense tiles are compared once
    infos[strided] = info(strided, None, candidates=((64, 64),))
    with pytest.raises(RuntimeError, match="other tile candidates than the planned ones"):
        prefill._strided_kernels(p, "cuda:0")


# -- GPU: the same numbers as the contiguous NHD path -----------------------------

def _ws(torch):
    return torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def _page_table(torch, gen, batch, page, pool, max_len=700):
    lens = torch.randint(1, max_len, (batch,), generator=gen)
    npages = (lens + page - 1) // page
    indptr = torch.zeros(batch + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(npages, 0)
    indices = torch.randperm(pool, generator=gen)[:int(indptr[-1])].int()
    last = (lens - (npages - 1) * page).int()
    return indptr, indices, last, lens


def _close(a, b):
    import torch
    torch.testing.assert_close(a.float(), b.float(), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_gpu_decode_strided_q_and_kv_views(layout):
    import torch
    gen = torch.Generator().manual_seed(11)
    batch, page, hq, hkv, d, dtype = 9, 16, 32, 8, 128, torch.bfloat16
    pool = 9 * 48 + 5
    indptr, indices, last, _ = _page_table(torch, gen, batch, page, pool)
    shape = (pool, 2, page, hkv, d) if layout == "NHD" else (pool, 2, hkv, page, d)
    kv = torch.randn(*shape, generator=gen).to(dtype).cuda()
    qkv = torch.randn(batch, (hq + 2 * hkv) * d, generator=gen).to(dtype).cuda()
    q = qkv[:, :hq * d].view(-1, hq, d)
    assert not q.is_contiguous()
    w = attn.BatchDecodeWithPagedKVCacheWrapper(_ws(torch), layout)
    w.plan(indptr, indices.cuda(), last, hq, hkv, d, page, q_data_type=dtype)
    ref, ref_lse = w.run(q.contiguous(), kv, return_lse=True)
    o, lse = w.run(q, kv, return_lse=True)
    _close(o, ref)
    _close(lse, ref_lse)
    _close(w.run(q, (kv[:, 0], kv[:, 1])), ref)                 # the halves of the combined cache
    two = torch.stack([kv[:, 0], kv[:, 1]]).transpose(0, 1)      # [2, pages, ...] viewed as [pages, 2, ...]
    assert not two.is_contiguous()
    _close(w.run(q, two), ref)
    _close(w.run(q, (two[:, 0], two[:, 1])), ref)
    layers = torch.stack([kv, kv], 1)[:, 1]                       # one layer of [pages, layers, 2, ...]
    assert layers.stride(0) == 2 * kv.stride(0)
    _close(w.run(q, layers), ref)                                  # read in place at its page stride
    _close(w.run(q, (layers[:, 0], layers[:, 1])), ref)


@pytest.mark.gpu
def test_gpu_decode_graph_mode_strided_q():
    import torch
    gen = torch.Generator().manual_seed(12)
    max_batch, page, hq, hkv, d, dtype = 16, 16, 32, 8, 128, torch.bfloat16
    pool = 16 * 48 + 3
    kv = torch.randn(pool, 2, page, hkv, d, generator=gen).to(dtype).cuda()
    bufs = dict(paged_kv_indptr_buffer=torch.zeros(max_batch + 1, dtype=torch.int32, device="cuda"),
                paged_kv_indices_buffer=torch.zeros(pool, dtype=torch.int32, device="cuda"),
                paged_kv_last_page_len_buffer=torch.zeros(max_batch, dtype=torch.int32, device="cuda"))
    w = attn.BatchDecodeWithPagedKVCacheWrapper(_ws(torch), "NHD", use_cuda_graph=True, **bufs)
    plain = attn.BatchDecodeWithPagedKVCacheWrapper(_ws(torch), "NHD")
    qkv = torch.zeros(max_batch, (hq + 2 * hkv) * d, dtype=dtype, device="cuda")
    q = qkv[:, :hq * d].view(-1, hq, d)
    out = torch.zeros(max_batch, hq, d, dtype=dtype, device="cuda")
    table = _page_table(torch, gen, max_batch, page, pool)[:3]
    w.plan(table[0], table[1].cuda(), table[2], hq, hkv, d, page, q_data_type=dtype)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        w.run(q, kv, out=out)                                     # warm-up: allocates the q staging buffer
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            w.run(q, kv, out=out)
    torch.cuda.synchronize()
    for batch in (max_batch, 5):
        indptr, indices, last, _ = _page_table(torch, gen, batch, page, pool)
        w.plan(indptr, indices.cuda(), last, hq, hkv, d, page, q_data_type=dtype)
        qkv.copy_(torch.randn(max_batch, (hq + 2 * hkv) * d, generator=gen).to(dtype))
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        plain.plan(indptr, indices.cuda(), last, hq, hkv, d, page, q_data_type=dtype)
        _close(out[:batch], plain.run(q[:batch].contiguous(), kv))


@pytest.mark.gpu
@pytest.mark.parametrize("wrapper", ["decode", "prefill"])
def test_gpu_sglang_three_d_page_size_one(wrapper):
    import torch
    gen = torch.Generator().manual_seed(13)
    batch, hq, hkv, d, dtype, tokens = 6, 32, 8, 128, torch.bfloat16, 4096
    k_buf = torch.randn(tokens, hkv, d, generator=gen).to(dtype).cuda()
    v_buf = torch.randn(tokens, hkv, d, generator=gen).to(dtype).cuda()
    indptr, indices, last, lens = _page_table(torch, gen, batch, 1, tokens)
    qo_len = 1 if wrapper == "decode" else 3
    qo_indptr = torch.arange(batch + 1, dtype=torch.int32) * qo_len
    qkv = torch.randn(batch * qo_len, (hq + 2 * hkv) * d, generator=gen).to(dtype).cuda()
    q = qkv[:, :hq * d].view(-1, hq, d)
    if wrapper == "decode":
        w = attn.BatchDecodeWithPagedKVCacheWrapper(_ws(torch), "NHD")
        w.plan(indptr, indices.cuda(), last, hq, hkv, d, 1, q_data_type=dtype)
    else:
        lens = torch.maximum(lens, torch.tensor(qo_len))
        w = attn.BatchPrefillWithPagedKVCacheWrapper(_ws(torch), "NHD")
        indptr = torch.zeros(batch + 1, dtype=torch.int32)
        indptr[1:] = torch.cumsum(lens, 0)
        indices = torch.randperm(tokens, generator=gen)[:int(indptr[-1])].int()
        last = torch.ones(batch, dtype=torch.int32)
        w.plan(qo_indptr, indptr, indices.cuda(), last, hq, hkv, d, 1, causal=True, q_data_type=dtype)
    ref = w.run(q.contiguous(), (k_buf.unsqueeze(1), v_buf.unsqueeze(1)))   # [tokens, 1, H, D] pages
    _close(w.run(q, (k_buf, v_buf)), ref)
    _close(w.run(q, torch.stack([k_buf, v_buf], 1)), ref)                   # [tokens, 2, H, D]


@pytest.mark.gpu
def test_gpu_three_d_buffers_need_page_size_one():
    import torch
    w = attn.BatchDecodeWithPagedKVCacheWrapper(_ws(torch), "NHD")
    w.plan(torch.tensor([0, 1], dtype=torch.int32), torch.tensor([0], dtype=torch.int32, device="cuda"),
           torch.tensor([3], dtype=torch.int32), 32, 8, 128, 16, q_data_type=torch.bfloat16)
    buf = torch.zeros(64, 8, 128, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(ValueError, match="page-size-1 cache, but plan\\(\\) was given page_size=16"):
        w.run(torch.zeros(1, 32, 128, dtype=torch.bfloat16, device="cuda"), (buf, buf))


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_ragged_hnd_and_strided_q(causal):
    import torch
    gen = torch.Generator().manual_seed(14)
    hq, hkv, d, dtype = 32, 8, 128, torch.bfloat16
    qo_lens, kv_lens = [5, 130, 1, 64], [40, 300, 17, 64]
    qo_indptr = torch.tensor([0] + list(torch.tensor(qo_lens).cumsum(0)), dtype=torch.int32)
    kv_indptr = torch.tensor([0] + list(torch.tensor(kv_lens).cumsum(0)), dtype=torch.int32)
    nq, nkv = int(qo_indptr[-1]), int(kv_indptr[-1])
    qkv = torch.randn(nq, (hq + 2 * hkv) * d, generator=gen).to(dtype).cuda()
    q = qkv[:, :hq * d].view(-1, hq, d)
    k = torch.randn(nkv, hkv, d, generator=gen).to(dtype).cuda()
    v = torch.randn(nkv, hkv, d, generator=gen).to(dtype).cuda()
    ref_w = attn.BatchPrefillWithRaggedKVCacheWrapper(_ws(torch), "NHD")
    ref_w.plan(qo_indptr, kv_indptr, hq, hkv, d, causal=causal, q_data_type=dtype)
    ref, ref_lse = ref_w.run(q.contiguous(), k, v, return_lse=True)
    o, lse = ref_w.run(q, k, v, return_lse=True)                           # strided q
    _close(o, ref)
    _close(lse, ref_lse)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(_ws(torch), "HND")
    w.plan(qo_indptr, kv_indptr, hq, hkv, d, causal=causal, q_data_type=dtype)
    k_hnd, v_hnd = k.transpose(0, 1).contiguous(), v.transpose(0, 1).contiguous()
    _close(w.run(q, k_hnd, v_hnd), ref)                                      # dense HND, read in place
    _close(w.run(q, k.transpose(0, 1), v.transpose(0, 1)), ref)              # an HND view of NHD memory
    # K and V as slices of a fused QKV projection (FlashInfer's non-contiguous tests): read in place.
    fused = torch.empty(nkv, hq + 2 * hkv, d, dtype=dtype, device="cuda")
    fused[:, hq:hq + hkv], fused[:, hq + hkv:] = k, v
    fk, fv = fused[:, hq:hq + hkv], fused[:, hq + hkv:]
    assert not fk.is_contiguous()
    o, lse = ref_w.run(q, fk, fv, return_lse=True)
    _close(o, ref)
    _close(lse, ref_lse)
    # And against a float32 reference: the strided path is right, not only equal to the dense one.
    for b in range(len(qo_lens)):
        qs, ks = slice(int(qo_indptr[b]), int(qo_indptr[b + 1])), slice(int(kv_indptr[b]), int(kv_indptr[b + 1]))
        qb = q[qs].float().transpose(0, 1)
        kb = k[ks].float().repeat_interleave(hq // hkv, 1).transpose(0, 1)
        vb = v[ks].float().repeat_interleave(hq // hkv, 1).transpose(0, 1)
        s = qb @ kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            rows = torch.arange(qo_lens[b], device="cuda")[:, None] + kv_lens[b] - qo_lens[b]
            s = s.masked_fill(torch.arange(kv_lens[b], device="cuda")[None, :] > rows, float("-inf"))
        want = torch.nan_to_num(torch.softmax(s, -1)) @ vb
        _close(o[qs], want.transpose(0, 1))
    g = attn.BatchPrefillWithRaggedKVCacheWrapper(_ws(torch), "HND")       # HND slices of a fused buffer
    g.plan(qo_indptr, kv_indptr, hq, hkv, d, causal=causal, q_data_type=dtype)
    fused_hnd = torch.cat([k_hnd, v_hnd], 0)
    _close(g.run(q, fused_hnd[:hkv], fused_hnd[hkv:]), ref)


@pytest.mark.gpu
def test_gpu_single_functions_hnd_and_strided():
    import torch
    gen = torch.Generator().manual_seed(15)
    hq, hkv, d, dtype, qo_len, kv_len = 32, 8, 128, torch.bfloat16, 37, 211
    qkv = torch.randn(qo_len, (hq + 2 * hkv) * d, generator=gen).to(dtype).cuda()
    q = qkv[:, :hq * d].view(-1, hq, d)
    k = torch.randn(kv_len, hkv, d, generator=gen).to(dtype).cuda()
    v = torch.randn(kv_len, hkv, d, generator=gen).to(dtype).cuda()
    for causal in (False, True):
        ref = attn.single_prefill_with_kv_cache(q.contiguous(), k, v, causal=causal)
        _close(attn.single_prefill_with_kv_cache(q, k, v, causal=causal), ref)
        k_hnd, v_hnd = k.transpose(0, 1).contiguous(), v.transpose(0, 1).contiguous()
        _close(attn.single_prefill_with_kv_cache(q, k_hnd, v_hnd, causal=causal, kv_layout="HND"), ref)
        kv_fused = torch.cat([k, v], 1)                                  # [kv_len, 2 * hkv, d]
        _close(attn.single_prefill_with_kv_cache(q, kv_fused[:, :hkv], kv_fused[:, hkv:], causal=causal), ref)
    # Single decode: a strided q row, strided (fused) K/V and HND.
    qd = qkv[0, :hq * d].view(hq, d)
    kvd = torch.randn(kv_len, 2 * hkv, d, generator=gen).to(dtype).cuda()
    kd, vd = kvd[:, :hkv], kvd[:, hkv:]
    ref = attn.single_decode_with_kv_cache(qd.contiguous(), kd.contiguous(), vd.contiguous())
    _close(attn.single_decode_with_kv_cache(qd, kd, vd), ref)
    _close(attn.single_decode_with_kv_cache(qd, kd.transpose(0, 1).contiguous(), vd.transpose(0, 1).contiguous(),
                                            kv_layout="HND"), ref)
    # And against a float32 reference, so both paths are checked, not only their agreement.
    kf, vf = kd.float().repeat_interleave(hq // hkv, 1), vd.float().repeat_interleave(hq // hkv, 1)
    s = torch.einsum("hd,nhd->hn", qd.float(), kf) / math.sqrt(d)
    _close(ref, torch.einsum("hn,nhd->hd", torch.softmax(s, -1), vf))
