"""CPU checks of the wrappers' memoized plan() (issue #13, "a cheap plan()":
decode's, and the paged and ragged prefill wrappers') and of decode's
batch-invariant split arguments.

The CUDA pieces plan() touches (streams, events, pinned memory, the H2D
copies) are stood in for on the CPU: "device" tensors are CPU tensors and
the copies the binding would queue are done by memmove at the same
addresses, so the tests see what a plan uploads where. The kernels' launch
contracts are fakes with the decode kernels' shape (16-row tiles packing the
GQA group of 4 over 64-key tiles), so no compiler or GPU is needed.
"""

import ctypes
import json

import pytest

torch = pytest.importorskip("torch")

import attn  # noqa: E402
from attn import _native, core  # noqa: E402

if not attn.has_native():
    pytest.skip("binding module not built (ninja -C <build> attn-python)", allow_module_level=True)

HQ, HKV, D, PAGE = 32, 8, 128, 16
MANIFEST = json.dumps({"kernels": [{"name": "attn_decode", "role": "attention", "merge_kernel": "attn_merge"},
                                   {"name": "attn_merge", "role": "merge"}]})
CANDIDATES = [{"q_rows": 16, "kv_tile": 64, "gqa_pack": 4, "cost_per_item": 128, "cost_per_kv_token": 1,
               "ctas_per_sm": 4, "min_chunk_tokens": 0}]


class FakeStream:
    cuda_stream = 0


class FakeFence:
    """The binding's UploadFence, counting its uses."""

    def __init__(self):
        self.waits = self.records = 0

    def record(self, stream):
        self.records += 1

    def wait(self):
        self.waits += 1


class FakeKernel:
    manifest, path, image = MANIFEST, None, b""


class Planner:
    """The binding's Planner planning for real, with its uploads done on the
    host at the addresses it was given (the device side is CPU memory here)."""

    def __init__(self, real):
        self.real = real
        self.calls = 0

    def sizes(self, *a):
        return self.real.sizes(*a)

    def bind(self, host, host_bytes, dev, dev_bytes, fence=None, qo_dst=0, kv_dst=0, last_dst=0, idx_dst=0,
             min_kv=1):
        self.bound = (host, host_bytes, dev, dev_bytes, fence, qo_dst, kv_dst, last_dst, idx_dst, min_kv)

    def step(self, stream, batch, mb, mq, mk, qo, kv, last, idx=0, idx_bytes=0):
        host, host_bytes, dev, dev_bytes, fence, qo_dst, kv_dst, last_dst, idx_dst, min_kv = self.bound
        return self.plan(host, host_bytes, dev, dev_bytes, stream, batch, mb, mq, mk, qo, kv, last, min_kv, fence,
                         qo_dst, kv_dst, last_dst, idx, idx_dst, idx_bytes)

    def plan(self, host, host_bytes, dev, dev_bytes, stream, batch, mb, mq, mk, qo, kv, last, min_kv, fence,
             qo_dst=0, kv_dst=0, last_dst=0, idx=0, idx_dst=0, idx_bytes=0):
        self.calls += 1
        fence.wait()  # as the binding: before the pinned host workspace is written
        s = self.real.plan(host, host_bytes, 0, dev_bytes, stream, batch, mb, mq, mk, qo, kv, last, min_kv)
        if s is not None:
            ctypes.memmove(dev, host, s["plan_bytes"])
            copy_plan_arrays(host, qo_dst, kv_dst, last_dst)
            if idx_dst and idx_dst != idx:
                ctypes.memmove(idx_dst, idx, idx_bytes)
            fence.record(stream)
        return s


def copy_plan_arrays(host, qo_dst, kv_dst, last_dst, stream=0):
    """The binding's copy_plan_arrays on the host: the plan's copies to the fixed buffers."""
    words = (ctypes.c_int32 * 40).from_address(host)
    b = words[22]                                            # kHdrBatch
    for off, n, dst in ((words[31], b + 1, qo_dst), (words[32], b + 1, kv_dst), (words[33], b, last_dst)):
        if dst and n:
            ctypes.memmove(dst, host + 4 * off, 4 * n)


