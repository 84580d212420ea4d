#!/usr/bin/env python3
"""What one asynchronous copy costs the host (issue #13, a cheap plan()).

    python3 bench/harness/copy_cost.py [--calls 4000]

A decode plan() queues a few copies every step: the flat plan and the index
arrays from pinned host memory, and in CUDA-graph mode the page table device
to device into the graph's fixed buffer. Graph mode's plan() costs ~8 us more
than eager's even at one request, with the planner's time the same, so this
times each kind of call on its own: the median host time of one call (the
driver call through ctypes, ~0.3 us of it Python), on PyTorch's current
stream (the legacy default stream unless one is set) and on a non-blocking
stream of its own, for a few sizes. Also a small kernel launch (PyTorch's
fill_) for scale, and a graph-mode plan()'s four copies queued one by one
against the same four as one cuMemcpyBatchAsync and as one CUDA graph
(launched as captured, and after its memcpy nodes are set again, as a new
batch would need). Nothing is checked:
read the table.
"""

import argparse
import ctypes
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=4000)
    a = ap.parse_args()
    cuda = ctypes.CDLL("libcuda.so.1")
    for name in ("cuMemcpyDtoDAsync_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyAsync", "cuStreamCreate"):
        getattr(cuda, name).restype = ctypes.c_int
    u64, sz = ctypes.c_uint64, ctypes.c_size_t
    torch.cuda.init()
    dev = torch.device("cuda")
    src = torch.zeros(1 << 20, dtype=torch.int32, device=dev)
    dst = torch.zeros(1 << 20, dtype=torch.int32, device=dev)
    pinned = torch.zeros(1 << 16, dtype=torch.int32, pin_memory=True)
    own = ctypes.c_void_p()
    assert cuda.cuStreamCreate(ctypes.byref(own), 1) == 0  # CU_STREAM_NON_BLOCKING
    streams = {"current": torch.cuda.current_stream().cuda_stream, "own": own.value or 0}

    def median_us(fn):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t = []
        for i in range(a.calls):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
            if i % 256 == 255:
                torch.cuda.synchronize()  # keep the queue short
        torch.cuda.synchronize()
        return 1e6 * statistics.median(t)

    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}; median host us of one call "
          f"({a.calls} calls)")
    print(f"{'call':<44} {'current stream':>15} {'own stream':>11}")
    rows = []
    for nbytes in (4, 1024, 172 * 1024):
        rows.append((f"cuMemcpyDtoDAsync {nbytes} B", lambda s, n=nbytes: cuda.cuMemcpyDtoDAsync_v2(
            u64(dst.data_ptr()), u64(src.data_ptr()), sz(n), ctypes.c_void_p(s))))
        rows.append((f"cuMemcpyAsync (device to device) {nbytes} B", lambda s, n=nbytes: cuda.cuMemcpyAsync(
            u64(dst.data_ptr()), u64(src.data_ptr()), sz(n), ctypes.c_void_p(s))))
    for nbytes in (4, 1024, 64 * 1024):
        rows.append((f"cuMemcpyHtoDAsync pinned {nbytes} B", lambda s, n=nbytes: cuda.cuMemcpyHtoDAsync_v2(
            u64(dst.data_ptr()), ctypes.c_void_p(pinned.data_ptr()), sz(n), ctypes.c_void_p(s))))
    small = dst[:256]
    rows.append(("torch fill_ (a kernel launch), 1 KB", None))
    for label, fn in rows:
        if fn is None:
            us = median_us(lambda: small.fill_(1))
            print(f"{label:<44} {us:>15.2f} {'':>11}", flush=True)
            continue
        cur = median_us(lambda: fn(streams["current"]))
        mine = median_us(lambda: fn(streams["own"]))
        print(f"{label:<44} {cur:>15.2f} {mine:>11.2f}", flush=True)
    # The rest of a plan call's driver work: the upload fence (an event's record, then a wait
    # on it the next step, by then complete) and the capture check.
    event = ctypes.c_void_p()
    assert cuda.cuEventCreate(ctypes.byref(event), 2) == 0  # CU_EVENT_DISABLE_TIMING
    status = ctypes.c_int()
    # A fence without the event: the stream writes a word of pinned host memory after the copy
    # (cuStreamWriteValue32), and the host reads it (a load, no driver call).
    word = torch.zeros(1, dtype=torch.int32, pin_memory=True)
    cuda.cuStreamWriteValue32_v2.restype = ctypes.c_int
    write = (lambda: cuda.cuStreamWriteValue32_v2(ctypes.c_void_p(streams["current"]), u64(word.data_ptr()),
                                                  ctypes.c_uint32(1), ctypes.c_uint(0)))
    if write() != 0:
        write = None
    torch.cuda.synchronize()
    value = ctypes.c_int32.from_address(word.data_ptr())
    for label, fn in (("cuEventRecord", lambda: cuda.cuEventRecord(event, ctypes.c_void_p(streams["current"]))),
                      ("cuEventSynchronize (complete)", lambda: cuda.cuEventSynchronize(event)),
                      ("cuEventQuery (complete)", lambda: cuda.cuEventQuery(event)),
                      ("cuStreamWriteValue32 to pinned host memory", write),
                      ("the written word read on the host", lambda: value.value),
                      ("cuStreamIsCapturing", lambda: cuda.cuStreamIsCapturing(
                          ctypes.c_void_p(streams["current"]), ctypes.byref(status)))):
        print(f"{label:<44} {median_us(fn) if fn else float('nan'):>15.2f}", flush=True)
    for label, us in graph_of_copies(cuda, median_us, streams["current"], streams["own"]):
        print(f"{label:<44} {us:>15.2f}", flush=True)


