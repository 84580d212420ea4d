"""torch.compile: attn's entry points as custom ops (attn.ops, torch.ops.attn.*).

CPU (needs torch, skipped without it): the ops are registered, their fake
implementations give the outputs' shapes and dtypes (meta tensors,
FakeTensorMode with CUDA fake tensors, torch.library.opcheck), and
torch.compile(fullgraph=True) traces a wrapper's run and the single_*
functions into one graph holding the op (no graph break), with a backend that
runs the graph on meta tensors, so no kernel runs. The single-call plan cache
(core.SinglePlans) is checked with a stand-in torch.

GPU (marked ``gpu``): compiled == eager for single_decode, single_prefill,
the decode, paged-prefill and ragged wrappers' run; mode="reduce-overhead"
(CUDA-graph trees) around single_decode_with_kv_cache, around a
CUDA-graph decode wrapper re-planned between replays, and around a model's
own custom op that calls the single_* functions eagerly.
"""

import contextlib
import math

import pytest

import attn

if not hasattr(attn, "ops"):  # a build tree's copy of the package from before attn/ops.py
    pytest.skip(f"{attn.__file__} predates attn.ops: rebuild the package (ninja -C <build> attn-python)",
                allow_module_level=True)
from attn import core, ops  # noqa: E402

HQ, HKV, D, PAGE = 32, 8, 128, 16


class Workspace:
    """A stand-in CUDA workspace: enough for the wrappers' constructors on the CPU."""

    dtype, device = "torch.uint8", "cuda:0"

    def __init__(self, n=128 << 20):
        self.shape = (n,)

    def __getitem__(self, s):
        return Workspace(len(range(*s.indices(self.shape[0]))))

    def is_contiguous(self):
        return True

    def numel(self):
        return self.shape[0]

    def element_size(self):
        return 1


@pytest.fixture
def torch():
    t = pytest.importorskip("torch")
    if not hasattr(t.library, "custom_op"):
        pytest.skip(f"torch {t.__version__} has no torch.library.custom_op (needs >= 2.4)")
    ops.register()
    return t


def meta(torch, *shape, dtype=None):
    return torch.empty(*shape, dtype=dtype or torch.bfloat16, device="meta")


# -- registration and fake implementations (CPU) -------------------------------


