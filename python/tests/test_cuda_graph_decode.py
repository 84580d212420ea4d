"""CUDAGraphBatchDecodeWithPagedKVCacheWrapper: FlashInfer's CUDA-graph decode wrapper.

CPU: its signature is FlashInfer's (flashinfer/decode.py, written out), it is
exported where FlashInfer exports it (``decode`` and the top level), and it
is the decode wrapper in graph mode with the constructor's buffers fixed.
GPU (marked ``gpu``): plan + run captured in a CUDA graph and replayed after
plans with new lengths and batch sizes, for one and for several query tokens
per request (``q_len_per_req``), against the eager wrapper.
"""

import inspect
import math

import pytest

import attn

if not hasattr(attn, "CUDAGraphBatchDecodeWithPagedKVCacheWrapper"):  # a build tree's copy from before the class
    pytest.skip(f"{attn.__file__} predates CUDAGraphBatchDecodeWithPagedKVCacheWrapper: rebuild the package "
                "(ninja -C <build> attn-python)", allow_module_level=True)

FLASHINFER_INIT = [("workspace_buffer", inspect.Parameter.empty), ("indptr_buffer", inspect.Parameter.empty),
                   ("indices_buffer", inspect.Parameter.empty), ("last_page_len_buffer", inspect.Parameter.empty),
                   ("kv_layout", "NHD"), ("use_tensor_cores", False)]

HQ, HKV, D, PAGE = 32, 8, 128, 16


class FakeTensor:
    """Enough of torch.Tensor for the constructor's checks."""

    def __init__(self, shape=(1,), dtype="torch.int32", device="cuda:0"):
        self.shape, self.dtype, self.device = tuple(shape), dtype, device

    def is_contiguous(self):
        return True


def test_signature_is_flashinfers():
    params = list(inspect.signature(attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper.__init__).parameters.values())
    assert params[0].name == "self"
    assert [(p.name, p.default) for p in params[1:]] == FLASHINFER_INIT
    assert all(p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params[1:])


def test_exported_where_flashinfer_exports_it():
    cls = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper
    assert attn.decode.CUDAGraphBatchDecodeWithPagedKVCacheWrapper is cls
    assert "CUDAGraphBatchDecodeWithPagedKVCacheWrapper" in attn.__all__
    assert issubclass(cls, attn.BatchDecodeWithPagedKVCacheWrapper)
    # plan/run are the decode wrapper's (FlashInfer's subclass adds none either).
    assert cls.plan is attn.BatchDecodeWithPagedKVCacheWrapper.plan
    assert cls.run is attn.BatchDecodeWithPagedKVCacheWrapper.run


def test_constructor_fixes_the_buffers_in_graph_mode():
    indptr, indices, last = FakeTensor((9,)), FakeTensor((100,)), FakeTensor((8,))
    w = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(FakeTensor((1 << 20,), "torch.uint8"), indptr, indices,
                                                         last, "HND", True)
    assert w.is_cuda_graph_enabled and w._kv_layout == "HND" and w._max_batch == 8
    assert w._fixed == {"kv_indptr": indptr, "kv_indices": indices, "kv_last_len": last}


def test_constructor_checks_the_buffers():
    ws = FakeTensor((1 << 20,), "torch.uint8")
    with pytest.raises(ValueError, match="paged_kv_indptr_buffer needs batch \\+ 1 entries"):
        attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(ws, FakeTensor((8,)), FakeTensor((100,)), FakeTensor((8,)))
    with pytest.raises(ValueError, match="paged_kv_indices_buffer .* kv_indices buffer is missing"):
        attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(ws, FakeTensor((9,)), None, FakeTensor((8,)))
    with pytest.raises(TypeError, match="expected dtype i32"):
        attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(ws, FakeTensor((9,), "torch.int64"), FakeTensor((100,)),
                                                         FakeTensor((8,)))


# -- on the GPU ----------------------------------------------------------------


