#!/usr/bin/env python3
"""A real (small, randomly initialised) transformers model served through attn.

A continuous-batching loop over a paged KV cache: requests with different
prompt lengths arrive over time (some join while others are decoding); each
step admits what fits (pages, batch slots), prefills the new requests through
``attn.BatchPrefillWithPagedKVCacheWrapper`` (their K/V written first by
``attn.append_paged_kv_cache``), then decodes every running request through
``attn.BatchDecodeWithPagedKVCacheWrapper`` in CUDA-graph mode: the whole
decode forward of the model (all layers) is captured once for a fixed batch of
``--max-batch`` rows; each step plans on the host (outside the graph), copies
the step's token ids and positions into the static inputs, pads the batch to
the captured size with dummy rows that read and write a reserved trash page,
and replays. A request's pages are allocated as its sequence grows and freed
when it has produced ``max_new_tokens``.

The model is a transformers model built from a config with random weights (no
downloads), run with ``use_cache=False`` on a flattened ragged batch
(``input_ids`` ``[1, total_tokens]`` with explicit ``position_ids``); its
attention is routed to attn by registering an attention function with
``transformers.AttentionInterface.register("attn_paged", fn)`` and
``model.set_attn_implementation("attn_paged")``. The function appends the
step's new keys/values to layer ``module.layer_idx``'s paged cache and runs
the wrapper planned for the layer's kind (full or sliding window), with
``sm_scale=module.scaling`` and ``logits_soft_cap=module.attn_logit_softcapping``.
transformers builds no mask for an implementation it does not know (the
attention function does the masking), so the forward has no host sync and can
be captured.

Models (``--model``, or ``--all``):

- ``llama3``: Llama-3 style GQA, 8 query / 2 KV heads (group 4), head_dim 128,
  RoPE theta 5e5, 3 layers.
- ``qwen2``: Qwen2, 14 query / 2 KV heads (group 7), head_dim 64, q/k/v bias,
  2 layers.
- ``gemma2``: Gemma-2, 4 query / 2 KV heads, head_dim 256, attention logit
  soft-capping 50, final logit soft-capping 30, sliding window 20 on the even
  layers (transformers' ``layer_types``), 4 layers. transformers keeps key j
  for query i when ``i - 20 < j <= i``, which is attn's ``window_left = 19``.

Correctness: every request's greedy tokens are compared with transformers'
own ``model.generate(do_sample=False)`` on the prompt alone (same weights,
same dtype; SDPA attention, Gemma-2 eager since SDPA has no soft-capping). A
divergence passes only where the reference's top-2 logits at that step are
within bf16 rounding: the reference's logit of our token is at most
``--tie-ulps`` bf16 ulps (of the top logit; default 4) below its best. Two
correct bf16 paths differ by 2-3 ulps in the logits here (the run prints the
largest difference over the agreeing steps), hence 4. Such a divergence is
printed with the step and the gap, and the rest of that request is not
compared (the sequences differ from there on). Anything else fails
(exit status 1).

Speed: the loop is run twice with the same requests; the second run is
timed (kernels loaded, graph captured) and reported as generated tokens per
second over the whole loop (scheduling, paging, plans, prefill and decode,
one host sync per step to read the tokens). Next to it: ``generate()`` one
request at a time (what the correctness check runs) and ``generate()`` of all
requests in one left-padded batch (same numbers of new tokens, the longest
``max_new_tokens``; its tokens are not compared, padding changes numerics).

Running it::

    # GPU machine (the kernels come from a precompiled cache: examples/serve_precompile.sh)
    ATTN_BUILD_DIR=build ATTN_CACHE_DIR=out/serve-kernels python3 examples/serve.py --all
    # any machine, CPU: the same loop with a pure-PyTorch paged attention
    python3 examples/serve.py --reference --device cpu --all

``--reference`` replaces attn's wrappers by a straightforward PyTorch paged
attention (gather the request's pages, softmax attention with the same
causal/window/soft-cap semantics) with the same plan/run calls; everything
else (paging, batching, positions, the comparison) is shared. On a machine
without CUDA the attn mode prints "skipped: no CUDA device" and exits 0.
``--no-graph`` runs the attn decode eagerly (no CUDA graph). ``ATTN_BUILD_DIR``
(if set) puts ``$ATTN_BUILD_DIR/python`` first on ``sys.path``.

Kernels attn needs (bf16, NHD, page size 16): decode and causal paged prefill
of 8/2 d=128 (llama3), 14/2 d=64 (qwen2), 4/2 d=256 with soft-cap, and the
same with soft-cap plus a sliding window (gemma2); examples/serve_precompile.sh
precompiles them.
"""