def test_attn_imported_before_torch_registers_the_ops_at_import_torch(torch):
    """attn first, torch after, then a compiled function that reaches attn
    before any eager attn call: the ops were registered when torch finished
    importing (Dynamo could not register them while tracing)."""
    import os
    import subprocess
    import sys
    code = ("import sys, attn\n"
            "assert 'torch' not in sys.modules, 'import attn imported torch'\n"
            "import torch\n"
            "assert attn.ops.registered(), 'not registered after import torch'\n"
            "def f(x):\n"
            "    attn.core.torch_module()\n"
            "    return x + 1\n"
            "assert torch.compile(f, fullgraph=True, backend='eager')(torch.ones(2)).tolist() == [2.0, 2.0]\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


def test_ops_are_registered(torch):
    assert ops.registered()
    for name in ops.OPS:
        op = getattr(torch.ops.attn, name)
        assert op.default._schema.name == f"attn::{name}"
    schema = str(torch.ops.attn.paged_run.default._schema)
    assert "Int handle" in schema and "Tensor? v_cache" in schema and "-> (Tensor, Tensor)" in schema


def test_register_is_idempotent_and_import_registers_after_torch(torch):
    ops.register()
    ops.register_if_loaded()
    assert torch.ops.attn.single_decode is torch.ops.attn.single_decode


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_fake_paged_and_ragged_run_shapes(torch, dtype):
    dt = getattr(torch, dtype)
    q = meta(torch, 5, HQ, D, dtype=dt)
    kv = meta(torch, 9, 2, PAGE, HKV, D, dtype=dt)
    for args in [(q, kv, None, 1), (q, kv[:, 0], kv[:, 1], 1, 0.5, 2.0, 0.25, -1, 1, meta(torch, HQ, dtype=torch.float32))]:
        o, lse = torch.ops.attn.paged_run(*args)
        assert o.shape == q.shape and o.dtype == dt and o.is_contiguous()
        assert lse.shape == (5, HQ) and lse.dtype == torch.float32
    k = meta(torch, 40, HKV, D, dtype=dt)
    o, lse = torch.ops.attn.ragged_run(q, k, k, 1)
    assert o.shape == q.shape and o.dtype == dt and lse.shape == (5, HQ) and lse.dtype == torch.float32


def test_fake_single_shapes(torch):
    q1 = meta(torch, HQ, D)
    k = meta(torch, 100, HKV, D)
    o, lse = torch.ops.attn.single_decode(q1, k, k)
    assert o.shape == (HQ, D) and o.dtype == torch.bfloat16 and lse.shape == (HQ,) and lse.dtype == torch.float32
    q = meta(torch, 7, HQ, D, dtype=torch.float16)
    kh = meta(torch, 100, HKV, D, dtype=torch.float16)
    o, lse = torch.ops.attn.single_prefill(q, kh, kh, None, None, True)
    assert o.shape == (7, HQ, D) and o.dtype == torch.float16 and lse.shape == (7, HQ)


def test_fake_tensor_mode_on_cuda_fake_tensors(torch):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q = torch.empty(6, HQ, D, dtype=torch.bfloat16, device="cuda")
        kv = torch.empty(4, 2, PAGE, HKV, D, dtype=torch.bfloat16, device="cuda")
        o, lse = torch.ops.attn.paged_run(q, kv, None, 1)
        assert o.shape == q.shape and str(o.device).startswith("cuda") and lse.shape == (6, HQ)
        o, lse = torch.ops.attn.single_prefill(q, q[:, :HKV], q[:, :HKV])
        assert o.shape == q.shape and str(lse.device).startswith("cuda")


@pytest.mark.parametrize("op,args", [
    ("paged_run", lambda t: (meta(t, 4, HQ, D), meta(t, 10, 2, PAGE, HKV, D), None, 1)),
    ("paged_run", lambda t: (meta(t, 4, HQ, D), meta(t, 10, PAGE, HKV, D), meta(t, 10, PAGE, HKV, D), 1, None, 0.5,
                             2.0, 64, 2, meta(t, HQ, dtype=t.float32))),
    ("ragged_run", lambda t: (meta(t, 4, HQ, D), meta(t, 30, HKV, D), meta(t, 30, HKV, D), 1)),
    ("single_decode", lambda t: (meta(t, HQ, D), meta(t, 33, HKV, D), meta(t, 33, HKV, D))),
    ("single_prefill", lambda t: (meta(t, 9, HQ, D), meta(t, 33, HKV, D), meta(t, 33, HKV, D), None, None, True)),
])
def test_opcheck(torch, op, args):
    result = torch.library.opcheck(getattr(torch.ops.attn, op).default, args(torch),
                                   test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))
    assert set(result.values()) == {"SUCCESS"}, result


# -- torch.compile(fullgraph=True) traces (CPU, no kernel runs) ----------------


class MetaBackend:
    """A torch.compile backend that keeps the graph and runs it on meta tensors."""

    def __init__(self, torch):
        self.torch, self.graphs = torch, []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        t = self.torch
        return lambda *args: gm(*[a.to("meta") if isinstance(a, t.Tensor) else a for a in args])

    def targets(self, i=-1):
        """The graph's calls: ops without their overload (attn.paged_run), methods by name (copy_)."""
        return [str(n.target).replace(".default", "") for n in self.graphs[i].graph.nodes
                if n.op in ("call_function", "call_method")]


def compiled(torch, fn):
    torch._dynamo.reset()
    backend = MetaBackend(torch)
    return torch.compile(fn, fullgraph=True, backend=backend), backend


@pytest.mark.parametrize("tuple_cache", [False, True])
def test_compile_decode_run_is_one_graph(torch, tuple_cache):
    w = attn.BatchDecodeWithPagedKVCacheWrapper(Workspace(), "NHD")
    q = torch.randn(3, HQ, D).to(torch.bfloat16)
    kv = torch.randn(8, 2, PAGE, HKV, D).to(torch.bfloat16)
    cache = (kv[:, 0], kv[:, 1]) if tuple_cache else kv

    def f(q):
        o, lse = w.run(q, cache, return_lse=True, k_scale=0.5)
        return o.float() * 2, lse

    cf, backend = compiled(torch, f)
    o, lse = cf(q)
    assert o.shape == (3, HQ, D) and o.dtype == torch.float32 and lse.shape == (3, HQ)
    assert len(backend.graphs) == 1 and "attn.paged_run" in backend.targets()
    node = next(n for n in backend.graphs[0].graph.nodes if str(n.target).startswith("attn.paged_run"))
    assert w._op_handle in node.args and 0.5 in node.args