class Native:
    """_native.native() with the uploads on the host."""

    def __init__(self):
        self.real = _native.native()
        self.planners = []
        self.full_plans = 0   # plans of the full path

    def __getattr__(self, name):
        return getattr(self.real, name)

    UploadFence = FakeFence

    def Planner(self, config):
        p = Planner(self.real.Planner(config))
        self.planners.append(p)
        return p

    def plan(self, config, workspace, *args, device_workspace=0, device_bytes=0, stream=0, **kw):
        """The full path's plan-and-upload: the plan, then its copy at the device address."""
        self.full_plans += 1
        s = self.real.plan(config, workspace, *args, **kw)
        if device_workspace:
            ctypes.memmove(device_workspace, workspace, s["plan_bytes"])
        return s

    @staticmethod
    def copy_plan_arrays(host, qo_dst, kv_dst, last_dst, stream):
        copy_plan_arrays(host, qo_dst, kv_dst, last_dst)

    def upload_plan(self, host, nbytes, dev, stream, device_bytes=None):
        assert device_bytes is None or nbytes <= device_bytes  # the binding's Sized check, roughly
        ctypes.memmove(dev, host, nbytes)


@pytest.fixture
def cpu(monkeypatch):
    """Stands in for CUDA; returns the fake native module (its planners)."""
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: FakeStream())
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, pin_memory=False, **k: empty(*a, **k))
    native = Native()
    monkeypatch.setattr(_native, "native", lambda: native)
    monkeypatch.setattr(core, "describe", lambda spec, arch: FakeKernel())
    monkeypatch.setattr(core, "get_kernel", lambda spec, arch, candidate=None: FakeKernel())
    monkeypatch.setattr(core, "manifest_candidates", lambda text: CANDIDATES)
    monkeypatch.setattr(core, "load_module", lambda kernel, device: ("module", kernel))
    monkeypatch.setattr(core, "num_sms", lambda device: 132)
    monkeypatch.setattr(core, "_kernel_infos", {})
    monkeypatch.setenv("ATTN_ARCH", "sm_90a")
    return native


def wrapper(graph=False, max_batch=64, max_pages=8192):
    """A decode wrapper over CPU memory (its constructor wants a CUDA workspace)."""
    w = attn.BatchDecodeWithPagedKVCacheWrapper.__new__(attn.BatchDecodeWithPagedKVCacheWrapper)
    ws = torch.zeros(64 << 20, dtype=torch.uint8)
    w._workspace, w._device, w._kv_layout, w._use_cuda_graph = ws, ws.device, "NHD", graph
    for name in ("_host_ws", "_fence", "_graph_config", "_planned", "_pinned", "_graph_bufs", "_copy_table"):
        setattr(w, name, None)
    w._copy_pending, w._copy_capture, w._copy_table_looked_up = False, 0, False
    w._ws_sizes, w._capture_ok, w._memo, w._memo_keys, w._op_handle = (None, None), False, {}, core.memo_keys(), 0
    w._fixed = {}
    if graph:
        w._fixed = {"kv_indptr": torch.zeros(max_batch + 1, dtype=torch.int32),
                    "kv_indices": torch.zeros(max_pages, dtype=torch.int32),
                    "kv_last_len": torch.zeros(max_batch, dtype=torch.int32)}
        w._max_batch = max_batch
    return w


