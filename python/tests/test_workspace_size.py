"""attn.get_workspace_size against what plan() requires.

On the CPU the wrappers' plan() runs up to the planner with a stand-in for
torch (plan()'s workspace check comes before anything touches the device):
a workspace of exactly get_workspace_size() bytes passes it, one byte less
is refused with a message naming the size and the function. The launch
contracts are compiled for sm_90a (needs the compiler). On the GPU the
same, end to end, and the single-request functions' own scratch."""

import types

import pytest

import attn
from attn import _native, core, decode, paged, prefill

HQ, HKV, D, PAGE, SMS = 32, 8, 128, 16, 132


class FakeTensor:
    """Enough of a tensor for plan() up to the planner."""

    def __init__(self, n, dtype="torch.uint8", device="cuda:0"):
        self.shape, self.dtype, self.device = (int(n),), dtype, device

    def numel(self):
        return self.shape[0]

    def element_size(self):
        return 4 if self.dtype == "torch.int32" else 1

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return 0

    def __mul__(self, k):
        return self

    def __getitem__(self, s):
        return self


class Planned(Exception):
    """Raised by the stand-in planner: plan() got past its workspace check."""


@pytest.fixture
def cpu_plan(monkeypatch, tmp_path, native):
    fake = types.SimpleNamespace(
        int32="torch.int32", uint8="torch.uint8",
        cuda=types.SimpleNamespace(is_current_stream_capturing=lambda: False,
                                   current_stream=lambda device=None: types.SimpleNamespace(cuda_stream=0)),
        arange=lambda n, dtype=None, device=None: FakeTensor(n, dtype, device),
        empty=lambda n, dtype=None, device=None, pin_memory=False: FakeTensor(n, dtype, device or "cpu"))
    for m in (core, decode, paged, prefill):
        monkeypatch.setattr(m, "torch_module", lambda: fake)
    monkeypatch.setattr(core, "num_sms", lambda device: SMS)
    monkeypatch.setattr(core, "_kernel_infos", {})
    monkeypatch.setenv("ATTN_ARCH", "sm_90a")
    monkeypatch.setenv("ATTN_CACHE_DIR", str(tmp_path / "kernels"))

    def plan(config, *args, **kwargs):
        raise Planned(config)
    monkeypatch.setattr(native, "plan", plan)


def size(**kw):
    return attn.get_workspace_size(HQ, HKV, D, PAGE, arch="sm_90a", num_sms=SMS, **kw)


def exactly_enough(make, plan, need):
    """plan() plans in `need` bytes with the planner's own split-KV scratch,
    in fewer with the scratch capped to fit (max_partial_rows: fewer splits),
    and refuses a buffer the plan itself does not fit in, naming `need`."""
    with pytest.raises(Planned) as full:
        plan(make(FakeTensor(need)))
    assert "max_partial_rows" not in full.value.args[0]
    with pytest.raises(Planned) as capped:
        plan(make(FakeTensor(need - 1)))
    assert capped.value.args[0]["max_partial_rows"] > 0
    with pytest.raises(ValueError, match=rf"has 1024 bytes .*this plan needs {need} .*get_workspace_size"):
        plan(make(FakeTensor(1024)))


def decode_plan(batch, pages_each=3, **kw):
    def plan(w):
        w.plan(list(range(0, pages_each * batch + 1, pages_each)), FakeTensor(pages_each * batch, "torch.int32"),
               [5] * batch, HQ, HKV, D, PAGE, q_data_type="bfloat16", **kw)
    return plan


@pytest.mark.compiler
@pytest.mark.parametrize("batch", [1, 7, 256])
def test_decode_plan_needs_exactly_the_size(cpu_plan, batch):
    exactly_enough(attn.BatchDecodeWithPagedKVCacheWrapper, decode_plan(batch), size(kind="decode", max_batch=batch))


@pytest.mark.compiler
def test_decode_variants_and_several_tokens_per_request(cpu_plan):
    exactly_enough(attn.BatchDecodeWithPagedKVCacheWrapper, decode_plan(9, logits_soft_cap=30.0, window_left=64),
                   size(kind="decode", max_batch=9, logits_soft_cap=30.0, window_left=64))
    exactly_enough(attn.BatchDecodeWithPagedKVCacheWrapper, decode_plan(9, q_len_per_req=4),
                   size(kind="decode", max_batch=9, q_len_per_req=4))