class Memcpy3D(ctypes.Structure):
    """CUDA_MEMCPY3D (cuda.h)."""
    _fields_ = [(n, t) for n, t in (
        ("srcXInBytes", ctypes.c_size_t), ("srcY", ctypes.c_size_t), ("srcZ", ctypes.c_size_t),
        ("srcLOD", ctypes.c_size_t), ("srcMemoryType", ctypes.c_int), ("srcHost", ctypes.c_void_p),
        ("srcDevice", ctypes.c_uint64), ("srcArray", ctypes.c_void_p), ("reserved0", ctypes.c_void_p),
        ("srcPitch", ctypes.c_size_t), ("srcHeight", ctypes.c_size_t),
        ("dstXInBytes", ctypes.c_size_t), ("dstY", ctypes.c_size_t), ("dstZ", ctypes.c_size_t),
        ("dstLOD", ctypes.c_size_t), ("dstMemoryType", ctypes.c_int), ("dstHost", ctypes.c_void_p),
        ("dstDevice", ctypes.c_uint64), ("dstArray", ctypes.c_void_p), ("reserved1", ctypes.c_void_p),
        ("dstPitch", ctypes.c_size_t), ("dstHeight", ctypes.c_size_t),
        ("WidthInBytes", ctypes.c_size_t), ("Height", ctypes.c_size_t), ("Depth", ctypes.c_size_t))]


class MemcpyAttrs(ctypes.Structure):
    """CUmemcpyAttributes: source access order, two location hints, flags."""
    _fields_ = [("srcAccessOrder", ctypes.c_int), ("srcType", ctypes.c_int), ("srcId", ctypes.c_int),
                ("dstType", ctypes.c_int), ("dstId", ctypes.c_int), ("flags", ctypes.c_uint)]

    def __init__(self, order):
        super().__init__(order, 0, 0, 0, 0, 0)