def test_compile_prefill_runs_and_out_argument(torch):
    p = attn.BatchPrefillWithPagedKVCacheWrapper(Workspace(), "NHD")
    r = attn.BatchPrefillWithRaggedKVCacheWrapper(Workspace(), "NHD")
    q = torch.randn(6, HQ, D).to(torch.float16)
    kv = torch.randn(8, 2, PAGE, HKV, D).to(torch.float16)
    k = torch.randn(20, HKV, D).to(torch.float16)

    def f(q, out):
        a = p.run(q, kv, out=out)
        b, lse = r.run(q, k, k, return_lse=True)
        return a + b, lse

    cf, backend = compiled(torch, f)
    o, lse = cf(q, torch.empty_like(q))
    assert o.shape == q.shape and lse.shape == (6, HQ)
    targets = backend.targets()
    assert "attn.paged_run" in targets and "attn.ragged_run" in targets
    assert any("copy_" in t for t in targets)  # run(out=...) copies the op's output into out


def test_compile_single_functions_are_one_graph(torch):
    q = torch.randn(5, HQ, D).to(torch.bfloat16)
    k = torch.randn(40, HKV, D).to(torch.bfloat16)

    def f(q, k):
        o1 = attn.single_decode_with_kv_cache(q[0], k, k, logits_soft_cap=30.0)
        o2, lse = attn.single_prefill_with_kv_cache(q, k, k, causal=True, return_lse=True, logits_scale=2.0)
        return o1, o2, lse

    cf, backend = compiled(torch, f)
    o1, o2, lse = cf(q, k)
    assert o1.shape == (HQ, D) and o2.shape == q.shape and lse.shape == (5, HQ)
    targets = backend.targets()
    assert "attn.single_decode" in targets and "attn.single_prefill" in targets
    node = next(n for n in backend.graphs[0].graph.nodes if str(n.target).startswith("attn.single_prefill"))
    assert 2.0 in node.args and True in node.args


def test_compile_cascade_run_is_one_graph(torch):
    w = attn.MultiLevelCascadeAttentionWrapper(2, Workspace(), "NHD")
    q = torch.randn(4, HQ, D).to(torch.bfloat16)
    kv = torch.randn(8, 2, PAGE, HKV, D).to(torch.bfloat16)
    cf, backend = compiled(torch, lambda q: w.run(q, kv))
    assert cf(q).shape == q.shape
    assert backend.targets().count("attn.paged_run") == 2


def test_traced_single_call_refuses_untraceable_keywords(torch):
    q = torch.randn(HQ, D).to(torch.bfloat16)
    k = torch.randn(16, HKV, D).to(torch.bfloat16)
    cf, _ = compiled(torch, lambda q: attn.single_decode_with_kv_cache(q, k, k, variant_params={"x": 1.0}))
    with pytest.raises(Exception, match=r"variant_params=\.\.\.\) inside torch.compile is not implemented"):
        cf(q)


def test_eager_run_does_not_go_through_the_op(torch, monkeypatch):
    """Eager calls keep their direct path (no dispatcher): compiling() is False outside a trace."""
    assert not ops.compiling()
    monkeypatch.setattr(ops, "paged_run", lambda *a, **k: pytest.fail("eager run went through the op"))
    w = attn.BatchDecodeWithPagedKVCacheWrapper(Workspace(), "NHD")
    with pytest.raises(RuntimeError, match="call plan"):
        w.run(torch.zeros(1, HQ, D), torch.zeros(1, 2, PAGE, HKV, D))


# -- the single-call plan cache (CPU, a stand-in torch) ------------------------


class StubTorch:
    """What SinglePlans.get uses of torch."""

    class cuda:
        capturing = False

        @classmethod
        def is_current_stream_capturing(cls):
            return cls.capturing

        @staticmethod
        def current_stream(device=None):
            return "stream"

        @staticmethod
        def device(d):
            return contextlib.nullcontext()

        @staticmethod
        def stream(s):
            return contextlib.nullcontext()

    uint8 = "uint8"

    @staticmethod
    def empty(n, dtype=None, device=None):
        return Buffer(n)


class Buffer:
    def __init__(self, n):
        self.n = n

    def numel(self):
        return self.n

    def element_size(self):
        return 1