@pytest.mark.compiler
def test_decode_in_cuda_graph_mode_needs_the_maxima(cpu_plan):
    """A captured wrapper's workspace is sized by its buffers' batch, whatever the plan's."""
    bufs = [FakeTensor(65, "torch.int32"), FakeTensor(64 * 3, "torch.int32"), FakeTensor(64, "torch.int32")]

    def make(ws):
        return attn.BatchDecodeWithPagedKVCacheWrapper(ws, use_cuda_graph=True, paged_kv_indptr_buffer=bufs[0],
                                                       paged_kv_indices_buffer=bufs[1],
                                                       paged_kv_last_page_len_buffer=bufs[2])
    need = size(kind="decode", max_batch=64, use_cuda_graph=True)
    exactly_enough(make, decode_plan(5), need)
    assert size(kind="decode", max_batch=5) < need


@pytest.mark.compiler
@pytest.mark.parametrize("qo_lens", [[1], [2048], [17, 300, 5], [127] * 128])
def test_paged_prefill_plan_needs_exactly_the_size(cpu_plan, qo_lens):
    qo = [0]
    for n in qo_lens:
        qo.append(qo[-1] + n)
    b = len(qo_lens)
    kv = [0]
    for n in qo_lens:
        kv.append(kv[-1] + -(-n // PAGE))

    def plan(w):
        w.plan(qo, kv, FakeTensor(kv[-1], "torch.int32"), [qo_lens[i] - (kv[i + 1] - kv[i] - 1) * PAGE
                                                         for i in range(b)],
               HQ, HKV, D, PAGE, causal=True, q_data_type="bfloat16")
    exactly_enough(attn.BatchPrefillWithPagedKVCacheWrapper, plan,
                   size(kind="prefill", max_batch=b, max_total_q_rows=qo[-1], causal=True))


@pytest.mark.compiler
@pytest.mark.parametrize("causal", [False, True])
def test_ragged_prefill_plan_needs_exactly_the_size(cpu_plan, causal):
    qo, kv = [0, 2048, 2100], [0, 4096, 5000]

    def plan(w):
        w.plan(qo, kv, HQ, HKV, D, causal=causal, q_data_type="bfloat16")
    exactly_enough(attn.BatchPrefillWithRaggedKVCacheWrapper, plan,
                   size(kind="ragged", max_batch=2, max_total_q_rows=2100, causal=causal))


@pytest.mark.compiler
def test_sizes_grow_with_the_batch_but_the_split_scratch_follows_the_grid(cpu_plan):
    sizes = [size(kind="prefill", max_batch=b, max_total_q_rows=128 * b) for b in (1, 8, 64)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
    # Issue #13: the partial outputs of split tiles are bounded by the grid
    # (2 x CTAs x tile rows), so 8x the query rows adds only the flat plan's
    # work list (about 100 bytes a row), not a 16-row slot per tile (16 KiB
    # a row: 1.09 GB at 65536 rows before).
    small, large = (size(kind="prefill", max_batch=128, max_total_q_rows=n, causal=True) for n in (16256, 131072))
    assert large - small < 16 << 20
    assert large < 256 << 20


MIB256 = 256 << 20

# FlashInfer's tests allocate a 256 MiB float workspace; their shapes
# (tests/attention/test_batch_{decode,prefill}_kernels.py and friends:
# batches of 12-256, query lengths up to 577, 4-32 heads, head_dim 64-256,
# pages of 1-16, causal or not, windows, CUDA graphs) must fit it.
FLASHINFER_LIKE = [
    dict(kind="decode", max_batch=256),
    dict(kind="decode", max_batch=1024),
    dict(kind="decode", max_batch=256, use_cuda_graph=True),
    dict(kind="decode", max_batch=128, q_len_per_req=4),
    # A fixed split keeps its own bound (every tile's exact chunks): 256
    # requests of 4096 keys. (256 x 16384 keys with 32 KV heads of 64 needs
    # 295 MiB: a 16-row slot per chunk of a one-row decode tile.)
    dict(kind="decode", max_batch=256, fixed_split_size=2048, max_kv_tokens=256 * 4096),
    dict(kind="prefill", max_batch=128, max_total_q_rows=128 * 127, causal=True),
    dict(kind="prefill", max_batch=128, max_total_q_rows=128 * 127),
    dict(kind="prefill", max_batch=128, max_total_q_rows=128 * 127, causal=True, use_cuda_graph=True),
    dict(kind="prefill", max_batch=128, max_total_q_rows=128 * 577, causal=True),
    dict(kind="prefill", max_batch=128, max_total_q_rows=128 * 127, window_left=64),
    dict(kind="prefill", max_batch=17, max_total_q_rows=17 * 577, custom_mask=True),
    dict(kind="ragged", max_batch=16, max_total_q_rows=16 * 512, causal=True),
    dict(kind="ragged", max_batch=1, max_total_q_rows=8192, causal=True),
    dict(kind="ragged", max_batch=64, max_total_q_rows=64 * 512, causal=True),
]


@pytest.mark.compiler
@pytest.mark.parametrize("heads", [(32, 8, 128, 16), (32, 4, 256, 16), (4, 4, 128, 1), (32, 32, 64, 5)],
                         ids=lambda h: "hq{}_hkv{}_d{}_p{}".format(*h))
@pytest.mark.parametrize("kw", FLASHINFER_LIKE, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_flashinfer_test_configs_fit_256_mib(cpu_plan, heads, kw):
    hq, hkv, d, page = heads
    need = attn.get_workspace_size(hq, hkv, d, page, arch="sm_90a", num_sms=SMS, **kw)
    assert 0 < need <= MIB256, f"{need / 2**20:.1f} MiB"


def _prefill_plan(qo_lens, kv_lens, hq=HQ, hkv=HKV, d=D, causal=True):
    qo, kv = [0], [0]
    for n, k in zip(qo_lens, kv_lens):
        qo.append(qo[-1] + n)
        kv.append(kv[-1] + -(-k // PAGE))
    last = [k - (kv[i + 1] - kv[i] - 1) * PAGE for i, k in enumerate(kv_lens)]

    def plan(w):
        w.plan(qo, kv, FakeTensor(kv[-1], "torch.int32"), last, hq, hkv, d, PAGE, causal=causal,
               q_data_type="bfloat16")
    return plan


@pytest.mark.compiler
@pytest.mark.parametrize("case", [
    ("prefill 128x127 over 2048", lambda: _prefill_plan([127] * 128, [2048] * 128)),
    ("prefill 128x577 over 16384 d256", lambda: _prefill_plan([577] * 128, [16384] * 128, 32, 4, 256)),
    ("prefill 16x512 over 4096", lambda: _prefill_plan([512] * 16, [4096] * 16)),
    ("prefill 1x8192", lambda: _prefill_plan([8192], [8192])),
    ("decode 256", lambda: decode_plan(256, pages_each=64)),
], ids=lambda c: c[0])
def test_plan_refuses_nothing_a_256_mib_flashinfer_workspace_accepts(cpu_plan, case):
    """plan() with FlashInfer's test allocation gets past its workspace check."""
    make = attn.BatchDecodeWithPagedKVCacheWrapper if case[0].startswith("decode") else \
        attn.BatchPrefillWithPagedKVCacheWrapper
    with pytest.raises(Planned):
        case[1]()(make(FakeTensor(MIB256)))


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="kind must be one of decode, prefill, ragged"):
        attn.get_workspace_size(HQ, HKV, D, kind="append", arch="sm_90a", num_sms=SMS)
    with pytest.raises(ValueError, match="kind='prefill' needs max_total_q_rows"):
        attn.get_workspace_size(HQ, HKV, D, kind="prefill", max_batch=4, arch="sm_90a", num_sms=SMS)
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        attn.get_workspace_size(HQ, 5, D, arch="sm_90a", num_sms=SMS)
    with pytest.raises(ValueError, match="max_batch must be a positive int"):
        attn.get_workspace_size(HQ, HKV, D, max_batch=0, arch="sm_90a", num_sms=SMS)
    assert attn.get_workspace_size is attn.utils.get_workspace_size


def test_without_a_gpu_the_chip_must_be_given(monkeypatch):
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a CUDA device is present: it is the default")
    except ImportError:
        pass
    with pytest.raises(ValueError, match="no CUDA device to size for; without one give arch= and num_sms="):
        attn.get_workspace_size(HQ, HKV, D)


# -- on the GPU --------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_wrappers_plan_and_run_in_exactly_the_size():
    import torch
    batch, pages = 33, 4
    need = attn.get_workspace_size(HQ, HKV, D, PAGE, kind="decode", max_batch=batch)
    kv = torch.randn(batch * pages, 2, PAGE, HKV, D, dtype=torch.bfloat16, device="cuda")
    args = (torch.arange(0, batch * pages + 1, pages, dtype=torch.int32),
            torch.arange(batch * pages, dtype=torch.int32, device="cuda"), torch.full((batch,), 7, dtype=torch.int32),
            HQ, HKV, D, PAGE)
    tiny = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(1024, dtype=torch.uint8, device="cuda"))
    with pytest.raises(ValueError, match=rf"has 1024 bytes .*this plan needs {need} .*get_workspace_size"):
        tiny.plan(*args, q_data_type=torch.bfloat16)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(need, dtype=torch.uint8, device="cuda"))
    w.plan(*args, q_data_type=torch.bfloat16)
    q = torch.randn(batch, HQ, D, dtype=torch.bfloat16, device="cuda")
    o = w.run(q, kv)
    assert torch.isfinite(o.float()).all()
    # One byte less: the split-KV scratch is capped to fit; the same attention.
    small = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(need - 1, dtype=torch.uint8, device="cuda"))
    small.plan(*args, q_data_type=torch.bfloat16)
    torch.testing.assert_close(small.run(q, kv), o, atol=2e-2, rtol=2e-2)
    qo = torch.tensor([0, 1000, 3000], dtype=torch.int32)
    kvi = torch.tensor([0, 1000, 4000], dtype=torch.int32)
    need = attn.get_workspace_size(HQ, HKV, D, kind="ragged", max_batch=2, max_total_q_rows=3000, causal=True)
    r = attn.BatchPrefillWithRaggedKVCacheWrapper(torch.empty(need, dtype=torch.uint8, device="cuda"))
    r.plan(qo, kvi, HQ, HKV, D, causal=True, q_data_type=torch.bfloat16)
    k = torch.randn(4000, HKV, D, dtype=torch.bfloat16, device="cuda")
    o = r.run(torch.randn(3000, HQ, D, dtype=torch.bfloat16, device="cuda"), k, k)
    assert torch.isfinite(o.float()).all()


@pytest.mark.gpu
@pytest.mark.parametrize("qo_len,kv_len", [(2048, 4096), (4096, 4096)])
def test_gpu_single_prefill_sizes_its_own_scratch(qo_len, kv_len):
    """Refused with the fixed 32 MiB scratch of before; now sized per call."""
    import math

    import torch
    gen = torch.Generator().manual_seed(7)
    q = torch.randn(qo_len, HQ, D, generator=gen).to(torch.bfloat16).cuda()
    k = torch.randn(kv_len, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    v = torch.randn(kv_len, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    o = attn.single_prefill_with_kv_cache(q, k, v, causal=True)
    # Reference on a few rows (the last ones see every key).
    rows = torch.arange(qo_len - 64, qo_len, device="cuda")
    g = HQ // HKV
    s = torch.einsum("qhd,khd->hqk", q[rows].float(), k.float().repeat_interleave(g, 1)) / math.sqrt(D)
    pos = kv_len - qo_len + rows
    s = s.masked_fill(torch.arange(kv_len, device="cuda")[None, :] > pos[:, None], float("-inf"))
    ref = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v.float().repeat_interleave(g, 1))
    torch.testing.assert_close(o[rows].float(), ref, atol=2e-2, rtol=2e-2)
    need = attn.get_workspace_size(HQ, HKV, D, kind="ragged", max_batch=1, max_total_q_rows=qo_len, causal=True)
    ws = prefill._single[(str(q.device), "NHD")]._workspace
    assert ws.numel() >= need
    # A single decode sizes its own too.
    o1 = attn.single_decode_with_kv_cache(q[0], k, v)
    assert o1.shape == (HQ, D) and decode._single[str(q.device)]._workspace.numel() >= \
        attn.get_workspace_size(HQ, HKV, D, 16, kind="decode", max_batch=1)