def batch(lens, seed=0):
    """(indptr, indices, last_page_len) of decode requests with these KV lengths."""
    pages = [-(-n // PAGE) for n in lens]
    indptr = torch.tensor([0] + list(torch.tensor(pages).cumsum(0)), dtype=torch.int32)
    g = torch.Generator().manual_seed(seed)
    indices = torch.randperm(int(indptr[-1]) + 7, generator=g)[:int(indptr[-1])].to(torch.int32)
    last = torch.tensor([n - (p - 1) * PAGE for n, p in zip(lens, pages)], dtype=torch.int32)
    return indptr, indices, last


def plan(w, b, *args, **kw):
    indptr, indices, last = b
    kw.setdefault("q_data_type", torch.bfloat16)
    w.plan(indptr, indices, last, kw.pop("hq", HQ), HKV, D, PAGE, *args, **kw)
    return w._planned


def device_arrays(w, p):
    """What the kernels read of plan ``p`` on the device: the plan's used words
    (the header, then each array up to its count; the rest is stale), the
    index arrays it carries (qo_indptr, kv_indptr, last_page_len), and the
    page table at its pointer (paged)."""
    words = w._workspace[:p.summary["plan_bytes"]].view(torch.int32).clone()
    b = p.batch
    # One head-group copy's arrays (kHdrCopyCtas, NumItems / kHdrCopies, kHdrCopyUnits).
    ctas, n_items, units = int(words[36]), int(words[3]) // int(words[35]), int(words[38])
    cta, it, mi, mu, qo, kv, last = (int(words[i]) for i in (14, 15, 16, 17, 31, 32, 33))  # the offsets
    arrays = [words[qo:qo + b + 1], words[kv:kv + b + 1], words[last:last + b]]
    out = [torch.cat([words[:48], *arrays, words[cta:cta + ctas + 1], words[it:it + 8 * n_items],
                      words[mi:mi + units + 1], words[mu:mu + 4 * units]])] + arrays
    if "kv_indices" in p.ptrs:
        t = torch.empty(p.kv_pages, dtype=torch.int32)
        ctypes.memmove(t.data_ptr(), p.ptrs["kv_indices"], 4 * p.kv_pages)
        out.append(t)
    return out


LENS_A = [2048] * 64
LENS_B = [512] * 60 + [32768] * 4


@pytest.mark.parametrize("graph", [False, True])
def test_memoized_plan_equals_the_full_plan(cpu, graph):
    w = wrapper(graph, max_pages=16384)
    plan(w, batch(LENS_A))                  # the full path, memoized
    assert len(w._memo) == 1
    planner = cpu.planners[-1]
    b = batch(LENS_B, seed=1)
    p = plan(w, b)                          # the memoized path
    assert planner.calls == 1 and len(w._memo) == 1
    fresh = wrapper(graph, max_pages=16384)
    q = plan(fresh, b)                      # the full path of the same batch
    assert planner.calls == 1
    got, want = device_arrays(w, p), device_arrays(fresh, q)
    assert len(got) == len(want) == 5
    for x, y in zip(got, want):
        assert torch.equal(x, y)
    assert torch.equal(got[1], torch.arange(len(LENS_B) + 1, dtype=torch.int32))   # qo_indptr: 0, 1, 2, ..
    assert torch.equal(got[2], b[0]) and torch.equal(got[3], b[2]) and torch.equal(got[4], b[1])
    for name in ("candidate", "num_items", "num_merge_units", "plan_bytes"):
        assert p.summary[name] == q.summary[name], name
    assert p.config == q.config
    assert (p.total_q, p.batch, p.q_len_per_req, p.keywords, p.sm_scale) == \
        (q.total_q, q.batch, q.q_len_per_req, q.keywords, q.sm_scale)
    assert p.attention_kernel == q.attention_kernel and p.merge_kernel == q.merge_kernel
    if graph:  # the kernels read the page table from the fixed buffer; plan() fills the others as FlashInfer's
        assert p.ptrs == {"kv_indices": w._fixed["kv_indices"].data_ptr()}
        n = len(LENS_B)
        for name, want in (("kv_indices", b[1]), ("kv_indptr", b[0]), ("kv_last_len", b[2])):
            assert torch.equal(w._fixed[name][:want.numel()], want), name
            assert torch.equal(fresh._fixed[name][:want.numel()], want), name
        assert not w._fixed["kv_last_len"][n:].any()   # nothing written past the batch


def test_memoized_plan_still_rejects_bad_input(cpu):
    w = wrapper()
    good = batch(LENS_A)
    plan(w, good)
    indptr, indices, last = good
    with pytest.raises(ValueError, match=r"num_qo_heads \(30\) must be a multiple of num_kv_heads \(8\)"):
        plan(w, good, hq=30)
    with pytest.raises(ValueError, match="indptr arrays must have batch \\+ 1 entries and last_page_len batch: "
                                         "qo_indptr 64, kv_indptr 65, last_page_len 63"):
        w.plan(indptr, indices, last[:63], HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    bad = last.clone()
    bad[5] = PAGE + 1
    with pytest.raises(RuntimeError, match=r"\[LastBlockLenOutOfRange\] kv_last_len\[5\] = 17"):
        w.plan(indptr, indices, bad, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    down = indptr.clone()
    down[3] = down[4] + 1
    with pytest.raises(RuntimeError, match=r"\[NonMonotoneIndptr\] kv_indptr is not monotone at request 3"):
        w.plan(down, indices, last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    with pytest.raises(ValueError, match="q_len_per_req must be a positive int, got True"):
        plan(w, good, q_len_per_req=True)
    with pytest.raises(ValueError, match="fixed_split_size must be None or -1"):
        plan(w, good, fixed_split_size=0)
    with pytest.raises(TypeError, match="disable_split_kv must be a bool"):
        plan(w, good, disable_split_kv="yes")
    with pytest.raises(NotImplementedError, match="window_right=-1"):
        plan(w, good, window_right=-1)
    with pytest.raises(ValueError, match="request 2 has 3 keys, fewer than q_len_per_req \\(4\\)"):
        plan(w, batch([2048, 2048, 3, 2048]), q_len_per_req=4)
    plan(w, batch([2048] * 4), q_len_per_req=4)
    with pytest.raises(ValueError, match="request 2 has 3 keys, fewer than q_len_per_req \\(4\\)"):
        plan(w, batch([2048, 2048, 3, 2048]), q_len_per_req=4)   # memoized now
    # Other forms of the page table take the full path and plan the same.
    p = plan(w, (indptr.long(), indices, last.tolist()))
    q = plan(w, good)
    assert all(p.summary[n] == q.summary[n] for n in p.summary)
    small = w._workspace
    w.reset_workspace_buffer(torch.zeros(4096, dtype=torch.uint8))
    with pytest.raises(ValueError, match="float_workspace_buffer has 4096 bytes"):
        plan(w, good)
    w.reset_workspace_buffer(small)
    plan(w, good)


def test_memoized_graph_plan_keeps_the_graph_rules(cpu):
    w = wrapper(graph=True, max_batch=64)
    plan(w, batch(LENS_A))
    with pytest.raises(ValueError, match="batch 65 exceeds the CUDA-graph buffers' 64"):
        plan(w, batch([100] * 65))
    with pytest.raises(ValueError, match="every plan\\(\\) must keep the heads"):
        plan(w, batch(LENS_A), hq=16)
    with pytest.raises(ValueError, match="every plan\\(\\) must keep the heads.*fixed_split_size"):
        plan(w, batch(LENS_A), fixed_split_size=2048)
    with pytest.raises(ValueError, match="kv_indices has 9024 entries but its fixed buffer"):
        plan(w, batch([16 * 141] * 64))
    p = plan(w, batch([100] * 3))
    assert p.batch == 3 and p.summary["num_ctas"] == 132 * 4


def items(w, p):
    """The plan's work items on the device, [num_items, 8]: the stored copy and
    its head-group copies (Plan.h), head groups moved (slots left stored)."""
    words = w._workspace[:p.summary["plan_bytes"]].view(torch.int32)
    off, n = int(words[15]), int(words[3])   # kHdrOffItems, kHdrNumItems
    copies, groups = int(words[35]), int(words[37])   # kHdrCopies, kHdrCopyGroups
    stored = words[off:off + 8 * (n // copies)].view(n // copies, 8)
    out = stored.repeat(copies, 1)
    out[:, 1] += torch.arange(copies).repeat_interleave(n // copies) * groups
    return out


def probe_ranges(w, p, request):
    """The key ranges of ``request``'s work items, per head group, sorted."""
    it = items(w, p)
    mine = it[it[:, 0] == request]
    return sorted((int(r[1]), int(r[4]), int(r[5])) for r in mine)


def test_vllm_positional_split_arguments_plan_batch_invariantly(cpu):
    # vLLM passes plan()'s arguments positionally, fixed_split_size and disable_split_kv last.
    def vllm_plan(w, b, fixed, disable):
        indptr, indices, last = b
        w.plan(indptr, indices, last, HQ, HKV, D, PAGE, "NONE", -1, None, torch.bfloat16, torch.bfloat16, None,
               None, 0.088, None, None, True, None, None, fixed, disable)
        return w._planned

    alone, crowd = batch([5000]), batch([512] * 7 + [5000] + [32768] * 4 + [512] * 30)
    for graph in (False, True):
        for fixed, disable in ((2000, False), (None, True), (2048, True)):
            w = wrapper(graph, max_pages=16384)
            a = vllm_plan(w, alone, fixed, disable)
            ra = probe_ranges(w, a, 0)
            c = vllm_plan(w, crowd, fixed, disable)
            rc = probe_ranges(w, c, 7)
            assert ra == rc, (graph, fixed, disable)
            assert a.sm_scale == pytest.approx(0.088)
            if disable:
                assert ra == [(g, 0, 5000) for g in range(8)]
                assert c.summary["num_merge_units"] == 0
                assert a.config["disable_split"] == 1 and a.config["fixed_split_tokens"] == 0
            else:  # 2000 rounded up to the 64-key granule: 2048
                assert ra == sorted((g, b, e) for g in range(8) for b, e in ((0, 2048), (2048, 4096), (4096, 5000)))
                assert a.config["fixed_split_tokens"] == 2000 and a.config["max_kv_tokens"] > 0


def test_split_mode_values():
    assert core.split_mode(None, False) == (0, False) == core.split_mode(-1, 0)
    assert core.split_mode(4096, False) == (4096, False)
    assert core.split_mode(4096, True) == (0, True) == core.split_mode(None, 1)
    for bad in (0, -2, 2 ** 31, 1.5, True, "2048"):
        with pytest.raises(ValueError, match="fixed_split_size must be None or -1"):
            core.split_mode(bad, False)
    with pytest.raises(TypeError, match="disable_split_kv must be a bool"):
        core.split_mode(None, 2)


def test_prefill_wrappers_refuse_the_split_arguments_clearly():
    from attn.prefill import BatchPrefillWithPagedKVCacheWrapper as Paged
    w = Paged.__new__(Paged)
    with pytest.raises(NotImplementedError, match="fixed_split_size=4096.*decode wrappers only"):
        w.plan(torch.tensor([0, 1]), torch.tensor([0, 1]), torch.tensor([0]), torch.tensor([1]), HQ, HKV, D, PAGE,
               fixed_split_size=4096)


def test_workspace_size_of_a_fixed_split(cpu):
    dev = torch.device("cpu")
    plain = attn.get_workspace_size(HQ, HKV, D, PAGE, max_batch=64, device=dev)
    # 64 requests of 5000 keys: 313 pages each, 5008 tokens.
    need = attn.get_workspace_size(HQ, HKV, D, PAGE, max_batch=64, device=dev, fixed_split_size=2048,
                                   max_kv_tokens=64 * 5008)
    assert need > plain
    assert attn.get_workspace_size(HQ, HKV, D, PAGE, max_batch=64, device=dev, disable_split_kv=True) <= plain
    with pytest.raises(ValueError, match="fixed_split_size needs max_kv_tokens"):
        attn.get_workspace_size(HQ, HKV, D, PAGE, max_batch=64, device=dev, fixed_split_size=2048)
    with pytest.raises(NotImplementedError, match="decode wrappers only"):
        attn.get_workspace_size(HQ, HKV, D, kind="ragged", max_batch=1, max_total_q_rows=64, device=dev,
                                disable_split_kv=True)
    w = wrapper()
    w.reset_workspace_buffer(torch.zeros(need, dtype=torch.uint8))
    plan(w, batch([5000] * 64), fixed_split_size=2048)
    plan(w, batch([5000] * 64, seed=2), fixed_split_size=2048)        # memoized
    w.reset_workspace_buffer(torch.zeros(need - 1, dtype=torch.uint8))
    with pytest.raises(ValueError, match=f"float_workspace_buffer has {need - 1} bytes"):
        plan(w, batch([5000] * 64), fixed_split_size=2048)


def test_fixed_split_with_several_row_tiles_per_request(cpu):
    # 8 query tokens x 4 packed heads = two 16-row tiles per request: the work list is sized for both.
    for graph in (False, True):
        w = wrapper(graph, max_pages=4096)
        for lens in ([5000] * 8, [3000] * 16):
            p = plan(w, batch(lens), q_len_per_req=8, fixed_split_size=1024)
            assert p.summary["num_merge_units"] > 0


# -- the prefill wrappers' memoized plan() -------------------------------------

def prefill_wrapper(paged, graph=False, max_batch=16, max_pages=4096, max_q=4096):
    """A paged or ragged prefill wrapper over CPU memory."""
    from attn.prefill import BatchPrefillWithPagedKVCacheWrapper as Paged
    from attn.prefill import BatchPrefillWithRaggedKVCacheWrapper as Ragged
    cls = Paged if paged else Ragged
    w = wrapper(graph=False)
    w.__class__ = cls
    w._use_cuda_graph = graph
    w._max_total_q_rows = max_q if graph else None
    if graph:
        w._fixed = {"qo": torch.zeros(max_batch + 1, dtype=torch.int32),
                    "kv_indptr": torch.zeros(max_batch + 1, dtype=torch.int32)}
        if paged:
            w._fixed.update(kv_indices=torch.zeros(max_pages, dtype=torch.int32),
                            kv_last_len=torch.zeros(max_batch, dtype=torch.int32))
        w._max_batch = max_batch
    return w


def prefill_batch(qo_lens, kv_lens, seed=0):
    """(qo_indptr, kv_indptr, kv_indices, last_page_len) of paged prefill requests."""
    qo = torch.tensor([0] + list(torch.tensor(qo_lens).cumsum(0)), dtype=torch.int32)
    indptr, indices, last = batch(kv_lens, seed)
    return qo, indptr, indices, last


def prefill_plan(w, b, **kw):
    qo, indptr, indices, last = b[:4]
    kw.setdefault("q_data_type", torch.bfloat16)
    kw.setdefault("causal", True)
    if isinstance(w, attn.BatchPrefillWithPagedKVCacheWrapper):
        w.plan(qo, indptr, indices, last, HQ, HKV, D, PAGE, **kw)
    else:  # ragged: kv_indptr counts tokens
        kv = torch.tensor([0] + [int(x) for x in torch.tensor(b[4]).cumsum(0)], dtype=torch.int32) \
            if len(b) > 4 else qo
        w.plan(qo, kv, HQ, HKV, D, **kw)
    return w._planned


QO_A, KV_A = [100, 37, 512], [300, 37, 1024]
QO_B, KV_B = [64, 900, 1, 250, 17], [64, 2000, 700, 250, 4000]


@pytest.mark.parametrize("paged", [True, False], ids=["paged", "ragged"])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_memoized_prefill_plan_equals_the_full_plan(cpu, paged, graph):
    w = prefill_wrapper(paged, graph)
    prefill_plan(w, prefill_batch(QO_A, KV_A) + ((KV_A,) if not paged else ()))   # the full path, memoized
    assert len(w._memo) == 1
    planner = cpu.planners[-1]
    b = prefill_batch(QO_B, KV_B, seed=1) + ((KV_B,) if not paged else ())
    p = prefill_plan(w, b)                                                         # the memoized path
    assert cpu.full_plans == 1 and planner.calls >= 1 and len(w._memo) == 1 and len(cpu.planners) == 1
    fresh = prefill_wrapper(paged, graph)
    q = prefill_plan(fresh, b)                                                     # the full path of it
    got, want = device_arrays(w, p), device_arrays(fresh, q)
    assert len(got) == len(want) == (5 if paged else 4)
    for x, y in zip(got, want):
        assert torch.equal(x, y)
    assert torch.equal(got[1], b[0]) and torch.equal(got[2], b[1] if paged else torch.tensor(
        [0] + [int(x) for x in torch.tensor(KV_B).cumsum(0)], dtype=torch.int32))
    if paged:
        assert torch.equal(got[3], b[3]) and torch.equal(got[4], b[2])
    else:
        assert not got[3].any()   # ragged: no last-page lengths
    for name in ("candidate", "num_items", "num_merge_units", "num_ctas", "plan_bytes"):
        assert p.summary[name] == q.summary[name], name
    assert p.config == q.config and p.host_bytes == q.host_bytes
    assert (p.total_q, p.batch, p.keywords, p.sm_scale, p.dtype, p.sinks, p.mask_ptrs) == \
        (q.total_q, q.batch, q.keywords, q.sm_scale, q.dtype, q.sinks, q.mask_ptrs)
    assert p.attention_kernel == q.attention_kernel and p.merge_kernel == q.merge_kernel
    if paged:
        assert (p.kv_pages, p.page_size, p.window_left) == (q.kv_pages, q.page_size, q.window_left)
    else:
        assert p.total_kv == q.total_kv == sum(KV_B)
    if graph:  # plan() fills the caller's fixed buffers as FlashInfer's does (the kernels read the page table there)
        want = {"qo": b[0], "kv_indptr": b[1]} if paged else {"qo": b[0], "kv_indptr": got[2]}
        if paged:
            want.update(kv_indices=b[2], kv_last_len=b[3])
            assert p.ptrs == {"kv_indices": w._fixed["kv_indices"].data_ptr()}
        for name, x in want.items():
            assert torch.equal(w._fixed[name][:x.numel()], x), name
            assert torch.equal(fresh._fixed[name][:x.numel()], x), name


@pytest.mark.parametrize("paged", [True, False], ids=["paged", "ragged"])
def test_memoized_prefill_plan_still_rejects_bad_input(cpu, paged):
    w = prefill_wrapper(paged)
    extra = (KV_A,) if not paged else ()
    good = prefill_batch(QO_A, KV_A) + extra
    prefill_plan(w, good)
    qo = good[0]
    down = qo.clone()
    down[1] = down[2] + 1
    with pytest.raises(RuntimeError, match=r"\[NonMonotoneIndptr\] qo_indptr is not monotone at request 1"):
        prefill_plan(w, (down,) + good[1:])
    if paged:
        indptr, indices, last = good[1:4]
        with pytest.raises(ValueError, match="kv_indptr\\[-1\\] is .* but kv_indices has only 3 entries"):
            prefill_plan(w, (qo, indptr, indices[:3], last))
        bad = last.clone()
        bad[2] = PAGE + 1
        with pytest.raises(RuntimeError, match=r"\[LastBlockLenOutOfRange\] kv_last_len\[2\] = 17"):
            prefill_plan(w, (qo, indptr, indices, bad))
    with pytest.raises(ValueError, match=r"num_qo_heads \(30\) must be a multiple of num_kv_heads \(8\)"):
        w.plan(*(good[:4] if paged else (good[0], good[0])), 30, HKV, D, *((PAGE,) if paged else ()),
               causal=True, q_data_type=torch.bfloat16)
    # Other forms of the index arrays take the full path, plan the same and keep the one memo entry.
    planners, full = len(cpu.planners), cpu.full_plans
    p = prefill_plan(w, (qo.long(),) + good[1:])
    assert cpu.full_plans == full + 1
    q = prefill_plan(w, good)
    assert cpu.full_plans == full + 1
    assert all(p.summary[n] == q.summary[n] for n in p.summary)
    assert len(w._memo) == 1 and len(cpu.planners) == planners


def test_graph_run_copies_the_deferred_plan_once_per_capture_and_per_eager_plan(cpu, monkeypatch):
    """run()'s rule for graph mode's copy table: the first run() of each
    capture puts the copy in the graph (later runs of that capture do not);
    an eager run() copies once after each plan; a capture does not count as
    an eager copy (it runs nothing), and the copy keeps the fence behind it."""
    w = wrapper(graph=True)
    w._host_ws = torch.zeros(16, dtype=torch.uint8)
    w._copy_table = (torch.zeros(30, dtype=torch.int64), torch.zeros(30, dtype=torch.int64), "module", "kernel")
    copies, capture = [], {"id": 0}
    native = cpu
    monkeypatch.setattr(native, "copy_by_table",
                        lambda module, kernel, table, words, fence, stream, staging: copies.append((capture["id"], fence)),
                        raising=False)
    monkeypatch.setattr(native, "stream_capture_id", lambda stream: capture["id"], raising=False)
    monkeypatch.setattr(native, "run", lambda *a, **k: None, raising=False)
    monkeypatch.setattr(core, "stream_handle", lambda device: 0)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capture["id"] != 0)

    class Planned:
        module, attention_kernel, merge_kernel, host_bytes, args = "module", "attn", "merge", 16, []

    def runs(n, capture_id=0):
        capture["id"] = capture_id
        for _ in range(n):
            w._launch(Planned(), [])
        capture["id"] = 0

    w._copy_pending = True             # a plan's copies wait in the table
    runs(3)                            # eager: the first run copies
    assert [c for c, _ in copies] == [0]
    runs(2)                            # no new plan: nothing more
    assert len(copies) == 1
    w._copy_pending = True
    runs(4, capture_id=7)              # a capture of four layers: one copy, in the graph
    assert [c for c, _ in copies] == [0, 7]
    runs(2, capture_id=7)              # the same capture continued: nothing more
    runs(1, capture_id=9)              # another capture: its own copy
    assert [c for c, _ in copies] == [0, 7, 9]
    runs(1)                            # eager after the captures: the plan has not been copied eagerly
    assert [c for c, _ in copies] == [0, 7, 9, 0]
    assert all(f is w._fence for _, f in copies)
