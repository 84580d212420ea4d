"""Batch decode over a paged KV cache (FlashInfer's ``flashinfer.decode``).

Besides the wrapper, the module holds the names engines import from
``flashinfer.decode``: ``get_seq_lens``, ``_get_range_buf``,
``fast_decode_plan``, and stand-ins for the trtllm-gen and MLA entry points
attn lacks (they raise NotImplementedError when called).
"""

import array
import ctypes
import functools

from . import core, mla, ops
from .core import (SIZING_KEYWORDS, check_run_matches_plan, check_tensor, dtype_name, reject_extra_args,
                   reject_unsupported, torch_module)
from .errors import not_implemented
from .mla import trtllm_batch_decode_with_kv_cache_mla  # noqa: F401  (re-exported, as FlashInfer's decode does)
from .page import get_seq_lens  # noqa: F401  (FlashInfer's decode module exports it)
from .paged import PagedWrapperBase, decode_query, q_kv_dtypes, split_kv_bound
from .utils import _get_range_buf  # noqa: F401  (vLLM imports it from flashinfer.decode)
from .utils import get_workspace_size


class BatchDecodeWithPagedKVCacheWrapper(PagedWrapperBase):
    """Decode attention (one query token per request) over a paged KV cache.

    Same constructor, ``plan`` and ``run`` as FlashInfer's wrapper of this
    name: the page table is CSR (``indptr``, ``indices``, ``last_page_len``),
    the cache is ``[num_pages, 2, page_size, num_kv_heads, head_dim]`` (NHD),
    ``[num_pages, 2, num_kv_heads, page_size, head_dim]`` (HND) or a
    ``(k_cache, v_cache)`` tuple of ``[num_pages, page_size, num_kv_heads,
    head_dim]`` (NHD), and the LSE is base 2. Views are read in place when
    each page is dense and pages are one or two pages apart (the halves
    ``kv[:, 0]``, ``kv[:, 1]`` of a combined cache; see
    :func:`attn.core.split_paged_kv_cache`), else ValueError naming the
    stride (the cache is never copied); planned with ``page_size=1``, a tuple
    of 3-D ``[num_tokens, num_kv_heads, head_dim]`` buffers (SGLang's) is
    accepted as well. A strided ``q`` (a slice of a fused QKV projection) is
    copied to a dense one, q-sized (:func:`attn.core.dense_q`).

    Example (the ten-line decode of docs/Python.md)::

        >>> import torch, attn                                          # doctest: +SKIP
        >>> ws = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
        >>> w = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
        >>> kv = torch.randn(64, 2, 16, 8, 128, dtype=torch.bfloat16, device="cuda")
        >>> indptr = torch.tensor([0, 3, 7], dtype=torch.int32)
        >>> indices = torch.arange(7, dtype=torch.int32, device="cuda")
        >>> last = torch.tensor([5, 16], dtype=torch.int32)
        >>> w.plan(indptr, indices, last, 32, 8, 128, 16, q_data_type=torch.bfloat16)
        >>> q = torch.randn(2, 32, 128, dtype=torch.bfloat16, device="cuda")
        >>> o, lse = w.run(q, kv, return_lse=True)

    Where attn differs from FlashInfer:

    - kernels are compiled by attn on first use (or loaded from the kernel
      cache), not JIT-compiled with nvcc; ``use_tensor_cores`` and
      ``backend`` are accepted and ignored (the kernel always uses tensor
      cores); ``jit_args`` (C++ custom kernels) raises NotImplementedError.
    - q and KV share one dtype (bf16 or f16); no fp8 KV.
      ``q_scale``/``k_scale`` fold into ``sm_scale``, ``v_scale`` scales the
      output afterwards.
    - extra keywords: ``pos_encoding_mode="ROPE_LLAMA31"`` (Llama-3.1 RoPE
      scaling), ``sinks`` (a float32 ``[num_qo_heads]`` tensor), and
      ``variant``/``variant_params`` (a custom :class:`attn.Variant`).
    - a request with no visible key gets output 0 and LSE ``-inf``
      (FlashInfer: a finite -5e4).
    - with ``use_cuda_graph=True``, ``run`` accepts a ``q`` with up to the
      buffers' batch rows, so one captured graph serves every smaller batch;
      plan() writes the three buffers as FlashInfer's does (the kernels read
      the page table there and the plan's own copies of the other two).
    """

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, use_tensor_cores=False,
                 paged_kv_indptr_buffer=None, paged_kv_indices_buffer=None,
                 paged_kv_last_page_len_buffer=None, backend="auto", jit_args=None):
        reject_unsupported("BatchDecodeWithPagedKVCacheWrapper", jit_args=jit_args)
        super().__init__(float_workspace_buffer, kv_layout, use_cuda_graph)
        # Kept for engines that read it back; attn's decode kernel is one kernel whatever it says.
        self.use_tensor_cores = bool(use_tensor_cores)
        self._fixed = {}
        if use_cuda_graph:
            bufs = {"kv_indptr": paged_kv_indptr_buffer, "kv_indices": paged_kv_indices_buffer,
                    "kv_last_len": paged_kv_last_page_len_buffer}
            for name, b in bufs.items():
                if b is None:
                    raise ValueError("attn: use_cuda_graph=True needs paged_kv_indptr_buffer, "
                                     "paged_kv_indices_buffer and paged_kv_last_page_len_buffer "
                                     f"(fixed device buffers); {name} buffer is missing")
                check_tensor(f"{name} buffer", b, dtype="i32", device=self._device, dims=1)
            self._fixed = bufs
            self._max_batch = int(paged_kv_last_page_len_buffer.shape[0])
            if int(paged_kv_indptr_buffer.shape[0]) < self._max_batch + 1:
                raise ValueError("attn: paged_kv_indptr_buffer needs batch + 1 entries "
                                 f"({self._max_batch + 1}), has {paged_kv_indptr_buffer.shape[0]}")

    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
             pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type="float16",
             kv_data_type=None, o_data_type=None, data_type=None, sm_scale=None, rope_scale=None,
             rope_theta=None, non_blocking=True, block_tables=None, seq_lens=None, fixed_split_size=None,
             disable_split_kv=False, q_len_per_req=1, *, window_right=0, sinks=None, variant=None,
             variant_params=None, logits_scale=None):
        """Plans a decode step: compiles or loads the kernels, balances the work.

        ``indptr``/``last_page_len`` are read on the host (pass CPU tensors to
        avoid a device sync); ``indices`` stays on the device. Call outside
        CUDA-graph capture. The arguments, positional order included, are
        FlashInfer's (``pos_encoding_mode`` "NONE" | "ROPE_LLAMA" | "ALIBI",
        plus attn's "ROPE_LLAMA31"); attn's own (``sinks``, ``variant``,
        ``variant_params``, ``logits_scale``) are keyword-only. What attn does
        not implement raises NotImplementedError unless it has its "off"
        value: ``block_tables``, ``seq_lens``, ``fixed_split_size`` (None or
        -1), ``disable_split_kv`` (False), ``window_right`` (0), an
        ``o_data_type`` other than q's.

        ``q_len_per_req=k > 1`` (speculative verification): every request
        has ``k`` query tokens, the last ``k`` of its KV, each seeing the keys
        up to its own position (causal); ``q`` is then ``[batch * k,
        num_qo_heads, head_dim]``. The planner picks the query tile from
        ``k`` times the GQA group, as it does for prefill.
        """
        memo_key = None
        if block_tables is None and seq_lens is None and sinks is None and variant is None and \
                variant_params is None:
            # Everything these scalars decide is memoized (_memoize below); their types are part of the
            # key, so that True is not taken for 1 nor 1.0 for 1.
            m, memo_key = self._memo_entry(
                num_qo_heads, num_kv_heads, head_dim, page_size, pos_encoding_mode, window_left, logits_soft_cap,
                q_data_type, kv_data_type, o_data_type, data_type, sm_scale, rope_scale, rope_theta, fixed_split_size,
                disable_split_kv, q_len_per_req, window_right, logits_scale)
            if m is not None:  # kept already: the full path below plans what the fast one does not take
                if self._plan_memoized(m, indptr, indices, last_page_len):
                    return
                memo_key = None
        reject_unsupported("BatchDecodeWithPagedKVCacheWrapper.plan", block_tables=block_tables, seq_lens=seq_lens,
                           window_right=window_right)
        split = core.split_mode(fixed_split_size, disable_split_kv)
        dtype = q_kv_dtypes(q_data_type, kv_data_type, data_type, o_data_type)
        torch_module()  # the checks above run without torch; planning needs it
        k = q_len_per_req
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"attn: q_len_per_req must be a positive int, got {k!r}")
        batch = len(last_page_len)
        query_rows, causal = decode_query(k)
        # qo_indptr of decode is 0, k, 2k, ..: kept on the host, not rebuilt every plan.
        qo_host = getattr(self, "_qo_host", None)
        if qo_host is None or len(qo_host) != batch + 1 or qo_host[-1] != batch * k:
            qo_host = self._qo_host = array.array("i", range(0, k * (batch + 1), k))
        self._plan_paged(qo_indptr=qo_host, qo_host=qo_host, kv_indptr=indptr,
                         kv_indices=indices, kv_last_len=last_page_len,
                         num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                         page_size=page_size, dtype=dtype, query_rows=query_rows, causal=causal,
                         window_left=window_left, sm_scale=sm_scale, fixed=self._fixed,
                         max_batch=self._max_batch if self._use_cuda_graph else None,
                         max_total_q_rows=self._max_batch * k if self._use_cuda_graph else None,
                         min_kv_len=k, pos_encoding_mode=pos_encoding_mode, logits_soft_cap=logits_soft_cap,
                         rope_scale=rope_scale, rope_theta=rope_theta, sinks=sinks, variant=variant,
                         variant_params=variant_params, logits_scale=logits_scale,
                         split=split if split != (0, False) else None)
        self._planned.q_len_per_req = k
        if memo_key is not None:
            self._memoize(memo_key, ("spec", "args", "keywords", "sm_scale", "dtype", "page_size", "window_left",
                                     "sinks", "mask_ptrs"), k=k)

    begin_forward = plan

    def _plan_memoized(self, m, indptr, indices, last):
        """plan() of a configuration planned before (``m``, see _memoize):
        the same checks, in fewer steps. It takes the common case only
        (``indptr``/``last_page_len`` contiguous int32 CPU tensors,
        ``indices`` an int32 contiguous tensor on the device, buffers large
        enough) and returns False, having done nothing, for anything else,
        which the full path then plans or refuses with its own message.
        The C++ planner validates the page table (the full path's error,
        raised before anything is uploaded)."""
        torch, i32 = m.torch, m.i32
        T = torch.Tensor
        if not (type(indptr) is T and type(last) is T and type(indices) is T and indptr.dtype is i32 and
                last.dtype is i32 and indices.dtype is i32 and indptr.is_cpu and last.is_cpu and
                indptr.dim() == 1 and last.dim() == 1 and indptr.is_contiguous() and last.is_contiguous() and
                indices.is_contiguous() and indices.device == self._device):
            return False
        batch, k = last.numel(), m.k   # numel: shape[0] costs twice as much, and both are 1-D
        if indptr.numel() != batch + 1:
            return False
        core.raise_page_index_errors(self._device)
        n_idx = indices.numel()
        # indptr[batch], read from the (contiguous CPU int32) buffer: indexing
        # the tensor builds a 0-d tensor first, several times the cost.
        kv_pages = ctypes.c_int32.from_address(indptr.data_ptr() + 4 * batch).value
        if n_idx < kv_pages:
            return False  # the full path refuses it
        if self._use_cuda_graph:
            step = self._graph_step(indices, n_idx)
            if batch > self._max_batch or step is None:
                return False
            fixed, table, keep, ptrs = step
            maxima = m.maxima  # the graph's, fixed at its first plan
        else:
            max_batch, max_q = max(1, batch), max(1, batch * k)   # the full path's config (plan_config)
            max_kv = split_kv_bound(m.info, kv_pages, m.template["page_size"], k) \
                if m.config["fixed_split_tokens"] else 0
            maxima = (max_batch, max_q, max_kv)
            ptrs = {"kv_indices": indices.data_ptr()}
            table = fixed = (0, 0, 0)
            keep = [indices]
        qo = m.qo_host
        if qo is None or len(qo) < batch + 1:
            qo = m.qo_host = array.array("i", range(0, k * (2 * batch + 2), k))
            m.qo_address = qo.buffer_info()[0]
        summary = self._plan_natively(m, batch, maxima, (m.qo_address, indptr.data_ptr(), last.data_ptr()),
                                      fixed, k, table)
        if summary is None:
            return False  # the workspace is too small, or a request is too short: the full path says so
        config = m.config if self._use_cuda_graph else dict(m.config, max_batch=maxima[0],
                                                            max_total_q_rows=maxima[1], max_kv_tokens=maxima[2])
        p = self._memoized_run(m, summary, batch=batch, total_q=batch * k, config=config, keepalive=keep,
                               ptrs=ptrs)
        p.q_len_per_req, p.kv_pages = k, kv_pages
        return True

    def run(self, q, paged_kv_cache, *args, q_scale=None, k_scale=None, v_scale=None, out=None, lse=None,
            return_lse=False, enable_pdl=None, window_left=None, sinks=None, q_len_per_req=None,
            skip_softmax_threshold_scale_factor=None, kv_cache_sf=None):
        """Decode attention of ``q`` ``[batch * q_len_per_req, num_qo_heads, head_dim]``.

        Returns ``out`` (q's shape and dtype) or ``(out, lse)`` with ``lse``
        float32 ``[batch * q_len_per_req, num_qo_heads]``, base 2.
        Launches on ``torch.cuda.current_stream()``; capturable in a CUDA
        graph when the wrapper was built with ``use_cuda_graph=True``.
        Traced by torch.compile it is the op ``torch.ops.attn.paged_run``
        (:mod:`attn.ops`), which runs the wrapper's plan of the moment.
        ``window_left``, ``sinks`` and ``q_len_per_req``, if given, must be
        plan()'s; custom-kernel ``*args``, ``kv_cache_sf`` (NVFP4) and
        ``skip_softmax_threshold_scale_factor`` raise NotImplementedError.
        """
        reject_extra_args("BatchDecodeWithPagedKVCacheWrapper.run", args)
        reject_unsupported("BatchDecodeWithPagedKVCacheWrapper.run", kv_cache_sf=kv_cache_sf,
                           skip_softmax_threshold_scale_factor=skip_softmax_threshold_scale_factor)
        if ops.compiling():  # torch.compile: the op attn::paged_run (attn.ops), the plan read when it runs
            return ops.paged_run(self, q, paged_kv_cache, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale,
                                 out=out, lse=lse, return_lse=return_lse, window_left=window_left,
                                 q_len_per_req=q_len_per_req, sinks=sinks)
        p = self._check_planned()
        check_run_matches_plan(p, q_len_per_req=q_len_per_req, window_left=window_left)
        return self._run_paged(q, paged_kv_cache, out=out, lse=lse, return_lse=return_lse,
                               q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, sinks=sinks)

    run_return_lse = functools.partialmethod(run, return_lse=True)

    def forward(self, q, paged_kv_cache, pos_encoding_mode="NONE", q_scale=None, k_scale=None, v_scale=None,
                window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """Deprecated FlashInfer spelling of :meth:`run`; its variant
        arguments must equal plan()'s (ValueError otherwise), since attn
        fixes them at plan time."""
        self._check_forward("BatchDecodeWithPagedKVCacheWrapper.forward", pos_encoding_mode=pos_encoding_mode,
                            window_left=window_left, logits_soft_cap=logits_soft_cap, sm_scale=sm_scale,
                            rope_scale=rope_scale, rope_theta=rope_theta)
        return self.run(q, paged_kv_cache, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale)

    def forward_return_lse(self, q, paged_kv_cache, pos_encoding_mode="NONE", q_scale=None, k_scale=None,
                           v_scale=None, window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None,
                           rope_theta=None):
        """Deprecated FlashInfer spelling of :meth:`run_return_lse` (as :meth:`forward`)."""
        self._check_forward("BatchDecodeWithPagedKVCacheWrapper.forward_return_lse",
                            pos_encoding_mode=pos_encoding_mode, window_left=window_left,
                            logits_soft_cap=logits_soft_cap, sm_scale=sm_scale, rope_scale=rope_scale,
                            rope_theta=rope_theta)
        return self.run(q, paged_kv_cache, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, return_lse=True)

    def end_forward(self):
        """Nothing to release (FlashInfer compatibility)."""


class CUDAGraphBatchDecodeWithPagedKVCacheWrapper(BatchDecodeWithPagedKVCacheWrapper):
    """FlashInfer's CUDA-graph decode wrapper: :class:`BatchDecodeWithPagedKVCacheWrapper`
    with ``use_cuda_graph=True`` and the page-table buffers fixed at construction.

    ``indptr_buffer`` (int32 ``[max_batch + 1]``), ``indices_buffer`` (int32,
    the most pages a plan will hold) and ``last_page_len_buffer`` (int32
    ``[max_batch]``) are device buffers that every ``plan()`` writes into, so
    a ``run()`` captured once replays correctly after each later plan: plan
    on the host outside the graph, then replay. As in graph mode of the
    plain wrapper, a plan may hold up to ``max_batch`` requests (FlashInfer:
    exactly ``max_batch``), ``run`` takes a ``q`` of up to the buffers'
    rows (``max_batch * q_len_per_req``), and every plan keeps the first
    plan's heads, head_dim, page size, variant and ``q_len_per_req``.
    ``use_tensor_cores`` is accepted and ignored.

    >>> w = attn.CUDAGraphBatchDecodeWithPagedKVCacheWrapper(ws, indptr_buf, indices_buf, last_buf)  # doctest: +SKIP
    >>> w.plan(indptr, indices, last, 32, 8, 128, 16, q_data_type=torch.bfloat16)          # doctest: +SKIP
    >>> with torch.cuda.graph(g): w.run(q, kv, out=o)                                       # doctest: +SKIP
    """

    def __init__(self, workspace_buffer, indptr_buffer, indices_buffer, last_page_len_buffer, kv_layout="NHD",
                 use_tensor_cores=False):
        super().__init__(workspace_buffer, kv_layout, use_cuda_graph=True, use_tensor_cores=use_tensor_cores,
                         paged_kv_indptr_buffer=indptr_buffer, paged_kv_indices_buffer=indices_buffer,
                         paged_kv_last_page_len_buffer=last_page_len_buffer)


def fast_decode_plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                     pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, q_data_type=None,
                     kv_data_type=None, data_type=None, sm_scale=None, rope_scale=None, rope_theta=None,
                     non_blocking=True, fixed_split_size=None, disable_split_kv=False, q_len_per_req=1,
                     global_override_indptr_cpu=None):
    """FlashInfer's ``fast_decode_plan`` (SGLang installs it as a decode
    wrapper's ``begin_forward``): :meth:`BatchDecodeWithPagedKVCacheWrapper.plan`
    with this function's argument order and semantics.

    ``self`` is the decode wrapper. ``data_type`` stands for q's and KV's
    dtype where those are None; ``global_override_indptr_cpu``, when given,
    is the host copy of ``indptr`` that plan reads (no device sync). attn's
    plan has no slow path to skip: it does not sync when ``indptr`` and
    ``last_page_len`` are on the host, and it writes the CUDA-graph buffers itself.
    """
    q = q_data_type if q_data_type is not None else (data_type if data_type is not None else "float16")
    kv = kv_data_type if kv_data_type is not None else (data_type if data_type is not None else q)
    # The class's plan, not self.plan: FlashInfer's tests and SGLang install this
    # function as the instance's plan/begin_forward.
    type(self).plan(self, global_override_indptr_cpu if global_override_indptr_cpu is not None else indptr, indices,
                    last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
                    pos_encoding_mode=pos_encoding_mode, window_left=window_left, logits_soft_cap=logits_soft_cap,
                    q_data_type=q, kv_data_type=kv, sm_scale=sm_scale, rope_scale=rope_scale,
                    rope_theta=rope_theta, non_blocking=non_blocking, fixed_split_size=fixed_split_size,
                    disable_split_kv=disable_split_kv, q_len_per_req=q_len_per_req)


