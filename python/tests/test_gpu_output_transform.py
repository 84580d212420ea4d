"""GPU: a variant's output transform on split-KV decode (issue #4).

Partial slots of a split tile hold untransformed outputs; the transform must
apply once, to the merged row (the merge kernel carries the variant's hook
and parameters), and to Direct items in the attention kernel. The transform
here is non-linear and reads its parameter and the query position:
``o -> tanh(gain * o + q_pos / 65536)``, so applying it per partial, not at
all, or with the wrong position each give a visibly different answer.

Checked against a float32 reference, with a batch of one long request (the
planner splits it over the whole GPU: D4's shape) and short ones (kept
whole), in plain and CUDA-graph mode. Outputs are poisoned with NaN first.

Skipped without torch, CUDA or a GPU. On a runtime-only build the kernels
come from ATTN_CACHE_DIR; precompile them with
``python3 python/tests/test_gpu_output_transform.py --precompile DIR``.
"""

import math
import os
import sys

import pytest

import attn

HQ, HKV, D, PAGE = 32, 8, 128, 16
GAIN = 24.0

VARIANT = """
attn.variant @tanh_out(gain : f32) {
  attn.hook output_transform(%o : f32, %dim : i32, %q_pos : i32, %head : i32) {
    %g = attn.param "gain" : f32
    %x = arith.mulf %o, %g : f32
    %p = arith.sitofp %q_pos : i32 to f32
    %s = arith.constant 1.52587890625e-05 : f32
    %b = arith.mulf %p, %s : f32
    %y = arith.addf %x, %b : f32
    %t = math.tanh %y : f32
    attn.yield %t : f32
  }
}
"""


def transform(torch, o, q_pos):
    """The hook in float32: o [..., D], q_pos broadcastable to o[..., :1]."""
    return torch.tanh(GAIN * o + q_pos / 65536.0)


def reference(torch, q, k_pages, v_pages, page_table, kv_lens, sm_scale):
    """Decode attention in float32, then the transform; LSE base 2 (untransformed)."""
    outs, lses = [], []
    group = HQ // HKV
    for b, (pages, n) in enumerate(zip(page_table, kv_lens)):
        k = k_pages[pages].reshape(-1, HKV, D)[:n].float()   # [n, Hkv, D]
        v = v_pages[pages].reshape(-1, HKV, D)[:n].float()
        qb = q[b].float().view(HKV, group, D)                 # [Hkv, G, D]
        s = torch.einsum("hgd,nhd->hgn", qb, k) * sm_scale
        lse = torch.logsumexp(s, dim=-1) / math.log(2.0)
        o = torch.einsum("hgn,nhd->hgd", torch.softmax(s, dim=-1), v)
        outs.append(transform(torch, o.reshape(HQ, D), float(n - 1)))
        lses.append(lse.reshape(HQ))
    return torch.stack(outs), torch.stack(lses)


def make_batch(torch, kv_lens, seed):
    gen = torch.Generator().manual_seed(seed)
    pages_per = [-(-n // PAGE) for n in kv_lens]
    total = sum(pages_per)
    perm = torch.randperm(total, generator=gen)
    table, start = [], 0
    for p in pages_per:
        table.append(perm[start:start + p])
        start += p
    dt = torch.bfloat16
    k = (torch.randn(total, PAGE, HKV, D, generator=gen) * 0.5).to(dt)
    # A per-dimension offset in V keeps merged outputs away from 0, where
    # tanh is nearly linear.
    v = (torch.randn(total, PAGE, HKV, D, generator=gen) + torch.linspace(-0.1, 0.1, D)).to(dt)
    q = torch.randn(len(kv_lens), HQ, D, generator=gen).to(dt)
    indptr = torch.tensor([0] + list(torch.cumsum(torch.tensor(pages_per), 0)), dtype=torch.int32)
    indices = torch.cat(table).to(torch.int32)
    last = torch.tensor([n - (p - 1) * PAGE for n, p in zip(kv_lens, pages_per)], dtype=torch.int32)
    return q, k, v, table, indptr, indices, last


def variant():
    return attn.Variant(VARIANT)


def plan_kwargs():
    return dict(q_data_type="bfloat16", variant=variant(), variant_params={"gain": GAIN})


# One request over the whole GPU (split into ~66 chunks per KV head, as D4),
# plus short ones the planner keeps whole (Direct items).
KV_LENS = [65536 + 5, 37, 1000]


@pytest.mark.gpu
@pytest.mark.parametrize("graph", [False, True], ids=["plain", "cuda_graph"])
def test_decode_output_transform_split(graph):
    import torch
    q, k, v, table, indptr, indices, last = make_batch(torch, KV_LENS, seed=4)
    q, k, v = q.cuda(), k.cuda(), v.cuda()
    d_indices = indices.cuda()
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    batch = len(KV_LENS)
    if graph:
        bufs = dict(paged_kv_indptr_buffer=torch.empty(batch + 1, dtype=torch.int32, device="cuda"),
                    paged_kv_indices_buffer=torch.empty(indices.numel(), dtype=torch.int32, device="cuda"),
                    paged_kv_last_page_len_buffer=torch.empty(batch, dtype=torch.int32, device="cuda"))
        w = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_cuda_graph=True, **bufs)
    else:
        w = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
    w.plan(indptr, d_indices, last, HQ, HKV, D, PAGE, **plan_kwargs())
    assert w._planned.summary["num_merge_units"] > 0, "the long request was not split"
    out = torch.full_like(q, float("nan"))
    lse = torch.full((batch, HQ), float("nan"), device="cuda")
    if graph:
        w.run(q, (k, v), out=out, lse=lse, return_lse=True)   # warm-up outside capture
        torch.cuda.synchronize()
        out.fill_(float("nan"))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            w.run(q, (k, v), out=out, lse=lse, return_lse=True)
        out.fill_(float("nan"))
        lse.fill_(float("nan"))
        g.replay()
    else:
        w.run(q, (k, v), out=out, lse=lse, return_lse=True)
    torch.cuda.synchronize()
    ro, rl = reference(torch, q.cpu(), k.cpu(), v.cpu(), table, KV_LENS, 1.0 / math.sqrt(D))
    o = out.float().cpu()
    torch.testing.assert_close(o, ro, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(lse.cpu(), rl, atol=1e-2, rtol=1e-3)


def precompile(out, archs=("sm_90a", "sm_90")):
    """Compiles this test's decode kernels (for H200's chips) into the kernel cache `out`."""
    from attn.cache import KernelCache
    from attn.compiler import get_all_kernels
    from attn.paged import make_spec
    spec, _ = make_spec(num_qo_heads=HQ, num_kv_heads=HKV, head_dim=D, page_size=PAGE, dtype="bf16",
                        kv_layout="NHD", query_rows=1, variant=variant(), variant_params={"gain": GAIN})
    from attn.compiler import compiler_version
    # `out` is a kernel pack (attn.precompile's): write into it as a pack,
    # and add the entries to its digest list.
    cache, produced = KernelCache(out, writes_pack=True), set()
    for arch in archs:
        contracts, kernels = get_all_kernels(spec, arch, cache=cache)
        produced |= {os.path.basename(k.path) for k in [contracts] + kernels if k.path}
        print(f"precompiled {spec} for {arch} -> {out} ({contracts.source})")
    cache.write_pack(produced, compiler_version())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--precompile":
        precompile(sys.argv[2])
    else:
        sys.exit("usage: test_gpu_output_transform.py --precompile DIR")