def random_plan(torch, batch, k, gen, pool, max_len=900):
    lens = torch.randint(k, max_len, (batch,), generator=gen)
    npages = (lens + PAGE - 1) // PAGE
    indptr = torch.zeros(batch + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(npages, 0)
    indices = torch.randperm(pool, generator=gen)[:int(indptr[-1])].int()
    last = (lens - (npages - 1) * PAGE).int()
    return indptr, indices, last


@pytest.mark.gpu
@pytest.mark.parametrize("q_len_per_req", [1, 2, 4])
def test_gpu_capture_and_replay_with_new_lengths(q_len_per_req):
    import torch
    k = q_len_per_req
    gen = torch.Generator().manual_seed(20 + k)
    max_batch, pool = 12, 1024
    kv = torch.randn(pool, 2, PAGE, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    bufs = (torch.zeros(max_batch + 1, dtype=torch.int32, device="cuda"),
            torch.zeros(pool, dtype=torch.int32, device="cuda"),
            torch.zeros(max_batch, dtype=torch.int32, device="cuda"))
    w = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(torch.empty(128 << 20, dtype=torch.uint8, device="cuda"),
                                                         *bufs)
    eager = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(128 << 20, dtype=torch.uint8, device="cuda"))
    q = torch.zeros(max_batch * k, HQ, D, dtype=torch.bfloat16, device="cuda")
    out = torch.zeros_like(q)
    lse = torch.zeros(max_batch * k, HQ, dtype=torch.float32, device="cuda")

    def plan(wrapper, batch, table):
        wrapper.plan(table[0], table[1].cuda(), table[2], HQ, HKV, D, PAGE, q_data_type=torch.bfloat16,
                     q_len_per_req=k)

    first = random_plan(torch, max_batch, k, gen, pool)
    plan(w, max_batch, first)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        w.run(q, kv, out=out, lse=lse, return_lse=True)  # warm-up outside capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            w.run(q, kv, out=out, lse=lse, return_lse=True)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    for batch in (max_batch, 3, 7, 1, max_batch):
        table = random_plan(torch, batch, k, gen, pool)
        plan(w, batch, table)   # outside the graph: writes the fixed buffers and the workspace
        q.copy_(torch.randn(max_batch * k, HQ, D, generator=gen).to(torch.bfloat16))
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        plan(eager, batch, table)
        want_o, want_lse = eager.run(q[:batch * k], kv, return_lse=True)
        torch.testing.assert_close(out[:batch * k].float(), want_o.float(), atol=1e-3, rtol=1e-3)
        torch.testing.assert_close(lse[:batch * k], want_lse, atol=1e-3, rtol=1e-3)
        if k == 1:  # and against a float32 reference for the first request
            n = (int(table[0][1]) - 1) * PAGE + int(table[2][0])
            pages = table[1][:int(table[0][1])].long().cuda()
            kk = kv[pages, 0].reshape(-1, HKV, D)[:n].float().repeat_interleave(HQ // HKV, 1)
            vv = kv[pages, 1].reshape(-1, HKV, D)[:n].float().repeat_interleave(HQ // HKV, 1)
            sc = torch.einsum("hd,nhd->hn", q[0].float(), kk) / math.sqrt(D)
            ref = torch.einsum("hn,nhd->hd", torch.softmax(sc, -1), vv)
            torch.testing.assert_close(out[0].float(), ref, atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
def test_gpu_plan_must_keep_q_len_per_req():
    import torch
    gen = torch.Generator().manual_seed(30)
    w = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(
        torch.empty(64 << 20, dtype=torch.uint8, device="cuda"), torch.zeros(5, dtype=torch.int32, device="cuda"),
        torch.zeros(256, dtype=torch.int32, device="cuda"), torch.zeros(4, dtype=torch.int32, device="cuda"))
    table = random_plan(torch, 4, 2, gen, 256, max_len=300)
    w.plan(table[0], table[1].cuda(), table[2], HQ, HKV, D, PAGE, q_data_type=torch.bfloat16, q_len_per_req=2)
    with pytest.raises(ValueError, match="CUDA-graph mode every plan"):
        w.plan(table[0], table[1].cuda(), table[2], HQ, HKV, D, PAGE, q_data_type=torch.bfloat16, q_len_per_req=1)


@pytest.mark.gpu
def test_gpu_plan_refuses_a_capturing_stream():
    """plan() under capture would record this step's uploads into the graph:
    refused, on the first plan of a configuration (the full path) and on a
    memoized one (the binding's check), and the wrapper still plans after."""
    import torch
    gen = torch.Generator().manual_seed(31)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    table = random_plan(torch, 4, 1, gen, 256, max_len=300)
    args = (table[0], table[1].cuda(), table[2], HQ, HKV, D, PAGE)
    w.plan(*args, q_data_type=torch.bfloat16)
    assert w._memo, "the first plan memoizes its configuration"
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    for kw in ({"q_data_type": torch.bfloat16}, {"q_data_type": torch.bfloat16, "sm_scale": 0.5}):
        with torch.cuda.stream(s):
            g = torch.cuda.CUDAGraph()
            with pytest.raises(RuntimeError, match="outside CUDA-graph capture"):
                with torch.cuda.graph(g, stream=s):
                    w.plan(*args, **kw)
    torch.cuda.synchronize()
    w.plan(*args, q_data_type=torch.bfloat16)
    kv = torch.randn(256, 2, PAGE, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    q = torch.randn(4, HQ, D, generator=gen).to(torch.bfloat16).cuda()
    assert torch.isfinite(w.run(q, kv).float()).all()


@pytest.mark.gpu
def test_gpu_layers_captured_after_warm_up_copy_the_plan_once():
    """As engines use graph mode: plan, an eager warm-up of every layer,
    then one graph capturing each layer's run(), replayed after each new
    plan. Once captured, plan() writes its copies into the wrapper's copy
    table and launches nothing; the first run() of each capture puts the
    copy at the head of the graph, so every layer of every replay reads the
    latest plan, and so does what the engine captured before that run()
    (here a read of the fixed page table, as an engine's append makes). A
    second graph captured later, and eager runs between replays, read it
    too."""
    import torch
    gen = torch.Generator().manual_seed(41)
    max_batch, pool, layers = 12, 1024, 3
    kvs = [torch.randn(pool, 2, PAGE, HKV, D, generator=gen).to(torch.bfloat16).cuda() for _ in range(layers)]
    bufs = (torch.zeros(max_batch + 1, dtype=torch.int32, device="cuda"),
            torch.zeros(pool, dtype=torch.int32, device="cuda"),
            torch.zeros(max_batch, dtype=torch.int32, device="cuda"))
    w = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(torch.empty(128 << 20, dtype=torch.uint8, device="cuda"),
                                                         *bufs)
    eager = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(128 << 20, dtype=torch.uint8, device="cuda"))
    qs = [torch.zeros(max_batch, HQ, D, dtype=torch.bfloat16, device="cuda") for _ in range(layers)]
    outs = [torch.zeros_like(q) for q in qs]
    seen = torch.zeros_like(bufs[1])  # the engine's read of the fixed page table, before the first run()

    def plan(wrapper, table):
        # The page table as a temporary: a deferred copy must keep it.
        wrapper.plan(table[0], table[1].cuda(), table[2], HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)

    def check(batch, table, which, reader=False):
        if reader:
            n = int(table[0][-1])
            assert torch.equal(seen[:n].cpu(), table[1]), "a node before the first run() read a stale page table"
        plan(eager, table)
        for i in which:
            want = eager.run(qs[i][:batch], kvs[i])
            torch.testing.assert_close(outs[i][:batch].float(), want.float(), atol=1e-3, rtol=1e-3)

    def new_step(batch):
        table = random_plan(torch, batch, 1, gen, pool)
        plan(w, table)
        for q, o in zip(qs, outs):
            q.copy_(torch.randn(max_batch, HQ, D, generator=gen).to(torch.bfloat16))
            o.fill_(float("nan"))
        return table

    table = new_step(max_batch)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for q, kv, o in zip(qs, kvs, outs):  # the warm-up
            w.run(q, kv, out=o)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            seen.copy_(bufs[1])
            for q, kv, o in zip(qs, kvs, outs):
                w.run(q, kv, out=o)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    check(max_batch, table, range(layers))   # the warm-up's outputs
    assert w._copy_table is not None, "graph mode defers the plan's copies to run()"
    for step, batch in enumerate((max_batch, 3, 7, 1, 5, max_batch, 2)):
        table = new_step(batch)
        assert w._copy_pending, "plan() left its copies in the table"
        if step == 3:  # a second graph, of one layer, captured after a plan
            with torch.cuda.stream(s):
                g2 = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g2):
                    w.run(qs[0], kvs[0], out=outs[0])
            torch.cuda.synchronize()
        if step >= 3 and step % 2 == 0:
            g2.replay()
            torch.cuda.synchronize()
            check(batch, table, [0])
            table = new_step(batch)
        if step == 5:  # eager runs between replays, twice after one plan
            for _ in range(2):
                for q, kv, o in zip(qs, kvs, outs):
                    w.run(q, kv, out=o)
            torch.cuda.synchronize()
            check(batch, table, range(layers))
            table = new_step(batch)
        g.replay()
        torch.cuda.synchronize()
        check(batch, table, range(layers), reader=True)


@pytest.mark.gpu
def test_gpu_back_to_back_replays_read_their_own_plans():
    """plan() rewrites the copy table while the last replay may still be
    queued: it waits on the fence the replay's copy records, so each replay
    copies its own step's plan. Ten steps queued without a synchronize,
    each replay's output copied aside, checked at the end."""
    import torch
    gen = torch.Generator().manual_seed(43)
    max_batch, pool = 8, 2048   # up to 8 requests of 250 pages
    kv = torch.randn(pool, 2, PAGE, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    bufs = (torch.zeros(max_batch + 1, dtype=torch.int32, device="cuda"),
            torch.zeros(pool, dtype=torch.int32, device="cuda"),
            torch.zeros(max_batch, dtype=torch.int32, device="cuda"))
    w = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"),
                                                         *bufs)
    q = torch.randn(max_batch, HQ, D, generator=gen).to(torch.bfloat16).cuda()
    out = torch.zeros_like(q)
    tables = [random_plan(torch, 1 + i % max_batch, 1, gen, pool, max_len=4000) for i in range(10)]
    plan = lambda t: w.plan(t[0], t[1].cuda(), t[2], HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    plan(tables[0])
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        w.run(q, kv, out=out)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            w.run(q, kv, out=out)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    results = []
    for t in tables:
        plan(t)
        assert w._copy_pending, "once captured, plan() leaves its copies to the graph"
        g.replay()
        results.append(out.clone())
    torch.cuda.synchronize()
    eager = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    for t, got in zip(tables, results):
        batch = len(t[2])
        eager.plan(t[0], t[1].cuda(), t[2], HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
        torch.testing.assert_close(got[:batch].float(), eager.run(q[:batch], kv).float(), atol=1e-3, rtol=1e-3)
