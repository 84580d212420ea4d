#!/usr/bin/env python3
"""Runs Llama-3-8B attention through attn on the GPU and checks it against a
float32 PyTorch reference: a decode step over a paged cache with ragged
lengths, and a causal prefill of new prompts into pages. `make demo` runs it
when the machine has a GPU and PyTorch; it prints one line per check and
exits non-zero on a mismatch."""

import math
import sys

import torch

import attn

HQ, HKV, D, PAGE = 32, 8, 128, 16


def paged_batch(lens, gen):
    npages = [(n + PAGE - 1) // PAGE for n in lens]
    pool = sum(npages) + 5
    perm = torch.randperm(pool, generator=gen)[:sum(npages)].int()
    indptr = torch.tensor([0] + list(torch.tensor(npages).cumsum(0)), dtype=torch.int32)
    last = torch.tensor([n - (p - 1) * PAGE for n, p in zip(lens, npages)], dtype=torch.int32)
    kv = torch.randn(pool, 2, PAGE, HKV, D, generator=gen).to(torch.bfloat16).cuda()
    return kv, indptr, perm, last


def reference(q, kv, indptr, indices, lens, qo_lens):
    out, row = [], 0
    for b, (n, qo) in enumerate(zip(lens, qo_lens)):
        pages = indices[indptr[b]:indptr[b + 1]].long().cuda()
        k = kv[pages, 0].reshape(-1, HKV, D)[:n].float().repeat_interleave(HQ // HKV, 1)
        v = kv[pages, 1].reshape(-1, HKV, D)[:n].float().repeat_interleave(HQ // HKV, 1)
        s = torch.einsum("qhd,khd->hqk", q[row:row + qo].float(), k) / math.sqrt(D)
        pos = n - qo + torch.arange(qo, device="cuda")
        s = s.masked_fill(torch.arange(n, device="cuda")[None, :] > pos[:, None], float("-inf"))
        out.append(torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v))
        row += qo
    return torch.cat(out)


def check(name, out, ref):
    err = float((out.float() - ref).norm() / ref.norm())
    ok = math.isfinite(err) and err < 2e-2
    print(f"  {name:34s} relative error {err:.1e}  {'ok' if ok else 'WRONG'}")
    return ok


def main():
    gen = torch.Generator().manual_seed(0)
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    ok = True

    lens = [2048, 17, 1, 700, 4096, 333, 16, 1025]
    kv, indptr, indices, last = paged_batch(lens, gen)
    q = torch.randn(len(lens), HQ, D, generator=gen).to(torch.bfloat16).cuda()
    decode = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
    decode.plan(indptr, indices.cuda(), last, HQ, HKV, D, PAGE, q_data_type=torch.bfloat16)
    ok &= check("decode, 8 ragged requests", decode.run(q, kv),
                reference(q, kv, indptr, indices, lens, [1] * len(lens)))

    qo_lens, kv_lens = [512, 100, 1], [512, 900, 77]  # prompts, an append, a decode
    kv, indptr, indices, last = paged_batch(kv_lens, gen)
    q = torch.randn(sum(qo_lens), HQ, D, generator=gen).to(torch.bfloat16).cuda()
    qo_indptr = torch.tensor([0] + list(torch.tensor(qo_lens).cumsum(0)), dtype=torch.int32)
    prefill = attn.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD")
    prefill.plan(qo_indptr, indptr, indices.cuda(), last, HQ, HKV, D, PAGE, causal=True,
                 q_data_type=torch.bfloat16)
    ok &= check("causal prefill, paged, mixed lengths", prefill.run(q, kv),
                reference(q, kv, indptr, indices, kv_lens, qo_lens))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