def graph_of_copies(cuda, median_us, stream, own):
    """A graph-mode plan()'s four copies (the plan, kv_indptr, last_page_len
    from pinned memory, the page table device to device) queued one by one,
    against the same copies as the memcpy nodes of one CUDA graph: launched
    as captured, and launched after each node's size is set again (what a
    plan() of a new batch would have to do)."""
    u64, sz, vp = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
    sizes = [80 * 1024, 1028, 1024, 172 * 1024]
    hosts = [torch.zeros(n // 4 + 1, dtype=torch.int32, pin_memory=True) for n in sizes[:3]]
    devs = [torch.zeros(n // 4 + 1, dtype=torch.int32, device="cuda") for n in sizes]
    table = torch.zeros(sizes[3] // 4 + 1, dtype=torch.int32, device="cuda")

    def separate():
        for h, d, n in zip(hosts, devs, sizes):
            cuda.cuMemcpyHtoDAsync_v2(u64(d.data_ptr()), vp(h.data_ptr()), sz(n), vp(stream))
        cuda.cuMemcpyDtoDAsync_v2(u64(devs[3].data_ptr()), u64(table.data_ptr()), sz(sizes[3]), vp(stream))

    rows = [("4 copies queued one by one", median_us(separate))]
    # The same four as one cuMemcpyBatchAsync (not on the legacy NULL stream: the per-thread
    # default stream, which orders itself with it, or a stream of the caller's), the host
    # sources read in stream order or during the call (then nothing later reads them).
    batch = getattr(cuda, "cuMemcpyBatchAsync_v2", None)
    if batch is not None:
        batch.restype = ctypes.c_int
        n = len(sizes)
        dsts = (u64 * n)(*[d.data_ptr() for d in devs])
        srcs = (u64 * n)(*([h.data_ptr() for h in hosts] + [table.data_ptr()]))
        lens = (sz * n)(*sizes)
        for label, orders, strm in (
                ("batch, per-thread stream, all in stream order", (1, 1), 2),
                ("batch, per-thread stream, host read in the call", (2, 1), 2),
                ("batch, plan in order, indptrs in the call", (1, 2, 1), 2),
                ("batch, a non-blocking stream of its own", (2, 1), own),
                ("batch, the legacy NULL stream", (1, 1), 0)):
            if len(orders) == 2:   # host copies, then the device one
                attrs = (MemcpyAttrs * 2)(MemcpyAttrs(orders[0]), MemcpyAttrs(orders[1]))
                idxs = (sz * 2)(0, 3)
            else:                  # the plan, the two indptrs, the device one
                attrs = (MemcpyAttrs * 3)(*[MemcpyAttrs(o) for o in orders])
                idxs = (sz * 3)(0, 1, 3)
            k = len(attrs)
            rc = batch(dsts, srcs, lens, sz(n), attrs, idxs, sz(k), vp(strm))
            if rc != 0:
                rows.append((f"{label}: refused (CUresult {rc})", float("nan")))
                continue
            rows.append((label, median_us(lambda a=attrs, i=idxs, k=k, st=strm: batch(
                dsts, srcs, lens, sz(n), a, i, sz(k), vp(st)))))
    try:
        g = torch.cuda.CUDAGraph(keep_graph=True)
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            g.capture_begin()
            for h, d, n in zip(hosts, devs, sizes):
                d.view(torch.uint8)[:n].copy_(h.view(torch.uint8)[:n], non_blocking=True)
            devs[3].view(torch.uint8)[:sizes[3]].copy_(table.view(torch.uint8)[:sizes[3]], non_blocking=True)
            g.capture_end()
        g.instantiate()
        graph, exe = vp(g.raw_cuda_graph()), vp(g.raw_cuda_graph_exec())
        cuda.cuGraphLaunch.restype = ctypes.c_int
        rows.append(("the 4 as one CUDA graph: cuGraphLaunch", median_us(lambda: cuda.cuGraphLaunch(exe, vp(stream)))))
        count = sz(0)
        assert cuda.cuGraphGetNodes(graph, None, ctypes.byref(count)) == 0
        nodes = (vp * count.value)()
        assert cuda.cuGraphGetNodes(graph, nodes, ctypes.byref(count)) == 0
        params, ctx = [], vp()
        assert cuda.cuCtxGetCurrent(ctypes.byref(ctx)) == 0
        for node in nodes:
            kind = ctypes.c_int()
            cuda.cuGraphNodeGetType(vp(node), ctypes.byref(kind))
            if kind.value == 1:  # CU_GRAPH_NODE_TYPE_MEMCPY
                p = Memcpy3D()
                assert cuda.cuGraphMemcpyNodeGetParams(vp(node), ctypes.byref(p)) == 0
                params.append((vp(node), p))

        def updated():
            for node, p in params:
                cuda.cuGraphExecMemcpyNodeSetParams(exe, node, ctypes.byref(p), ctx)
            cuda.cuGraphLaunch(exe, vp(stream))

        rows.append((f"  after setting its {len(params)} memcpy nodes again", median_us(updated)))
        # What a new batch changes: the plan's size and the page table's source and size.
        two = [params[0], params[-1]] if len(params) >= 2 else params

        def updated_two():
            for node, p in two:
                cuda.cuGraphExecMemcpyNodeSetParams(exe, node, ctypes.byref(p), ctx)
            cuda.cuGraphLaunch(exe, vp(stream))

        rows.append((f"  after setting {len(two)} of them again", median_us(updated_two)))
    except Exception as e:  # report, do not fail the table above
        rows.append((f"CUDA graph rows failed: {type(e).__name__}: {e}", float("nan")))
    return rows


if __name__ == "__main__":
    main()
