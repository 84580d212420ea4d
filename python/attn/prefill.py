"""Batch prefill / append over paged or ragged KV (FlashInfer's ``flashinfer.prefill``).

Custom masks (``custom_mask=`` bool, or ``packed_custom_mask=`` uint8 from
:func:`attn.segment_packbits`) replace causal masking, as in FlashInfer; with
a page size of 1 and explicit ``kv_indices`` that is how a speculative token
tree is verified (each draft token sees its ancestors).

``plan`` takes FlashInfer's arguments in FlashInfer's positional order, attn's
own keyword-only; multi-item scoring (``prefix_len_ptr``,
``token_pos_in_items_*``, ``max_item_len_ptr``), ``fixed_split_size``,
``disable_split_kv`` and the trtllm-gen/cuDNN-only arguments raise
NotImplementedError unless they have their "off" value.
"""

import ctypes
import dataclasses
import functools

from . import core, ops
from .core import check_tensor, dtype_name, host_i32, reject_extra_args, reject_unsupported, torch_module
from .errors import not_implemented
from .paged import PagedWrapperBase, check_heads, make_spec, planned_keywords, q_kv_dtypes
from .utils import get_workspace_size


def _check_head_dim_vo(head_dim_qk, head_dim_vo):
    if head_dim_vo is not None and head_dim_vo != head_dim_qk:
        raise ValueError(f"attn: head_dim_vo ({head_dim_vo}) must equal head_dim_qk ({head_dim_qk})")


class _PrefillPlanMemo:
    """plan()'s fast path for the prefill wrappers, as decode's: the first
    plan() of a configuration (its scalar arguments, no custom mask, sinks
    or variant) takes the full path and keeps what those arguments decide
    (:class:`attn.core.PlanMemo`); later ones read the index arrays, plan
    and queue the plan's upload in one native call. ``_MEMO_TEMPLATE`` names the
    planned run's attributes that depend on the arguments alone."""

    def _plan_prefill_memoized(self, m, qo, kv, indices=None, last=None):
        """plan() of a configuration planned before (``m``): the same checks,
        in fewer steps, for the common case only (``qo``, ``kv`` and ``last``
        1-D contiguous int32 CPU tensors, ``indices`` (paged) a 1-D
        contiguous int32 tensor on the device, buffers large enough). Returns
        False, having done nothing, for anything else: the full path then
        plans it or refuses it with its own message. The C++ planner checks
        the index arrays (the full path's errors, raised before anything is
        uploaded)."""
        torch, i32 = m.torch, m.i32
        T = torch.Tensor
        paged = indices is not None
        for t in (qo, kv, last) if paged else (qo, kv):
            if not (type(t) is T and t.dtype is i32 and t.is_cpu and t.dim() == 1 and t.is_contiguous()):
                return False
        if paged and not (type(indices) is T and indices.dtype is i32 and indices.dim() == 1 and
                          indices.is_contiguous() and indices.device == self._device):
            return False
        batch = qo.shape[0] - 1
        if batch < 0 or kv.shape[0] != batch + 1 or (paged and last.shape[0] != batch):
            return False
        # The last entries, read from the buffers (indexing builds a 0-d tensor first).
        total_q = ctypes.c_int32.from_address(qo.data_ptr() + 4 * batch).value
        kv_end = ctypes.c_int32.from_address(kv.data_ptr() + 4 * batch).value
        n_idx = indices.numel() if paged else 0
        if paged and n_idx < kv_end:
            return False  # the full path refuses it
        core.raise_page_index_errors(self._device)
        graph, config = self._use_cuda_graph, m.config
        table, fixed, keep, ptrs = (0, 0, 0), (0, 0, 0), [], {}
        if graph:
            if batch > self._max_batch:
                return False
            max_batch, max_q = config["max_batch"], config["max_total_q_rows"]
            step = self._graph_step(indices if paged else None, n_idx)   # the arrays' copies go there
            if step is None:
                return False
            fixed, table, keep, ptrs = step
        else:
            max_batch, max_q = max(1, batch), max(1, total_q)   # the full path's config (plan_config)
            if paged:
                keep, ptrs = [indices], {"kv_indices": indices.data_ptr()}
        summary = self._plan_natively(m, batch, (max_batch, max_q, 0),
                                      (qo.data_ptr(), kv.data_ptr(), last.data_ptr() if paged else 0),
                                      fixed, page_table=table)
        if summary is None:
            return False  # the workspace is too small: the full path fits the split scratch or says so
        config = config if graph else dict(config, max_batch=max_batch, max_total_q_rows=max_q)
        p = self._memoized_run(m, summary, batch=batch, total_q=total_q, config=config, keepalive=keep, ptrs=ptrs)
        if paged:
            p.kv_pages = kv_end
        else:
            p.total_kv = kv_end
        return True