class StubWrapper:
    def __init__(self, ws):
        self._workspace, self.plans, self._capture_ok = ws, [], False

    def reset_workspace_buffer(self, ws):
        self._workspace = ws


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setattr(core, "torch_module", lambda: StubTorch)
    StubTorch.cuda.capturing = False
    yield StubTorch
    StubTorch.cuda.capturing = False


def get(plans, key, need=1 << 20, pin=False):
    return plans.get(key, "cuda:0", "cuda:0", lambda: need, StubWrapper, lambda w: w.plans.append(key), pin=pin,
                     where="single_x")


def test_single_plans_reuse_evict_and_pin(stub):
    plans = core.SinglePlans(capacity=2)
    a = get(plans, "a")
    assert get(plans, "a") is a and a.plans == ["a"]          # a repeated call does not re-plan
    b = get(plans, "b")
    assert plans.last["cuda:0"] is b
    c = get(plans, "c", need=5 << 20)                        # full: the oldest (a) is dropped for c
    assert c is not a and c.plans == ["c"] and c._workspace.numel() >= 5 << 20
    assert "a" not in plans.lru and list(plans.lru) == ["b", "c"]
    d = get(plans, "d")                                       # b's workspace is big enough: reused
    assert d is not b and d._workspace is b._workspace and d.plans == ["d"]
    assert list(plans.lru) == ["c", "d"]
    p = get(plans, "p", pin=True)                            # from the op: pinned, outside the LRU
    assert p not in (a, b) and plans.pinned["p"] is p
    for key in ("x", "y", "z"):
        get(plans, key)
    assert get(plans, "p") is p and p.plans == ["p"]


def test_single_plans_under_capture(stub):
    plans = core.SinglePlans(capacity=2)
    a = get(plans, "a")
    stub.cuda.capturing = True
    assert get(plans, "a") is a and a._capture_ok and plans.pinned["a"] is a and a.plans == ["a"]
    with pytest.raises(RuntimeError, match="single_x is being captured .* not planned before"):
        get(plans, "new")
    with pytest.raises(RuntimeError, match="tensor arguments"):
        get(plans, None)
    stub.cuda.capturing = False
    s1 = get(plans, None)
    s2 = get(plans, None)
    assert s1 is s2 and s1.plans == [None, None]           # no key: planned every call, one scratch wrapper


def test_single_plans_plan_off_thread_while_graph_trees_are_on(stub, monkeypatch):
    """CUDA-graph trees route the calling thread's allocations to their pool while they warm
    up, even inside a model's own op that calls attn eagerly: new plans are made elsewhere."""
    import sys
    import threading
    import types
    planned_on = []

    def plan(device):
        return core.SinglePlans().get("k", "cuda:0", device, lambda: 1 << 20, StubWrapper,
                                      lambda w: planned_on.append(threading.current_thread()))
    cuda0 = types.SimpleNamespace(index=0)
    plan(cuda0)                                                     # no trees: this thread
    managers = {}
    trees = types.SimpleNamespace(get_manager=lambda index, create_if_none_exists: managers.get(index))
    monkeypatch.setitem(sys.modules, "torch._inductor.cudagraph_trees", trees)
    plan(cuda0)                                                     # imported, none on this device
    managers[0] = object()
    plan(cuda0)                                                     # trees on cuda:0: a helper thread
    plan(types.SimpleNamespace(index=1))                            # other device: this thread
    here = threading.current_thread()
    assert [t is here for t in planned_on] == [True, True, False, True]


def test_plain_key():
    assert core.plain_key("d", 1, 2.0, (("a", None),), kwargs={"x": "y"}) is not None
    assert core.plain_key("d", kwargs={"sinks": object()}) is None
    assert core.plain_key("d", ({"a": 1},)) is None


# -- on the GPU ----------------------------------------------------------------


def rand(torch, *shape, gen, dtype=None):
    return torch.randn(*shape, generator=gen).to(dtype or torch.bfloat16).cuda()