trtllm_batch_decode_with_kv_cache = not_implemented(
    "trtllm_batch_decode_with_kv_cache",
    "use BatchDecodeWithPagedKVCacheWrapper (plan once per step with the CSR page table, run per layer)")


class BatchDecodeMlaWithPagedKVCacheWrapper:
    """FlashInfer's deprecated MLA decode wrapper; constructing it raises NotImplementedError."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"attn: BatchDecodeMlaWithPagedKVCacheWrapper is not implemented; {mla.INSTEAD}")


_plans = core.SinglePlans()
_single = _plans.last   # device -> the wrapper of the last call there


def single_decode_with_kv_cache(q, k, v, kv_layout="NHD", pos_encoding_mode="NONE", use_tensor_cores=False,
                                q_scale=None, k_scale=None, v_scale=None, window_left=-1, logits_soft_cap=None,
                                sm_scale=None, rope_scale=None, rope_theta=None, return_lse=False, **kwargs):
    """Decode one query ``[num_qo_heads, head_dim]`` against contiguous K/V.

    ``k``/``v`` are ``[kv_len, num_kv_heads, head_dim]`` (NHD) or
    ``[num_kv_heads, kv_len, head_dim]`` (HND), as in FlashInfer.

    attn difference: this runs the paged decode kernel with 16-token pages
    over the same memory when ``kv_len`` is a multiple of 16 and K/V are
    dense NHD (or an HND view of dense NHD memory), and over a padded,
    transposed or densified copy otherwise (K/V-sized). A strided ``q`` (a
    slice of a fused QKV row) is copied to a dense one (q-sized). Plans are kept per call
    signature (device, shapes, dtype, variant arguments; a few of them, see
    :class:`attn.core.SinglePlans`), each in a workspace sized for it
    (:func:`attn.get_workspace_size`), so a repeated call does not re-plan
    and can be captured in a CUDA graph. Under torch.compile this is the op
    ``torch.ops.attn.single_decode`` (:mod:`attn.ops`).

    >>> o = single_decode_with_kv_cache(q, k, v)   # doctest: +SKIP
    """
    if ops.compiling():
        extra = ops.traced_extras("single_decode_with_kv_cache", kwargs)
        o, lse = ops._torch.ops.attn.single_decode(q, k, v, kv_layout, pos_encoding_mode, q_scale, k_scale, v_scale,
                                                    window_left, logits_soft_cap, sm_scale, rope_scale, rope_theta,
                                                    extra["logits_scale"], extra["sinks"])
        return (o, lse) if return_lse else o
    out, lse = _single_decode(q, k, v, kv_layout=kv_layout, pos_encoding_mode=pos_encoding_mode, q_scale=q_scale,
                              k_scale=k_scale, v_scale=v_scale, window_left=window_left,
                              logits_soft_cap=logits_soft_cap, sm_scale=sm_scale, rope_scale=rope_scale,
                              rope_theta=rope_theta, kwargs=kwargs)
    return (out, lse) if return_lse else out


def _single_decode(q, k, v, *, kv_layout, pos_encoding_mode, q_scale, k_scale, v_scale, window_left,
                   logits_soft_cap, sm_scale, rope_scale, rope_theta, kwargs, out=None, lse=None, from_op=False):
    """single_decode_with_kv_cache's work: ``(out, lse)``, into ``out``/``lse``
    when given (``[num_qo_heads, head_dim]``, ``[num_qo_heads]``); ``from_op``:
    called by the op ``attn::single_decode``."""
    torch = torch_module()
    check_tensor("q", q, dims=2, dtype=("bf16", "f16"), contiguous=False)
    check_tensor("k", k, dims=3, dtype=dtype_name(q.dtype), device=q.device, contiguous=False)
    check_tensor("v", v, dims=3, dtype=dtype_name(q.dtype), device=q.device, shape=tuple(k.shape),
                 contiguous=False)
    core.check_kv_layout(kv_layout)
    if kv_layout == "HND":
        k, v = k.transpose(0, 1), v.transpose(0, 1)
    # The kernel reads dense [kv_len, Hkv, D]: an HND or strided K/V is copied (no-op when already dense).
    k, v = k.contiguous(), v.contiguous()
    kv_len, hkv, d = (int(x) for x in k.shape)
    hq = int(q.shape[0])
    page = 16
    pages = max(1, -(-kv_len // page))
    if kv_len % page or kv_len == 0:
        kp = torch.zeros(pages * page, hkv, d, dtype=k.dtype, device=k.device)
        vp = torch.zeros_like(kp)
        kp[:kv_len], vp[:kv_len] = k, v
        k, v = kp, vp
    k, v = k.view(pages, page, hkv, d), v.view(pages, page, hkv, d)
    variant = dict(pos_encoding_mode=pos_encoding_mode, window_left=window_left, logits_soft_cap=logits_soft_cap,
                   sm_scale=sm_scale, rope_scale=rope_scale, rope_theta=rope_theta)
    key = core.plain_key("decode", str(q.device), str(q.dtype), hq, hkv, d, kv_len,
                         tuple(sorted(variant.items())), kwargs=kwargs)

    def need():
        # The scratch workspace this call's plan needs.
        return get_workspace_size(hq, hkv, d, page, kind="decode", max_batch=1, dtype=q.dtype,
                                  window_left=window_left, logits_soft_cap=logits_soft_cap,
                                  pos_encoding_mode=pos_encoding_mode, rope_scale=rope_scale, rope_theta=rope_theta,
                                  device=q.device, **{n: kwargs[n] for n in SIZING_KEYWORDS if n in kwargs})

    def plan(w):
        w.plan(torch.tensor([0, pages], dtype=torch.int32), torch.arange(pages, dtype=torch.int32, device=q.device),
               torch.tensor([kv_len - (pages - 1) * page if kv_len else 0], dtype=torch.int32),
               hq, hkv, d, page, q_data_type=q.dtype, **variant, **kwargs)

    w = _plans.get(key, str(q.device), q.device, need, lambda ws: BatchDecodeWithPagedKVCacheWrapper(ws, "NHD"), plan,
                   pin=from_op, where="single_decode_with_kv_cache")
    if out is None:
        out = torch.empty((hq, d), dtype=q.dtype, device=q.device)
    if lse is None:
        lse = torch.empty((hq,), dtype=torch.float32, device=q.device)
    w.run(q.unsqueeze(0).contiguous(), (k, v), q_scale=q_scale, k_scale=k_scale, v_scale=v_scale,
          out=out.unsqueeze(0), lse=lse.unsqueeze(0), return_lse=True, sinks=kwargs.get("sinks"))
    return out, lse
