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
fill_) for scale. Nothing is checked: read the table.
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


if __name__ == "__main__":
    main()