class BatchPrefillWithPagedKVCacheWrapper(_PrefillPlanMemo, PagedWrapperBase):
    """Prefill / append attention of ragged queries over a paged KV cache.

    FlashInfer's constructor, ``plan`` and ``run`` (layouts as in
    :class:`BatchDecodeWithPagedKVCacheWrapper`; LSE base 2). Causal masks
    are bottom-right aligned: query row i of a request with ``qo_len`` rows
    and ``kv_len`` keys sits at ``kv_len - qo_len + i``.

    >>> w = attn.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD")          # doctest: +SKIP
    >>> w.plan(qo_indptr, kv_indptr, kv_indices, last_page_len, 32, 8, 128, 16, causal=True,
    ...        q_data_type=torch.bfloat16)                                  # doctest: +SKIP
    >>> o = w.run(q, kv_cache)                                            # doctest: +SKIP

    Custom masks: ``custom_mask`` (bool, ``qo_len x kv_len`` per request,
    row-major, concatenated) or ``packed_custom_mask`` (uint8, bit-packed
    little-endian, each request from its own byte); either replaces
    ``causal``; ``window_left`` still applies.

    Differences from FlashInfer: as for decode (same dtype for q and KV,
    extra ``ROPE_LLAMA31``/``sinks``/``variant``); with ``causal`` and
    ``qo_len > kv_len`` the leading rows
    see no key and return output 0 / LSE -inf instead of crashing; in
    CUDA-graph mode the maximum query rows are those of the first plan
    (or ``max_total_q_rows=``).
    """

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, qo_indptr_buf=None,
                 paged_kv_indptr_buf=None, paged_kv_indices_buf=None, paged_kv_last_page_len_buf=None,
                 custom_mask_buf=None, mask_indptr_buf=None, backend="auto", jit_args=None, jit_kwargs=None, *,
                 max_total_q_rows=None):
        reject_unsupported("BatchPrefillWithPagedKVCacheWrapper", jit_args=jit_args, jit_kwargs=jit_kwargs)
        super().__init__(float_workspace_buffer, kv_layout, use_cuda_graph)
        self._fixed = {}
        self._max_total_q_rows = max_total_q_rows
        if use_cuda_graph:
            bufs = {"qo": qo_indptr_buf, "kv_indptr": paged_kv_indptr_buf, "kv_indices": paged_kv_indices_buf,
                    "kv_last_len": paged_kv_last_page_len_buf}
            for name, b in bufs.items():
                if b is None:
                    raise ValueError("attn: use_cuda_graph=True needs qo_indptr_buf, paged_kv_indptr_buf, "
                                     f"paged_kv_indices_buf and paged_kv_last_page_len_buf; {name} is missing")
                check_tensor(f"{name} buffer", b, dtype="i32", device=self._device, dims=1)
            self._fixed = dict(bufs, custom_mask=custom_mask_buf, mask_indptr=mask_indptr_buf)
            self._max_batch = int(paged_kv_last_page_len_buf.shape[0])
            for name, b in (("qo_indptr_buf", qo_indptr_buf), ("paged_kv_indptr_buf", paged_kv_indptr_buf)):
                if int(b.shape[0]) < self._max_batch + 1:
                    raise ValueError(f"attn: {name} needs batch + 1 entries ({self._max_batch + 1}, from "
                                     f"paged_kv_last_page_len_buf), has {b.shape[0]}")

    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
             num_kv_heads, head_dim_qk, page_size, head_dim_vo=None, custom_mask=None, packed_custom_mask=None,
             causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False, sm_scale=None,
             window_left=-1, logits_soft_cap=None, rope_scale=None, rope_theta=None, q_data_type="float16",
             kv_data_type=None, o_data_type=None, non_blocking=True, prefix_len_ptr=None,
             token_pos_in_items_ptr=None, token_pos_in_items_len=0, max_item_len_ptr=None, seq_lens=None,
             seq_lens_q=None, block_tables=None, max_token_per_sequence=None, max_sequence_kv=None,
             fixed_split_size=None, disable_split_kv=False, *, sinks=None, variant=None, variant_params=None,
             logits_scale=None):
        """Plans a prefill step (outside CUDA-graph capture); FlashInfer's
        arguments in FlashInfer's order (``use_fp16_qk_reduction`` is accepted:
        attn always reduces in float32).

        attn's extras, keyword-only: ``sinks`` (float32 ``[num_qo_heads]`` on
        the device, one logit per head in scaled-logit units that joins the
        softmax denominator; keep the tensor alive and unchanged until the
        runs of this plan are done: the kernel reads it then),
        ``logits_scale``, ``pos_encoding_mode="ROPE_LLAMA31"``,
        ``variant``/``variant_params``.
        """
        memo_key = None
        if custom_mask is None and packed_custom_mask is None and sinks is None and variant is None and \
                variant_params is None and prefix_len_ptr is None and token_pos_in_items_ptr is None and \
                max_item_len_ptr is None and seq_lens is None and seq_lens_q is None and block_tables is None \
                and max_token_per_sequence is None and max_sequence_kv is None and fixed_split_size is None \
                and disable_split_kv is False:
            # Their types are part of the key, so that True is not taken for 1 nor 1.0 for 1.
            m, memo_key = self._memo_entry(
                num_qo_heads, num_kv_heads, head_dim_qk, page_size, head_dim_vo, causal, pos_encoding_mode,
                use_fp16_qk_reduction, sm_scale, window_left, logits_soft_cap, rope_scale, rope_theta, q_data_type,
                kv_data_type, o_data_type, non_blocking, token_pos_in_items_len, logits_scale)
            if m is not None:  # kept already: the full path below plans what the fast one does not take
                if self._plan_prefill_memoized(m, qo_indptr, paged_kv_indptr, paged_kv_indices,
                                               paged_kv_last_page_len):
                    return
                memo_key = None
        reject_unsupported("BatchPrefillWithPagedKVCacheWrapper.plan", prefix_len_ptr=prefix_len_ptr,
                           token_pos_in_items_ptr=token_pos_in_items_ptr,
                           token_pos_in_items_len=token_pos_in_items_len, max_item_len_ptr=max_item_len_ptr,
                           seq_lens=seq_lens, seq_lens_q=seq_lens_q, block_tables=block_tables,
                           max_token_per_sequence=max_token_per_sequence, max_sequence_kv=max_sequence_kv,
                           fixed_split_size=fixed_split_size, disable_split_kv=disable_split_kv)
        _check_head_dim_vo(head_dim_qk, head_dim_vo)
        dtype = q_kv_dtypes(q_data_type, kv_data_type, o_data_type=o_data_type)
        qo_h = host_i32("qo_indptr", qo_indptr)
        graph = self._use_cuda_graph
        if graph and self._max_total_q_rows is None:
            self._max_total_q_rows = max(1, qo_h[-1])
        self._plan_paged(qo_indptr=qo_indptr, kv_indptr=paged_kv_indptr, kv_indices=paged_kv_indices,
                         kv_last_len=paged_kv_last_page_len, num_qo_heads=num_qo_heads,
                         num_kv_heads=num_kv_heads, head_dim=head_dim_qk, page_size=page_size, dtype=dtype,
                         query_rows=None, causal=causal, window_left=window_left,
                         sm_scale=sm_scale, fixed=self._fixed,
                         max_batch=self._max_batch if graph else None,
                         max_total_q_rows=self._max_total_q_rows if graph else None,
                         pos_encoding_mode=pos_encoding_mode, logits_soft_cap=logits_soft_cap,
                         rope_scale=rope_scale, rope_theta=rope_theta, sinks=sinks, variant=variant,
                         variant_params=variant_params, logits_scale=logits_scale, custom_mask=custom_mask,
                         packed_custom_mask=packed_custom_mask, qo_host=qo_h)
        if memo_key is not None:
            self._memoize(memo_key, self._MEMO_TEMPLATE)

    begin_forward = plan

    _MEMO_TEMPLATE = ("spec", "args", "keywords", "sm_scale", "dtype", "page_size", "window_left", "sinks",
                      "mask_ptrs")

    def run(self, q, paged_kv_cache, *args, q_scale=None, k_scale=None, v_scale=None, out=None, lse=None,
            return_lse=False, enable_pdl=None, window_left=None, sinks=None, kv_cache_sf=None,
            skip_softmax_threshold_scale_factor=None, use_fp16_softmax=None, uses_spcompress=None):
        """Attention of ``q`` ``[nnz_qo, num_qo_heads, head_dim]``; ``out`` or ``(out, lse)``.

        ``window_left`` and ``sinks``, if given, must be plan()'s; custom-kernel
        ``*args``, ``kv_cache_sf`` (NVFP4), skip-softmax, fp16 softmax and
        sparse compression raise NotImplementedError.
        """
        where = "BatchPrefillWithPagedKVCacheWrapper.run"
        reject_extra_args(where, args)
        reject_unsupported(where, kv_cache_sf=kv_cache_sf,
                           skip_softmax_threshold_scale_factor=skip_softmax_threshold_scale_factor,
                           use_fp16_softmax=use_fp16_softmax, uses_spcompress=uses_spcompress)
        if ops.compiling():  # torch.compile: the op attn::paged_run (attn.ops), the plan read when it runs
            return ops.paged_run(self, q, paged_kv_cache, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale,
                                 out=out, lse=lse, return_lse=return_lse, window_left=window_left, sinks=sinks)
        p = self._check_planned()
        core.check_run_matches_plan(p, window_left=window_left)
        return self._run_paged(q, paged_kv_cache, out=out, lse=lse, return_lse=return_lse,
                               q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, sinks=sinks)

    run_return_lse = functools.partialmethod(run, return_lse=True)

    def forward(self, q, paged_kv_cache, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                k_scale=None, v_scale=None, window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None,
                rope_theta=None):
        """Deprecated FlashInfer spelling of :meth:`run`; its variant
        arguments must equal plan()'s (ValueError otherwise), since attn
        fixes them at plan time."""
        self._check_forward("BatchPrefillWithPagedKVCacheWrapper.forward", causal=bool(causal),
                            pos_encoding_mode=pos_encoding_mode, window_left=window_left,
                            logits_soft_cap=logits_soft_cap, sm_scale=sm_scale, rope_scale=rope_scale,
                            rope_theta=rope_theta)
        return self.run(q, paged_kv_cache, k_scale=k_scale, v_scale=v_scale)

    def forward_return_lse(self, q, paged_kv_cache, causal=False, pos_encoding_mode="NONE",
                           use_fp16_qk_reduction=False, k_scale=None, v_scale=None, window_left=-1,
                           logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """Deprecated FlashInfer spelling of :meth:`run_return_lse` (as :meth:`forward`)."""
        self._check_forward("BatchPrefillWithPagedKVCacheWrapper.forward_return_lse", causal=bool(causal),
                            pos_encoding_mode=pos_encoding_mode, window_left=window_left,
                            logits_soft_cap=logits_soft_cap, sm_scale=sm_scale, rope_scale=rope_scale,
                            rope_theta=rope_theta)
        return self.run(q, paged_kv_cache, k_scale=k_scale, v_scale=v_scale, return_lse=True)

    def end_forward(self):
        """Nothing to release (FlashInfer compatibility)."""


class BatchPrefillWithRaggedKVCacheWrapper(_PrefillPlanMemo, core.WrapperBase):
    """Prefill attention with ragged (contiguous per request) K/V.

    ``k``/``v`` are ``[nnz_kv, num_kv_heads, head_dim]`` (NHD) or
    ``[num_kv_heads, nnz_kv, head_dim]`` (HND), request b's keys at rows
    ``kv_indptr[b] .. kv_indptr[b+1]``. FlashInfer's API and conventions;
    differences as for the paged prefill wrapper, and: K/V are read in place
    at their own strides, NHD or HND, dense or strided (a slice of a fused
    QKV projection), when K and V share them (:func:`ragged_kv_strides`); a
    strided ``q`` is copied (q-sized, see :func:`attn.core.dense_q`).

    >>> w = attn.BatchPrefillWithRaggedKVCacheWrapper(ws, "NHD")           # doctest: +SKIP
    >>> w.plan(qo_indptr, kv_indptr, 32, 8, 128, causal=True, q_data_type=torch.bfloat16)  # doctest: +SKIP
    >>> o = w.run(q, k, v)                                                # doctest: +SKIP
    """

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False, qo_indptr_buf=None,
                 kv_indptr_buf=None, custom_mask_buf=None, mask_indptr_buf=None, backend="auto",
                 jit_args=None, jit_kwargs=None, *, max_total_q_rows=None):
        reject_unsupported("BatchPrefillWithRaggedKVCacheWrapper", jit_args=jit_args, jit_kwargs=jit_kwargs)
        super().__init__(float_workspace_buffer, kv_layout, use_cuda_graph)
        self._fixed = {}
        self._max_total_q_rows = max_total_q_rows
        if use_cuda_graph:
            for name, b in (("qo_indptr_buf", qo_indptr_buf), ("kv_indptr_buf", kv_indptr_buf)):
                if b is None:
                    raise ValueError(f"attn: use_cuda_graph=True needs {name}")
                check_tensor(name, b, dtype="i32", device=self._device, dims=1)
            self._fixed = {"qo": qo_indptr_buf, "kv_indptr": kv_indptr_buf, "custom_mask": custom_mask_buf,
                           "mask_indptr": mask_indptr_buf}
            self._max_batch = int(qo_indptr_buf.shape[0]) - 1
            if int(kv_indptr_buf.shape[0]) < self._max_batch + 1:
                raise ValueError(f"attn: kv_indptr_buf needs batch + 1 entries ({self._max_batch + 1}, as "
                                 f"qo_indptr_buf), has {kv_indptr_buf.shape[0]}")

    def plan(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo=None,
             custom_mask=None, packed_custom_mask=None, causal=False, pos_encoding_mode="NONE",
             use_fp16_qk_reduction=False, window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None,
             rope_theta=None, q_data_type="float16", kv_data_type=None, o_data_type=None, non_blocking=True,
             prefix_len_ptr=None, token_pos_in_items_ptr=None, token_pos_in_items_len=0, max_item_len_ptr=None,
             fixed_split_size=None, disable_split_kv=False, seq_lens=None, seq_lens_q=None,
             max_token_per_sequence=None, max_sequence_kv=None, v_indptr=None, o_indptr=None, *, sinks=None,
             variant=None, variant_params=None, logits_scale=None):
        """Plans a ragged prefill step (outside CUDA-graph capture); FlashInfer's
        arguments in FlashInfer's order, attn's extras keyword-only; custom
        masks, ``sinks`` and ``logits_scale`` as for paged."""
        memo_key = None
        if custom_mask is None and packed_custom_mask is None and sinks is None and variant is None and \
                variant_params is None and prefix_len_ptr is None and token_pos_in_items_ptr is None and \
                max_item_len_ptr is None and seq_lens is None and seq_lens_q is None and \
                max_token_per_sequence is None and max_sequence_kv is None and v_indptr is None and \
                o_indptr is None and fixed_split_size is None and disable_split_kv is False:
            m, memo_key = self._memo_entry(
                num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo, causal, pos_encoding_mode, use_fp16_qk_reduction,
                window_left, logits_soft_cap, sm_scale, rope_scale, rope_theta, q_data_type, kv_data_type, o_data_type,
                non_blocking, token_pos_in_items_len, logits_scale)
            if m is not None:  # kept already: the full path below plans what the fast one does not take
                if self._plan_prefill_memoized(m, qo_indptr, kv_indptr):
                    return
                memo_key = None
        reject_unsupported("BatchPrefillWithRaggedKVCacheWrapper.plan", prefix_len_ptr=prefix_len_ptr,
                           token_pos_in_items_ptr=token_pos_in_items_ptr,
                           token_pos_in_items_len=token_pos_in_items_len, max_item_len_ptr=max_item_len_ptr,
                           fixed_split_size=fixed_split_size, disable_split_kv=disable_split_kv,
                           seq_lens=seq_lens, seq_lens_q=seq_lens_q, max_token_per_sequence=max_token_per_sequence,
                           max_sequence_kv=max_sequence_kv, v_indptr=v_indptr, o_indptr=o_indptr)
        _check_head_dim_vo(head_dim_qk, head_dim_vo)
        check_heads(num_qo_heads, num_kv_heads, head_dim_qk)
        dtype = q_kv_dtypes(q_data_type, kv_data_type, o_data_type=o_data_type)
        has_mask = custom_mask is not None or packed_custom_mask is not None
        causal = bool(causal) and not has_mask
        spec, values = make_spec(num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim_qk,
                                 page_size=1, dtype=dtype, kv_layout=self._kv_layout,
                                 query_rows=None, indexing="ragged", custom_mask=has_mask,
                                 causal=causal,
                                 window_left=window_left, pos_encoding_mode=pos_encoding_mode,
                                 logits_soft_cap=logits_soft_cap, rope_scale=rope_scale, rope_theta=rope_theta,
                                 sinks=sinks, variant=variant, variant_params=variant_params,
                                 logits_scale=logits_scale)
        qo_h, kv_h = host_i32("qo_indptr", qo_indptr), host_i32("kv_indptr", kv_indptr)
        if len(qo_h) != len(kv_h):
            raise ValueError(f"attn: qo_indptr ({len(qo_h)}) and kv_indptr ({len(kv_h)}) must both have batch + 1 entries")
        graph = self._use_cuda_graph
        if graph and self._max_total_q_rows is None:
            self._max_total_q_rows = max(1, qo_h[-1])
        # The plan carries the indptr arrays read above (no host sync).
        p = self._plan(spec, values, qo_indptr=qo_h, kv_indptr=kv_h,
                       max_batch=self._max_batch if graph else None,
                       max_total_q_rows=self._max_total_q_rows if graph else None, custom_mask=has_mask,
                       fixed=self._fixed)
        p.keepalive, p.ptrs = [], {}
        if has_mask:
            kv_lens = [kv_h[b + 1] - kv_h[b] for b in range(len(kv_h) - 1)]
            self._plan_mask(p, custom_mask, packed_custom_mask, qo_h, kv_lens, self._fixed)
        p.sm_scale = core.default_sm_scale(head_dim_qk, sm_scale)
        p.dtype, p.total_kv = dtype, kv_h[-1]
        p.keywords = planned_keywords(head_dim_qk, has_mask, causal, window_left, sm_scale,
                                      dict(pos_encoding_mode=pos_encoding_mode, logits_soft_cap=logits_soft_cap,
                                           rope_scale=rope_scale, rope_theta=rope_theta))
        p.sinks = sinks
        self._planned = p
        if memo_key is not None:
            self._memoize(memo_key, self._MEMO_TEMPLATE)

    begin_forward = plan

    _MEMO_TEMPLATE = ("spec", "args", "keywords", "sm_scale", "dtype", "sinks", "mask_ptrs")

    def run(self, q, k, v, *args, q_scale=None, k_scale=None, v_scale=None, o_scale=None, out=None, lse=None,
            return_lse=False, enable_pdl=None, kv_cache_sf=None):
        """Attention of ``q`` over ragged ``k``/``v``; ``out`` or ``(out, lse)``.

        Custom-kernel ``*args`` (such as FlashInfer's ``run(q, k, v, sinks,
        sm_scale)`` of a jit_args kernel), fp8 scales other than 1 and
        ``kv_cache_sf`` (NVFP4) raise NotImplementedError.
        """
        where = "BatchPrefillWithRaggedKVCacheWrapper.run"
        reject_extra_args(where, args)
        reject_unsupported(where, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, o_scale=o_scale,
                           kv_cache_sf=kv_cache_sf)
        if ops.compiling():  # torch.compile: the op attn::ragged_run (attn.ops), the plan read when it runs
            return ops.ragged_run(self, q, k, v, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, o_scale=o_scale,
                                  out=out, lse=lse, return_lse=return_lse)
        p = self._check_planned()
        s = p.spec
        check_tensor("q", q, dtype=p.dtype, shape=(("nnz_qo", None if self._use_cuda_graph else p.total_q),
                                                   ("num_qo_heads", s.num_qo_heads), ("head_dim", s.head_dim)),
                     device=self._device, contiguous=False)
        hnd = self._kv_layout == "HND"
        kv_shape = ((("nnz_kv", None), ("num_kv_heads", s.num_kv_heads)) if not hnd
                    else (("num_kv_heads", s.num_kv_heads), ("nnz_kv", None))) + (("head_dim", s.head_dim),)
        check_tensor("k", k, dtype=p.dtype, shape=kv_shape, device=self._device, contiguous=False)
        check_tensor("v", v, dtype=p.dtype, shape=tuple(k.shape), device=self._device, contiguous=False)
        strides = ragged_kv_strides(k, v, self._kv_layout)
        nnz_kv = int(k.shape[1 if hnd else 0])
        if nnz_kv < p.total_kv:
            raise ValueError(f"attn: k and v have {nnz_kv} rows but kv_indptr[-1] is {p.total_kv}: the "
                             "requests' keys must all be there")
        q = core.dense_q(self, q, self._max_total_q_rows)  # a strided q: a q-sized copy
        out, lse = self._outputs(p, q, out, lse, return_lse)
        args = [("q", "ptr", q.data_ptr()), ("k_cache", "ptr", k.data_ptr()), ("v_cache", "ptr", v.data_ptr()),
                ("o", "ptr", out.data_ptr()), ("lse", "ptr", lse.data_ptr()),
                ("sm_scale", "f32", p.sm_scale)] + core.mask_args(p)
        if strides == (s.num_kv_heads * s.head_dim, s.head_dim):
            self._launch(p, args)   # dense NHD rows: the planned kernels
        else:
            args += [("kv_token_stride", "i64", strides[0]), ("kv_head_stride", "i64", strides[1])]
            self._launch(p, args, kernels=_strided_kernels(p, self._device))
        return (out, lse) if return_lse else out

    run_return_lse = functools.partialmethod(run, return_lse=True)

    def forward(self, q, k, v, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False, window_left=-1,
                logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """Deprecated FlashInfer spelling of :meth:`run`; its variant
        arguments must equal plan()'s (ValueError otherwise), since attn
        fixes them at plan time."""
        self._check_forward("BatchPrefillWithRaggedKVCacheWrapper.forward", causal=bool(causal),
                            pos_encoding_mode=pos_encoding_mode, window_left=window_left,
                            logits_soft_cap=logits_soft_cap, sm_scale=sm_scale, rope_scale=rope_scale,
                            rope_theta=rope_theta)
        return self.run(q, k, v)

    def forward_return_lse(self, q, k, v, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                           window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """Deprecated FlashInfer spelling of :meth:`run_return_lse` (as :meth:`forward`)."""
        self._check_forward("BatchPrefillWithRaggedKVCacheWrapper.forward_return_lse", causal=bool(causal),
                            pos_encoding_mode=pos_encoding_mode, window_left=window_left,
                            logits_soft_cap=logits_soft_cap, sm_scale=sm_scale, rope_scale=rope_scale,
                            rope_theta=rope_theta)
        return self.run(q, k, v, return_lse=True)

    def end_forward(self):
        """Nothing to release (FlashInfer compatibility)."""


_strided = {}   # a ragged spec -> (the same spec with strided_kv, the KernelInfo last checked against it)


def _strided_kernels(p, device):
    """``(module, attention kernel, merge kernel)`` of the plan's tile
    candidate in the strided-K/V build of its spec (compiled or loaded on the
    first strided run, then memoized): the same tiles and launch contract
    but two stride arguments, so the plan's work list serves both."""
    spec, checked = _strided.get(p.spec) or (dataclasses.replace(p.spec, strided_kv=True), None)
    info = core.kernel_info(spec, device)
    if info is not checked:  # a KernelInfo not seen yet: its tiles must be the planned ones
        if info.candidates != core.kernel_info(p.spec, device).candidates:
            raise RuntimeError("attn: the strided-K/V kernels have other tile candidates than the planned ones; "
                               "the kernel cache is inconsistent (python -m attn clear-cache)")
        _strided[p.spec] = (spec, info)
    c = p.summary["candidate"]
    return info.module(c), info.attention[c], info.merge[c]


def ragged_kv_strides(k, v, kv_layout):
    """``(token_stride, head_stride)`` in elements at which the kernels read
    ragged ``k`` and ``v`` in place: key t's row of KV head h starts at
    ``t * token_stride + h * head_stride``. Any NHD ``[nnz_kv, H, D]`` or HND
    ``[H, nnz_kv, D]`` view works (a slice of a fused QKV projection, an HND
    tensor, a transpose) as long as ``head_dim`` is dense, the strides and
    both tensors' addresses are 16-byte aligned, and K and V share their
    strides (they share the kernels' two stride arguments); anything else is
    a ValueError naming the strides. Nothing is copied.
    """
    if kv_layout == "NHD" and k.is_contiguous() and v.is_contiguous() and not (k.data_ptr() | v.data_ptr()) % 16:
        # The common case, checked first: run() pays this every call (the loop below costs 25x more).
        return int(k.shape[1]) * int(k.shape[2]), int(k.shape[2])
    tok, head = (0, 1) if kv_layout == "NHD" else (1, 0)
    found = []
    for name, t in (("k", k), ("v", v)):
        shape, strides = tuple(t.shape), tuple(t.stride())
        align = max(1, 16 // t.element_size())
        if shape[2] > 1 and strides[2] != 1:
            raise ValueError(f"attn: {name}: strides {list(strides)} (shape {list(shape)}): the kernels read each "
                             "key's head_dim elements dense (stride 1)")
        # A dimension of size 1 is never stepped over: its stride is free.
        pair = tuple(strides[d] if shape[d] > 1 else None for d in (tok, head))
        if any(x is not None and (x < 0 or x % align) for x in pair) or t.data_ptr() % 16:
            raise ValueError(f"attn: {name}: strides {list(strides)} (shape {list(shape)}) at address "
                             f"{t.data_ptr():#x}: the kernels copy 16-byte chunks, so the token and head strides "
                             f"must be non-negative multiples of {align} elements and the tensor 16-byte aligned")
        found.append(pair)
    (kt, kh), (vt, vh) = found
    if (kt is not None and vt is not None and kt != vt) or (kh is not None and vh is not None and kh != vh):
        raise ValueError(f"attn: k (strides {list(k.stride())}) and v (strides {list(v.stride())}) are read at one "
                         "token stride and one head stride: pass K and V views with the same strides (e.g. "
                         "slices of one fused QKV tensor, or two contiguous tensors)")
    head_dim = int(k.shape[2])
    token_stride = next((x for x in (kt, vt) if x is not None), int(k.shape[head]) * head_dim)
    head_stride = next((x for x in (kh, vh) if x is not None), head_dim)
    return int(token_stride), int(head_stride)


_plans = core.SinglePlans()
_single = _plans.last   # (device, kv_layout) -> the wrapper of the last call there


def single_prefill_with_kv_cache(q, k, v, custom_mask=None, packed_custom_mask=None, causal=False,
                                 kv_layout="NHD", pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                                 sm_scale=None, window_left=-1, logits_soft_cap=None, rope_scale=None,
                                 rope_theta=None, backend="auto", return_lse=False, **kwargs):
    """Prefill of one request: ``q`` ``[qo_len, Hq, D]`` against ``k``/``v`` ``[kv_len, Hkv, D]``.

    ``kv_layout="HND"``: ``k``/``v`` ``[Hkv, kv_len, D]``. K/V are read in
    place at their strides (see :func:`ragged_kv_strides`); a strided ``q``
    is copied (q-sized). Runs the ragged prefill wrapper,
    planned once per call signature
    (device, layout, shapes, dtype, variant arguments; a few of them, see
    :class:`attn.core.SinglePlans`) in a workspace sized for it
    (:func:`attn.get_workspace_size`), so a repeated call does not re-plan
    and can be captured in a CUDA graph (a custom mask plans every call);
    ``kwargs`` go to its plan() (``backend`` is accepted and ignored, as by
    the wrappers). Under torch.compile this is the op
    ``torch.ops.attn.single_prefill`` (:mod:`attn.ops`).
    attn difference: causal with ``qo_len > kv_len`` is well defined (the
    leading rows see no key: output 0, LSE -inf).

    >>> o = single_prefill_with_kv_cache(q, k, v, causal=True)   # doctest: +SKIP
    """
    if ops.compiling():
        extra = ops.traced_extras("single_prefill_with_kv_cache", kwargs)
        o, lse = ops._torch.ops.attn.single_prefill(q, k, v, custom_mask, packed_custom_mask, bool(causal), kv_layout,
                                                     pos_encoding_mode, sm_scale, window_left, logits_soft_cap,
                                                     rope_scale, rope_theta, extra["logits_scale"], extra["sinks"])
        return (o, lse) if return_lse else o
    out, lse = _single_prefill(q, k, v, custom_mask=custom_mask, packed_custom_mask=packed_custom_mask, causal=causal,
                               kv_layout=kv_layout, pos_encoding_mode=pos_encoding_mode, sm_scale=sm_scale,
                               window_left=window_left, logits_soft_cap=logits_soft_cap, rope_scale=rope_scale,
                               rope_theta=rope_theta, kwargs=kwargs)
    return (out, lse) if return_lse else out


def _single_prefill(q, k, v, *, custom_mask, packed_custom_mask, causal, kv_layout, pos_encoding_mode, sm_scale,
                    window_left, logits_soft_cap, rope_scale, rope_theta, kwargs, out=None, lse=None,
                    from_op=False):
    """single_prefill_with_kv_cache's work: ``(out, lse)``, into ``out``/``lse``
    when given; ``from_op``: called by the op ``attn::single_prefill``."""
    torch = torch_module()
    check_tensor("q", q, dims=3, dtype=("bf16", "f16"), contiguous=False)
    check_tensor("k", k, dims=3, dtype=dtype_name(q.dtype), device=q.device, contiguous=False)
    core.check_kv_layout(kv_layout)
    kv_len = int(k.shape[0] if kv_layout == "NHD" else k.shape[1])
    hkv = int(k.shape[1] if kv_layout == "NHD" else k.shape[0])
    qo_len, hq, d = (int(x) for x in q.shape)
    has_mask = custom_mask is not None or packed_custom_mask is not None
    variant = dict(causal=causal, pos_encoding_mode=pos_encoding_mode, sm_scale=sm_scale, window_left=window_left,
                   logits_soft_cap=logits_soft_cap, rope_scale=rope_scale, rope_theta=rope_theta)
    key = None if has_mask else core.plain_key("ragged", str(q.device), kv_layout, str(q.dtype), qo_len, hq, hkv,
                                                d, kv_len, tuple(sorted(variant.items())), kwargs=kwargs)

    def need():
        # The scratch workspace this call's plan needs.
        return get_workspace_size(hq, hkv, d, kind="ragged", max_batch=1, max_total_q_rows=max(1, qo_len),
                                  dtype=q.dtype, kv_layout=kv_layout, causal=causal, custom_mask=has_mask,
                                  window_left=window_left, logits_soft_cap=logits_soft_cap,
                                  pos_encoding_mode=pos_encoding_mode, rope_scale=rope_scale, rope_theta=rope_theta,
                                  device=q.device, **{n: kwargs[n] for n in core.SIZING_KEYWORDS if n in kwargs})

    def plan(w):
        w.plan(torch.tensor([0, qo_len], dtype=torch.int32), torch.tensor([0, kv_len], dtype=torch.int32),
               hq, hkv, d, custom_mask=custom_mask, packed_custom_mask=packed_custom_mask, q_data_type=q.dtype,
               **variant, **kwargs)

    w = _plans.get(key, (str(q.device), kv_layout), q.device, need,
                   lambda ws: BatchPrefillWithRaggedKVCacheWrapper(ws, kv_layout), plan, pin=from_op,
                   where="single_prefill_with_kv_cache")
    if out is None:
        out = torch.empty(tuple(q.shape), dtype=q.dtype, device=q.device)
    if lse is None:
        lse = torch.empty((qo_len, hq), dtype=torch.float32, device=q.device)
    w.run(q, k, v, out=out, lse=lse, return_lse=True)
    return out, lse


single_prefill_with_kv_cache_return_lse = functools.partial(single_prefill_with_kv_cache, return_lse=True)

trtllm_batch_context_with_kv_cache = not_implemented(
    "trtllm_batch_context_with_kv_cache",
    "use BatchPrefillWithPagedKVCacheWrapper (plan once per step with the CSR page table, run per layer)")
