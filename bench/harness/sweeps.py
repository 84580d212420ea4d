"""The benchmark's sweeps, for its line plots: decode bandwidth against KV
length and against batch skew, prefill TFLOP/s against sequence length and
head dim. Each point is an ordinary workload (workloads.py), so it is timed
and checked against the float32 reference exactly like D1-P3; attn runs
beside SDPA on cuDNN, the strongest PyTorch peer on the fixed workloads
(FlexAttention compiles per shape, too slow for a sweep). Importable without
torch (report.py reads SWEEPS)."""

BATCH = 64
DECODE_KV_LENS = [256, 512, 1024, 2048, 4096, 8192, 16384]
# Share of the batch's 64 x 2048 tokens held by 4 of its 64 requests
# (1/16: uniform, D1; D3's 32768/512 split is about 0.8).
SKEW_SHARES = [1 / 16, 0.25, 0.5, 0.75, 0.9]
PREFILL_LENS = [1024, 2048, 4096, 8192, 16384]
PREFILL_HEAD_DIMS = [64, 128, 256]
PEER_PREFIX = "sdpa-cudnn"


def skewed(share, total=BATCH * 2048, long_requests=4):
    """Lengths of BATCH requests where `long_requests` of them (spread
    evenly) hold `share` of `total` tokens."""
    page = 16  # workloads.PAGE
    long = int(total * share / long_requests) // page * page
    short = (total - long_requests * long) // (BATCH - long_requests)
    lens = [short] * BATCH
    for i in range(long_requests):
        lens[i * BATCH // long_requests] = long
    return lens


def points():
    """(sweep, x, builder) for every point; builders allocate lazily."""
    import workloads
    for n in DECODE_KV_LENS:
        yield "decode-kv-len", n, lambda n=n: workloads.decode(f"kv{n}", [n] * BATCH)
    for share in SKEW_SHARES:
        yield "decode-skew", share, lambda s=share: workloads.decode(
            f"skew{s:.2f}", skewed(s))
    for n in PREFILL_LENS:
        yield "prefill-seq-len", n, lambda n=n: workloads.prefill(
            f"len{n}", [n], paged=False)
    for d in PREFILL_HEAD_DIMS:
        yield "prefill-head-dim", d, lambda d=d: workloads.prefill(
            f"d{d}", [8192], head_dim=d, paged=False)


SWEEPS = {
    "decode-kv-len": ("KV length per request (batch 64)", "GBps", "GB/s", "decode-vs-kv-len.png"),
    "decode-skew": ("share of the tokens in 4 of 64 requests (64 x 2048 tokens)", "GBps", "GB/s",
                    "decode-vs-skew.png"),
    "prefill-seq-len": ("causal sequence length (one request, d128)", "TFLOPs", "TFLOP/s",
                        "prefill-vs-seq-len.png"),
    "prefill-head-dim": ("head dim (one causal request of 8192)", "TFLOPs", "TFLOP/s",
                         "prefill-vs-head-dim.png"),
}