import argparse
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE_SIZE = 16

# name: (config class, config keywords, reference attention implementation)
MODELS = {
    "llama3": ("LlamaConfig", dict(vocab_size=1024, hidden_size=512, intermediate_size=1024, num_hidden_layers=3,
                                   num_attention_heads=8, num_key_value_heads=2, head_dim=128,
                                   rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
                                   max_position_embeddings=4096, tie_word_embeddings=False), "sdpa"),
    "qwen2": ("Qwen2Config", dict(vocab_size=1024, hidden_size=896, intermediate_size=1024, num_hidden_layers=2,
                                  num_attention_heads=14, num_key_value_heads=2,
                                  rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                                  max_position_embeddings=4096, tie_word_embeddings=True), "sdpa"),
    "gemma2": ("Gemma2Config", dict(vocab_size=1024, hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=256,
                                    query_pre_attn_scalar=256, sliding_window=20, attn_logit_softcapping=50.0,
                                    final_logit_softcapping=30.0, max_position_embeddings=4096), "eager"),
}

# (prompt length, max_new_tokens, arrival step): some arrive while others decode.
REQUESTS = [(7, 24, 0), (33, 16, 0), (18, 20, 0), (1, 12, 1), (48, 10, 3), (25, 22, 4), (12, 1, 4), (40, 18, 6),
            (5, 14, 9), (29, 8, 12)]


def import_attn():
    build = os.environ.get("ATTN_BUILD_DIR")
    if build and os.path.isdir(os.path.join(build, "python", "attn")):
        sys.path.insert(0, os.path.join(build, "python"))
    try:
        import attn
    except ImportError:
        sys.path.insert(0, os.path.join(HERE, "..", "python"))  # the sources: the pure-PyTorch helpers work
        import attn
    return attn


# ---------------------------------------------------------------------------------------------------------------
# Attention backends: the same plan()/run() calls on attn's wrappers or on a PyTorch reference.