def paged_batch(torch, batch, gen, max_len=700):
    lens = torch.randint(1, max_len, (batch,), generator=gen)
    npages = (lens + PAGE - 1) // PAGE
    indptr = torch.zeros(batch + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(npages, 0)
    indices = torch.randperm(int(indptr[-1]) + 7, generator=gen)[:int(indptr[-1])].int()
    last = (lens - (npages - 1) * PAGE).int()
    return indptr, indices, last


def close(torch, a, b, atol=1e-3):
    torch.testing.assert_close(a.float(), b.float(), atol=atol, rtol=1e-3)


@pytest.mark.gpu
def test_gpu_compiled_single_functions_equal_eager():
    import torch
    gen = torch.Generator().manual_seed(11)
    q = rand(torch, 37, HQ, D, gen=gen)
    k, v = rand(torch, 300, HKV, D, gen=gen), rand(torch, 300, HKV, D, gen=gen)

    def f(q, k, v):
        o1, l1 = attn.single_decode_with_kv_cache(q[0], k, v, logits_soft_cap=30.0, return_lse=True)
        o2, l2 = attn.single_prefill_with_kv_cache(q, k, v, causal=True, return_lse=True)
        return o1, l1, o2, l2

    torch._dynamo.reset()
    got = torch.compile(f, fullgraph=True)(q, k, v)
    want = f(q, k, v)
    for a, b in zip(got, want):
        close(torch, a, b)
    # And against a float32 reference for the decode row.
    s = torch.einsum("hd,nhd->hn", q[0].float(), k.float().repeat_interleave(HQ // HKV, 1)) / math.sqrt(D)
    s = 30.0 * torch.tanh(s / 30.0)
    ref = torch.einsum("hn,nhd->hd", torch.softmax(s, -1), v.float().repeat_interleave(HQ // HKV, 1))
    close(torch, got[0], ref, atol=2e-2)


@pytest.mark.gpu
def test_gpu_compiled_wrapper_runs_equal_eager():
    import torch
    gen = torch.Generator().manual_seed(12)
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    kv = rand(torch, 400, 2, PAGE, HKV, D, gen=gen)
    batch = 9
    indptr, indices, last = paged_batch(torch, batch, gen)
    dec = attn.BatchDecodeWithPagedKVCacheWrapper(ws[:64 << 20], "NHD")
    dec.plan(indptr, indices.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    qo = torch.tensor([0, 3, 3, 20, 21, 40, 41, 42, 60, 75], dtype=torch.int32)
    pre = attn.BatchPrefillWithPagedKVCacheWrapper(ws[64 << 20:128 << 20], "NHD")
    pre.plan(qo, indptr, indices.cuda(), last, HQ, HKV, D, PAGE, causal=True, q_data_type=torch.bfloat16)
    rag = attn.BatchPrefillWithRaggedKVCacheWrapper(ws[128 << 20:], "NHD")
    kv_indptr = torch.tensor([0, 50, 60, 100, 130, 170, 171, 190, 260, 300], dtype=torch.int32)
    rag.plan(qo, kv_indptr, HQ, HKV, D, causal=True, q_data_type=torch.bfloat16)
    qd, qp = rand(torch, batch, HQ, D, gen=gen), rand(torch, 75, HQ, D, gen=gen)
    k, v = rand(torch, 300, HKV, D, gen=gen), rand(torch, 300, HKV, D, gen=gen)
    k_cache, v_cache = kv[:, 0].contiguous(), kv[:, 1].contiguous()   # the (k_cache, v_cache) form

    def f(qd, qp, kv, k, v):
        a, la = dec.run(qd, kv, return_lse=True)
        b = pre.run(qp, (k_cache, v_cache))
        c = rag.run(qp, k, v)
        return a, la, b, c

    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True)
    for got, want in zip(cf(qd, qp, kv, k, v), f(qd, qp, kv, k, v)):
        close(torch, got, want)
    # A new plan (other lengths, same batch) is read when the compiled code runs: no recompile needed.
    indptr2, indices2, last2 = paged_batch(torch, batch, gen)
    dec.plan(indptr2, indices2.cuda(), last2, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    pre.plan(qo, indptr2, indices2.cuda(), last2, HQ, HKV, D, PAGE, causal=True, q_data_type=torch.bfloat16)
    for got, want in zip(cf(qd, qp, kv, k, v), f(qd, qp, kv, k, v)):
        close(torch, got, want)


@pytest.mark.gpu
def test_gpu_reduce_overhead_single_decode():
    """CUDA-graph trees around single_decode_with_kv_cache (failed before: attn allocated inside capture)."""
    import torch
    gen = torch.Generator().manual_seed(13)
    k, v = rand(torch, 333, HKV, D, gen=gen), rand(torch, 333, HKV, D, gen=gen)

    def f(q, k, v):
        return attn.single_decode_with_kv_cache(q, k, v) * 1.0

    torch._dynamo.reset()
    cf = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for _ in range(5):  # warm-up, record, then replays with new data in the same buffers
        q = rand(torch, HQ, D, gen=gen)
        k.copy_(rand(torch, 333, HKV, D, gen=gen))
        got = cf(q, k, v).clone()
        want = attn.single_decode_with_kv_cache(q, k, v)
        close(torch, got, want)


@pytest.mark.gpu
def test_gpu_reduce_overhead_single_prefill():
    import torch
    gen = torch.Generator().manual_seed(14)

    def f(q, k, v):
        return attn.single_prefill_with_kv_cache(q, k, v, causal=True)

    torch._dynamo.reset()
    cf = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):
        q, k, v = rand(torch, 64, HQ, D, gen=gen), rand(torch, 200, HKV, D, gen=gen), rand(torch, 200, HKV, D, gen=gen)
        close(torch, cf(q, k, v).clone(), f(q, k, v))


@pytest.mark.gpu
def test_gpu_reduce_overhead_cuda_graph_decode_wrapper_replanned():
    """CUDA-graph trees around a graph-mode wrapper's run, plan() outside between calls."""
    import torch
    gen = torch.Generator().manual_seed(15)
    max_batch, pool = 16, 800
    kv = rand(torch, pool, 2, PAGE, HKV, D, gen=gen)
    w = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(
        torch.empty(128 << 20, dtype=torch.uint8, device="cuda"), torch.zeros(max_batch + 1, dtype=torch.int32,
                                                                              device="cuda"),
        torch.zeros(pool, dtype=torch.int32, device="cuda"), torch.zeros(max_batch, dtype=torch.int32, device="cuda"))
    eager = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(128 << 20, dtype=torch.uint8, device="cuda"))

    def f(q, kv):
        return w.run(q, kv)

    torch._dynamo.reset()
    cf = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for _ in range(5):
        indptr, indices, last = paged_batch(torch, max_batch, gen)
        w.plan(indptr, indices.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
        eager.plan(indptr, indices.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
        q = rand(torch, max_batch, HQ, D, gen=gen)
        close(torch, cf(q, kv).clone(), eager.run(q, kv))


@pytest.mark.gpu
def test_gpu_reduce_overhead_around_a_users_own_op():
    """A model's own custom op that calls the single_* functions eagerly, compiled with
    mode="reduce-overhead": the trees' warm-up routes the calling thread's allocations to
    their pool, so the plans attn keeps must be made elsewhere (failed before: "pending,
    unaccounted allocations" in the pool). A subprocess: ops are defined at module level."""
    import os
    import subprocess
    import sys
    code = f"""
import torch, attn
for name, fn in (("prefill", lambda q, k, v: attn.single_prefill_with_kv_cache(q, k, v, causal=True)),
                 ("decode", attn.single_decode_with_kv_cache)):
    torch.library.define(f"attn_user::{{name}}", "(Tensor q, Tensor k, Tensor v) -> Tensor")
    torch.library.impl(f"attn_user::{{name}}", "cuda")(fn)
    torch.library.register_fake(f"attn_user::{{name}}")(lambda q, k, v: torch.empty_like(q))
prefill = torch.compile(lambda q, k, v: torch.ops.attn_user.prefill(q, k, v), mode="reduce-overhead", fullgraph=True)
decode = torch.compile(lambda q, k, v: torch.ops.attn_user.decode(q, k, v), mode="reduce-overhead", fullgraph=True)
def rand(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
for _ in range(3):  # warm-up, record, replay: fresh inputs each time
    q, k, v = rand(128, {HQ}, {D}), rand(128, {HKV}, {D}), rand(128, {HKV}, {D})
    torch.testing.assert_close(prefill(q, k, v).clone(), attn.single_prefill_with_kv_cache(q, k, v, causal=True))
    q, k, v = rand({HQ}, {D}), rand(256, {HKV}, {D}), rand(256, {HKV}, {D})
    torch.testing.assert_close(decode(q, k, v).clone(), attn.single_decode_with_kv_cache(q, k, v))
torch.cuda.synchronize()
print("PASS")
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.setdefault("USER", "attn-test")  # inductor's cache directory needs a user name
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stderr[-3000:]