class ReferencePagedAttention:
    """Pure PyTorch paged attention with the wrappers' plan/run: gathers each
    request's pages and runs float32 softmax attention (causal, bottom-right
    aligned; ``window_left``: keep key j for the query at p when
    ``p - window_left <= j``; soft-cap on the scaled logits)."""

    def __init__(self, page_size):
        self.page_size = page_size

    def plan(self, qo_indptr, kv_indptr, kv_indices, last_page_len, *, window_left, logits_soft_cap, sm_scale):
        self.qo, self.kv = list(qo_indptr), list(kv_indptr)
        self.idx = kv_indices.tolist()
        self.last = list(last_page_len)
        self.window_left, self.cap, self.scale = window_left, logits_soft_cap, sm_scale

    def run(self, q, kv_cache):
        import torch
        out = torch.zeros_like(q)
        hq, hkv = q.shape[1], kv_cache.shape[3]
        for b in range(len(self.last)):
            q0, q1 = self.qo[b], self.qo[b + 1]
            if q1 == q0:
                continue
            pages = self.idx[self.kv[b]:self.kv[b + 1]]
            kv_len = (len(pages) - 1) * self.page_size + self.last[b]
            kvp = kv_cache[torch.tensor(pages, device=kv_cache.device)]            # [n, 2, page, Hkv, D]
            k = kvp[:, 0].reshape(-1, hkv, kvp.shape[-1])[:kv_len].float()
            v = kvp[:, 1].reshape(-1, hkv, kvp.shape[-1])[:kv_len].float()
            k = k.repeat_interleave(hq // hkv, dim=1)
            v = v.repeat_interleave(hq // hkv, dim=1)
            qq = q[q0:q1].float()
            s = torch.einsum("qhd,khd->hqk", qq, k) * self.scale
            if self.cap:
                s = self.cap * torch.tanh(s / self.cap)
            p = torch.arange(kv_len - (q1 - q0), kv_len, device=q.device)[:, None]
            j = torch.arange(kv_len, device=q.device)[None, :]
            keep = j <= p
            if self.window_left >= 0:
                keep &= j >= p - self.window_left
            s = s.masked_fill(~keep, float("-inf"))
            out[q0:q1] = torch.einsum("hqk,khd->qhd", torch.softmax(s, dim=-1), v).to(q.dtype)
        return out


class AttnDecode:
    """attn's decode wrapper in CUDA-graph mode (fixed page-table buffers)."""

    def __init__(self, attn, torch, device, max_batch, max_pages, heads, window_left, cap, scale, dtype, graph):
        self.ws = torch.empty(256 << 20, dtype=torch.uint8, device=device)
        self.heads, self.window_left, self.cap, self.scale, self.dtype = heads, window_left, cap, scale, dtype
        self.indptr_buf = torch.zeros(max_batch + 1, dtype=torch.int32, device=device)
        self.indices_buf = torch.zeros(max_pages, dtype=torch.int32, device=device)
        self.last_buf = torch.zeros(max_batch, dtype=torch.int32, device=device)
        if graph:
            self.w = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(self.ws, self.indptr_buf, self.indices_buf,
                                                                      self.last_buf, "NHD")
        else:
            self.w = attn.BatchDecodeWithPagedKVCacheWrapper(self.ws, "NHD")

    def plan(self, qo_indptr, kv_indptr, kv_indices, last_page_len):
        hq, hkv, d = self.heads
        self.w.plan(kv_indptr, kv_indices, last_page_len, hq, hkv, d, PAGE_SIZE, window_left=self.window_left,
                    logits_soft_cap=self.cap, q_data_type=self.dtype, sm_scale=self.scale)

    def run(self, q, kv_cache):
        return self.w.run(q, kv_cache)


class AttnPrefill:
    """attn's causal prefill over the paged cache (eager: prefill is not captured)."""

    def __init__(self, attn, torch, device, heads, window_left, cap, scale, dtype):
        self.ws = torch.empty(256 << 20, dtype=torch.uint8, device=device)
        self.heads, self.window_left, self.cap, self.scale, self.dtype = heads, window_left, cap, scale, dtype
        self.w = attn.BatchPrefillWithPagedKVCacheWrapper(self.ws, "NHD")

    def plan(self, qo_indptr, kv_indptr, kv_indices, last_page_len):
        hq, hkv, d = self.heads
        self.w.plan(qo_indptr, kv_indptr, kv_indices, last_page_len, hq, hkv, d, PAGE_SIZE, causal=True,
                    window_left=self.window_left, logits_soft_cap=self.cap, sm_scale=self.scale,
                    q_data_type=self.dtype)

    def run(self, q, kv_cache):
        return self.w.run(q, kv_cache)


class ReferenceKind:
    def __init__(self, window_left, cap, scale):
        self.r = ReferencePagedAttention(PAGE_SIZE)
        self.window_left, self.cap, self.scale = window_left, cap, scale

    def plan(self, qo_indptr, kv_indptr, kv_indices, last_page_len):
        self.r.plan(qo_indptr, kv_indptr, kv_indices, last_page_len, window_left=self.window_left,
                    logits_soft_cap=self.cap, sm_scale=self.scale)

    def run(self, q, kv_cache):
        return self.r.run(q, kv_cache)


# ---------------------------------------------------------------------------------------------------------------
# The attention function transformers calls, and the step context it reads.


class StepContext:
    """What the attention function needs during one forward: the per-layer
    caches, where this forward's tokens go (append tables), and the planned
    attention of each layer kind."""
    caches = None
    kinds = None          # {"full": backend, "sliding": backend}: planned for this forward
    batch_indices = positions = app_indices = app_indptr = app_last = None
    expect = None         # {"full": (window, cap, scale), ...}: what the plans were made with


CTX = StepContext()


def paged_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, sliding_window=None,
                    softcap=None, **kwargs):
    """transformers' attention contract (eager_attention_forward): query
    ``[B, Hq, S, D]``, key/value ``[B, Hkv, S, D]`` (B = 1 here: the ragged
    batch is flattened); returns ``([B, S, Hq, D], None)``."""
    kind = "sliding" if sliding_window else "full"
    want = CTX.expect[kind]
    if (sliding_window, softcap, scaling) != want:
        raise RuntimeError(f"layer {module.layer_idx}: attention asks window={sliding_window} softcap={softcap} "
                           f"scaling={scaling}, the plan has {want}")
    q = query[0].transpose(0, 1).contiguous()          # [S, Hq, D]
    k = key[0].transpose(0, 1).contiguous()            # [S, Hkv, D]
    v = value[0].transpose(0, 1).contiguous()
    cache = CTX.caches[module.layer_idx]
    CTX.append(k, v, CTX.batch_indices, CTX.positions, cache, CTX.app_indices, CTX.app_indptr, CTX.app_last)
    o = CTX.kinds[kind].run(q, cache)                  # [S, Hq, D]
    return o.unsqueeze(0), None


def local_append_paged_kv_cache(k, v, batch_indices, positions, cache, kv_indices, kv_indptr, last, layout="NHD"):
    """Stand-in for attn.append_paged_kv_cache (same contract) if attn cannot be imported."""
    b, pos = batch_indices.long(), positions.long()
    page = kv_indices.long()[kv_indptr.long()[b] + pos // PAGE_SIZE]
    cache[page, 0, pos % PAGE_SIZE] = k
    cache[page, 1, pos % PAGE_SIZE] = v


# ---------------------------------------------------------------------------------------------------------------
# The engine: model, paged cache, the serve loop.


class Request:
    def __init__(self, rid, prompt, max_new, arrival):
        self.rid, self.prompt, self.max_new, self.arrival = rid, prompt, max_new, arrival
        self.pages, self.out, self.seq_len, self.logits = [], [], 0, []

    def need_pages(self, n_tokens):
        return (n_tokens + PAGE_SIZE - 1) // PAGE_SIZE


class Engine:
    def __init__(self, torch, attn, model, cfg, device, dtype, backend, max_batch, num_pages, graph,
                 perturb_window=0):
        self.torch, self.attn, self.model, self.cfg = torch, attn, model, cfg
        self.device, self.dtype, self.backend, self.graph_mode = device, dtype, backend, graph
        self.max_batch, self.num_pages = max_batch, num_pages
        attn0 = model.model.layers[0].self_attn
        hq, hkv, d = cfg.num_attention_heads, cfg.num_key_value_heads, attn0.head_dim
        self.heads = (hq, hkv, d)
        scale = attn0.scaling
        cap = getattr(attn0, "attn_logit_softcapping", None)
        kinds = {}
        for layer in model.model.layers:
            a = layer.self_attn
            w = getattr(a, "sliding_window", None)
            kinds["sliding" if w else "full"] = (w, getattr(a, "attn_logit_softcapping", None), a.scaling)
        assert all(s == scale and c == cap for _, c, s in kinds.values()), kinds
        self.expect = kinds
        # transformers keeps key j for query i when i - W < j <= i: attn's window_left = W - 1.
        wl = {k: (w - 1 + perturb_window if w else -1) for k, (w, _, _) in kinds.items()}
        # Page 0 is the trash page the padding rows of the captured decode batch read and write.
        self.caches = [torch.zeros(num_pages, 2, PAGE_SIZE, hkv, d, dtype=dtype, device=device)
                       for _ in range(cfg.num_hidden_layers)]
        if backend == "attn":
            self.append = attn.append_paged_kv_cache
            self.prefill = {k: AttnPrefill(attn, torch, device, self.heads, wl[k], cap, scale, dtype) for k in kinds}
            self.decode = {k: AttnDecode(attn, torch, device, max_batch, num_pages + max_batch, self.heads, wl[k],
                                         cap, scale, dtype, graph) for k in kinds}
        else:
            self.append = attn.append_paged_kv_cache if attn is not None else local_append_paged_kv_cache
            self.prefill = {k: ReferenceKind(wl[k], cap, scale) for k in kinds}
            self.decode = {k: ReferenceKind(wl[k], cap, scale) for k in kinds}
        B = max_batch
        self.static_ids = torch.zeros(1, B, dtype=torch.long, device=device)
        self.static_pos = torch.zeros(1, B, dtype=torch.long, device=device)
        self.static_bidx = torch.arange(B, dtype=torch.int32, device=device)
        self.static_app_pos = torch.zeros(B, dtype=torch.int32, device=device)
        self.graph = None
        self.stats = {}

    # -- one forward ---------------------------------------------------------------------------------------------

    def _set_ctx(self, kinds, bidx, pos, indices, indptr, last):
        CTX.caches, CTX.kinds, CTX.expect, CTX.append = self.caches, kinds, self.expect, self.append
        CTX.batch_indices, CTX.positions = bidx, pos
        CTX.app_indices, CTX.app_indptr, CTX.app_last = indices, indptr, last

    def _forward(self, ids, pos, logits_to_keep=0):
        return self.model(input_ids=ids, position_ids=pos, use_cache=False, logits_to_keep=logits_to_keep).logits

    def run_prefill(self, reqs):
        torch = self.torch
        qo, kvp, idx, last, ids, pos, bidx, apos = [0], [0], [], [], [], [], [], []
        for b, r in enumerate(reqs):
            n = len(r.prompt)
            qo.append(qo[-1] + n)
            kvp.append(kvp[-1] + len(r.pages))
            idx += r.pages
            last.append(n - (len(r.pages) - 1) * PAGE_SIZE)
            ids += r.prompt
            pos += range(n)
        dev = self.device
        indices = torch.tensor(idx, dtype=torch.int32, device=dev)
        qo_t, kvp_t, last_t = (torch.tensor(x, dtype=torch.int32) for x in (qo, kvp, last))
        seq_lens = torch.tensor([len(r.prompt) for r in reqs], dtype=torch.int32, device=dev)
        if self.attn is not None:
            bidx_t, apos_t = self.attn.get_batch_indices_positions(qo_t.to(dev), seq_lens, qo[-1])
        else:
            bidx_t = torch.repeat_interleave(torch.arange(len(reqs), dtype=torch.int32, device=dev),
                                             seq_lens.long())
            apos_t = torch.tensor(pos, dtype=torch.int32, device=dev)
        for k in self.prefill.values():
            k.plan(qo_t, kvp_t, indices, last_t)
        self._set_ctx(self.prefill, bidx_t, apos_t, indices, kvp_t.to(dev), last_t.to(dev))
        keep = torch.tensor([x - 1 for x in qo[1:]], device=dev)
        logits = self._forward(torch.tensor([ids], device=dev), torch.tensor([pos], device=dev), keep)[0]
        return logits

    def _decode_tables(self, reqs):
        """The padded decode batch's page table (host lists) and the append positions."""
        B = self.max_batch
        kvp, idx, last, apos = [0], [], [], []
        for r in reqs:
            n = r.seq_len + 1
            npg = r.need_pages(n)
            kvp.append(kvp[-1] + npg)
            idx += r.pages[:npg]
            last.append(n - (npg - 1) * PAGE_SIZE)
            apos.append(n - 1)
        for _ in range(B - len(reqs)):       # padding rows: one key on the trash page
            kvp.append(kvp[-1] + 1)
            idx.append(0)
            last.append(1)
            apos.append(0)
        return kvp, idx, last, apos

    def _plan_decode(self, reqs):
        torch = self.torch
        kvp, idx, last, apos = self._decode_tables(reqs)
        dev = self.device
        indices = torch.tensor(idx, dtype=torch.int32, device=dev)
        kvp_t, last_t = torch.tensor(kvp, dtype=torch.int32), torch.tensor(last, dtype=torch.int32)
        for k in self.decode.values():
            k.plan(range(len(kvp)), kvp_t, indices, last_t)   # decode: one query row per request
        self.static_app_pos.copy_(torch.tensor(apos, dtype=torch.int32), non_blocking=False)
        if self.backend == "attn" and self.graph_mode:
            # The append reads the page table the plan wrote into the fixed buffers (the graph's inputs).
            d = next(iter(self.decode.values()))
            return d.indices_buf, d.indptr_buf, d.last_buf
        return indices, kvp_t.to(dev), last_t.to(dev)

    def capture(self):
        """Captures the decode forward of a full padded batch (all rows on the trash page)."""
        torch = self.torch
        tables = self._plan_decode([])
        self._set_ctx(self.decode, self.static_bidx, self.static_app_pos, *tables)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self._forward(self.static_ids, self.static_pos)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_logits = self._forward(self.static_ids, self.static_pos)
        torch.cuda.synchronize()

    def run_decode(self, reqs):
        torch = self.torch
        b = len(reqs)
        tables = self._plan_decode(reqs)
        ids = [r.out[-1] for r in reqs] + [0] * (self.max_batch - b)
        pos = [r.seq_len for r in reqs] + [0] * (self.max_batch - b)
        self.static_ids.copy_(torch.tensor([ids]))
        self.static_pos.copy_(torch.tensor([pos]))
        if self.graph is not None:
            self.graph.replay()
            return self.static_logits[0, :b]
        self._set_ctx(self.decode, self.static_bidx, self.static_app_pos, *tables)
        return self._forward(self.static_ids, self.static_pos)[0, :b]

    # -- the loop ------------------------------------------------------------------------------------------------

    def serve(self, requests, record=False, log=False):
        """Continuous batching until every request is done; returns the steps taken."""
        pending = sorted(requests, key=lambda r: r.arrival)
        waiting, running = [], []
        free = list(range(self.num_pages - 1, 0, -1))           # page 0: trash
        reserved = 0
        step, peak, allocated = 0, 0, 0
        seen_pages = set()
        reused = 0
        while pending or waiting or running:
            while pending and pending[0].arrival <= step:
                waiting.append(pending.pop(0))
            new = []
            # Admit in arrival order while batch slots and (reserved) pages allow it.
            while waiting and len(running) + len(new) < self.max_batch:
                r = waiting[0]
                need = r.need_pages(len(r.prompt) + r.max_new)
                if need > self.num_pages - 1:
                    raise ValueError(f"request {r.rid} needs {need} pages, the cache has {self.num_pages - 1}")
                if len(free) - reserved < need:
                    break
                waiting.pop(0)
                reserved += need
                r.reserved = need
                for _ in range(r.need_pages(len(r.prompt))):
                    p = free.pop()
                    reused += p in seen_pages
                    seen_pages.add(p)
                    r.pages.append(p)
                    reserved -= 1
                    r.reserved -= 1
                new.append(r)
            decoding = list(running)
            for r in decoding:                  # a page for the token this step appends
                if r.need_pages(r.seq_len + 1) > len(r.pages):
                    p = free.pop()
                    reused += p in seen_pages
                    seen_pages.add(p)
                    r.pages.append(p)
                    reserved -= 1
                    r.reserved -= 1
            peak = max(peak, self.num_pages - 1 - len(free))
            outs = []
            if new:
                logits = self.run_prefill(new)
                outs.append((new, logits))
            if decoding:
                logits = self.run_decode(decoding)
                outs.append((decoding, logits))
            if log and (new or decoding):
                print(f"    step {step:3d}: prefill {[r.rid for r in new]} decode {len(decoding)} "
                      f"(pages in use {self.num_pages - 1 - len(free)})")
            for reqs, logits in outs:
                toks = logits.argmax(-1).tolist()            # the step's one host sync
                for i, (r, t) in enumerate(zip(reqs, toks)):
                    if record:
                        r.logits.append(logits[i].float().cpu())
                    r.seq_len = len(r.prompt) if r in new else r.seq_len + 1
                    r.out.append(t)
            for r in new:
                running.append(r)
            for r in list(running):
                if len(r.out) >= r.max_new:
                    running.remove(r)
                    free.extend(reversed(r.pages))
                    reserved -= r.reserved
                    r.pages = []
            step += 1
        self.stats = {"steps": step, "peak_pages": peak, "reused_pages": reused}
        return step


# ---------------------------------------------------------------------------------------------------------------
# Reference (transformers' generate) and the comparison.


def bf16_ulp(x):
    x = abs(float(x))
    return 2.0 ** (math.floor(math.log2(x)) - 7) if x > 0 else 2.0 ** -133


def compare(model_name, reqs, refs, tie_ulps):
    """Our tokens against generate()'s; returns the number of failures."""
    fails = 0
    max_diff = 0.0
    for r, (ref_tokens, ref_logits) in zip(reqs, refs):
        n = min(len(r.out), len(ref_tokens))
        for t in range(n):
            if r.logits:
                max_diff = max(max_diff, float((r.logits[t] - ref_logits[t]).abs().max()))
            if r.out[t] == ref_tokens[t]:
                continue
            top = ref_logits[t].topk(2)
            gap = float(top.values[0] - ref_logits[t][r.out[t]])   # how far below the reference's best ours is
            tol = tie_ulps * bf16_ulp(top.values[0])
            ok = gap <= tol
            ulps = gap / bf16_ulp(top.values[0])
            print(f"  {model_name} request {r.rid} (prompt {len(r.prompt)}): diverges at generated token {t}: "
                  f"ours {r.out[t]}, generate() {ref_tokens[t]}; reference top-2 logits "
                  f"{float(top.values[0]):.6g} / {float(top.values[1]):.6g}, ours "
                  f"{float(ref_logits[t][r.out[t]]):.6g} there: gap {gap:.3g} = {ulps:.1f} ulps "
                  f"({'a tie within' if ok else 'NOT within'} {tie_ulps:g} bf16 ulps = {tol:.3g}"
                  f"{'; allowed, the rest of this request is not compared' if ok else ''})")
            if not ok:
                fails += 1
            break
        if len(r.out) != len(ref_tokens):
            print(f"  {model_name} request {r.rid}: {len(r.out)} tokens, generate() {len(ref_tokens)}")
            fails += 1
    if max_diff:
        print(f"  {model_name}: max |logit - generate()'s| over the agreeing steps: {max_diff:.4g}")
    return fails


def reference_generate(torch, model, reqs, device, impl):
    model.set_attn_implementation(impl)
    out = []
    for r in reqs:
        g = model.generate(input_ids=torch.tensor([r.prompt], device=device), max_new_tokens=r.max_new,
                           min_new_tokens=r.max_new, do_sample=False, output_logits=True,
                           return_dict_in_generate=True, pad_token_id=0, eos_token_id=None,
                           attention_mask=torch.ones(1, len(r.prompt), dtype=torch.long, device=device))
        toks = g.sequences[0, len(r.prompt):].tolist()
        out.append((toks, [x[0].float().cpu() for x in g.logits]))
    return out


def sync(torch, device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def time_generate(torch, model, reqs, device, impl):
    """Seconds and generated tokens: one request at a time, then all in one left-padded batch."""
    model.set_attn_implementation(impl)
    kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
    sync(torch, device)
    t0 = time.perf_counter()
    for r in reqs:
        model.generate(input_ids=torch.tensor([r.prompt], device=device), max_new_tokens=r.max_new,
                       min_new_tokens=r.max_new, attention_mask=torch.ones(1, len(r.prompt), dtype=torch.long,
                                                                            device=device), **kw)
    sync(torch, device)
    one = time.perf_counter() - t0
    L = max(len(r.prompt) for r in reqs)
    N = max(r.max_new for r in reqs)
    ids = torch.zeros(len(reqs), L, dtype=torch.long, device=device)
    mask = torch.zeros(len(reqs), L, dtype=torch.long, device=device)
    for i, r in enumerate(reqs):
        ids[i, L - len(r.prompt):] = torch.tensor(r.prompt)
        mask[i, L - len(r.prompt):] = 1
    sync(torch, device)
    t0 = time.perf_counter()
    model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=N, min_new_tokens=N, **kw)
    sync(torch, device)
    batched = time.perf_counter() - t0
    return one, batched, N * len(reqs)


# ---------------------------------------------------------------------------------------------------------------


def make_requests(cfg, seed, count):
    import torch
    g = torch.Generator().manual_seed(seed)
    return [Request(i, torch.randint(1, cfg.vocab_size, (n,), generator=g).tolist(), m, a)
            for i, (n, m, a) in enumerate(REQUESTS[:count])]


def run_model(name, args, torch, attn):
    import transformers
    cls, kw, ref_impl = MODELS[name]
    device = torch.device(args.device)
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[args.dtype]
    cfg = getattr(transformers, cls)(**kw, initializer_range=args.init_std)
    torch.manual_seed(args.seed)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype).to(device).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    backend = "reference" if args.reference else "attn"
    todo = REQUESTS[:args.requests]
    total_pages = 1 + sum((n + m + PAGE_SIZE - 1) // PAGE_SIZE for n, m, _ in todo)
    num_pages = args.pages or max(1 + max((n + m + PAGE_SIZE - 1) // PAGE_SIZE for n, m, _ in todo),
                                  (total_pages * 2) // 3)
    graph = backend == "attn" and not args.no_graph
    print(f"{name}: {cls} {cfg.num_hidden_layers} layers, heads {cfg.num_attention_heads}/"
          f"{cfg.num_key_value_heads}, head_dim {model.model.layers[0].self_attn.head_dim}, "
          f"vocab {cfg.vocab_size}, {args.dtype} on {device}; attention: {backend}"
          f"{' (decode in a CUDA graph)' if graph else ''}; {len(todo)} requests, {num_pages} pages of "
          f"{PAGE_SIZE} (all requests at once would need {total_pages}), decode batch {args.max_batch}")
    with torch.inference_mode():
        reqs = make_requests(cfg, args.seed, args.requests)
        refs = reference_generate(torch, model, reqs, device, ref_impl)
        model.set_attn_implementation("attn_paged")
        eng = Engine(torch, attn, model, cfg, device, dtype, backend, args.max_batch, num_pages, graph,
                     args.perturb_window)
        if graph:
            eng.capture()
        steps = eng.serve(reqs, record=True, log=args.verbose)
        print(f"  loop: {steps} steps, peak {eng.stats['peak_pages']} pages in use, "
              f"{eng.stats['reused_pages']} page allocations reused a freed page")
        fails = compare(name, reqs, refs, args.tie_ulps)
        if args.no_timing:
            print(f"{name}: {'OK' if not fails else f'FAILED ({fails} requests)'}")
            return fails
        # Timed: the same requests again (kernels loaded, graph captured).
        again = make_requests(cfg, args.seed, args.requests)
        sync(torch, device)
        t0 = time.perf_counter()
        eng.serve(again)
        sync(torch, device)
        loop_s = time.perf_counter() - t0
        if any(a.out != r.out for a, r in zip(again, reqs)):
            print(f"  {name}: the second run's tokens differ from the first's")
            fails += 1
        ntok = sum(r.max_new for r in reqs)
        one, batched, nb = time_generate(torch, model, reqs, device, ref_impl)
        print(f"  tokens/s: {backend} loop {ntok / loop_s:.0f} ({ntok} tokens in {loop_s * 1e3:.1f} ms, "
              f"{steps} steps); generate() [{ref_impl}] one request at a time {ntok / one:.0f} "
              f"({one * 1e3:.1f} ms); generate() [{ref_impl}] all {len(reqs)} in one padded batch "
              f"{nb / batched:.0f} ({nb} tokens in {batched * 1e3:.1f} ms)")
    print(f"{name}: {'OK' if not fails else f'FAILED ({fails} requests)'}")
    return fails


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="llama3")
    ap.add_argument("--all", action="store_true", help="every model")
    ap.add_argument("--reference", action="store_true",
                    help="pure-PyTorch paged attention instead of attn (runs on CPU)")
    ap.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    ap.add_argument("--no-graph", action="store_true", help="attn decode without a CUDA graph")
    ap.add_argument("--max-batch", type=int, default=8, help="decode batch (the captured size)")
    ap.add_argument("--pages", type=int, default=0, help="KV pages per layer (default: 2/3 of all requests' need)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init-std", type=float, default=0.02, help="the config's initializer_range")
    ap.add_argument("--tie-ulps", type=float, default=4.0,
                    help="a divergence passes where the reference's best logit beats ours by at most this many "
                         "bf16 ulps (of the best logit)")
    ap.add_argument("--verbose", action="store_true", help="print every step's batch")
    ap.add_argument("--requests", type=int, default=len(REQUESTS), help="serve the first N requests")
    ap.add_argument("--no-timing", action="store_true", help="skip the timed runs (correctness only)")
    ap.add_argument("--perturb-window", type=int, default=0,
                    help="debug: plan sliding layers with window_left + N, to see the comparison catch it")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("skipped: PyTorch is not installed")
        return 0
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if not args.reference and not (args.device.startswith("cuda") and torch.cuda.is_available()):
        print("skipped: no CUDA device (attn's kernels need a GPU); --reference --device cpu runs the loop "
              "with a PyTorch paged attention")
        return 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("skipped: no CUDA device")
        return 0
    try:
        import transformers
    except ImportError:
        print("skipped: transformers is not installed")
        return 0
    attn = import_attn()
    if not args.reference and not attn.has_native():
        print(f"attn's native module is not built ({attn.__file__}); set ATTN_BUILD_DIR", file=sys.stderr)
        return 2
    transformers.AttentionInterface.register("attn_paged", paged_attention)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, attn {attn.__file__}")
    fails = 0
    for name in (sorted(MODELS) if args.all else [args.model]):
        fails += run_model(name, args, torch, attn)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
