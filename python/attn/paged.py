"""The paged-KV plan/run shared by the decode, prefill and cascade wrappers."""

from . import core
from .core import check_tensor, dtype_name, host_i32, torch_module
from .variants import AttentionSpec, build_variants


def check_heads(num_qo_heads, num_kv_heads, head_dim, page_size=None):
    for n, v in (("num_qo_heads", num_qo_heads), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)) + \
            ((("page_size", page_size),) if page_size is not None else ()):
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"attn: {n} must be a positive int, got {v!r}")
    if num_qo_heads % num_kv_heads:
        raise ValueError(f"attn: num_qo_heads ({num_qo_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")


def q_kv_dtypes(q_data_type, kv_data_type, data_type=None, o_data_type=None):
    q = dtype_name(data_type if data_type is not None else q_data_type, "q_data_type")
    kv = dtype_name(kv_data_type, "kv_data_type") if kv_data_type is not None else q
    if q not in ("bf16", "f16"):
        raise TypeError(f"attn: q_data_type must be bfloat16 or float16, got {q}")
    if kv != q:
        raise TypeError(f"attn: kv_data_type ({kv}) must equal q_data_type ({q}); attn has no mixed or fp8 KV yet")
    if o_data_type is not None and dtype_name(o_data_type, "o_data_type") != q:
        raise NotImplementedError(f"attn: o_data_type={o_data_type} is not implemented: the output has q's "
                                  f"dtype ({q}); leave o_data_type None")
    return q


def decode_query(q_len_per_req):
    """(query_rows, causal) of the decode kernels for ``q_len_per_req``
    query tokens per request: one row (no mask) for 1, else rows that vary
    per batch, each seeing the keys up to its own position."""
    return (1, False) if q_len_per_req == 1 else (None, True)


def make_spec(*, num_qo_heads, num_kv_heads, head_dim, page_size, dtype, kv_layout, query_rows,
              indexing="paged", custom_mask=False, **variant_kwargs):
    """(AttentionSpec, parameter values) from FlashInfer-style keywords.

    ``custom_mask``: the attention takes a bit-packed custom mask, which
    replaces causal (``causal`` is dropped, as FlashInfer ignores it then).
    """
    if custom_mask:
        variant_kwargs["causal"] = False
    if indexing == "ragged":
        # Ragged kernels read K/V at the strides run() passes, whatever the
        # layout (prefill.ragged_kv_strides): one NHD-named spec serves both.
        kv_layout = "NHD"
    names, values = build_variants(**variant_kwargs)
    variant = variant_kwargs.get("variant")
    spec = AttentionSpec(head_dim=head_dim, num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads,
                         page_size=page_size if indexing == "paged" else 1, dtype=dtype, layout=kv_layout,
                         indexing=indexing, query_rows=query_rows, variants=names,
                         variant_defs=variant.text if variant is not None else "",
                         custom_params=tuple((n, tuple(variant.params[n])) for n in variant.names)
                         if variant is not None else (), custom_mask=bool(custom_mask))
    return spec, values


def planned_keywords(head_dim, has_mask, causal, window_left, sm_scale, variant_kwargs):
    """run_keywords() of a plan; ``causal`` only without a custom mask (which replaces it)."""
    flags = {} if has_mask else {"causal": bool(causal)}
    return core.run_keywords(head_dim, window_left=window_left, sm_scale=sm_scale, **flags,
                             **{k: variant_kwargs[k] for k in ("pos_encoding_mode", "logits_soft_cap", "rope_scale",
                                                               "rope_theta") if k in variant_kwargs})


def split_kv_bound(info, pages, page_size, q_len_per_req):
    """The planner's ``max_kv_tokens`` for a fixed split (the keys of a plan's
    query tiles per head group): the tokens of ``pages`` (a plan's own, or in
    graph mode the indices buffer's) times the most row tiles a decode request
    of ``q_len_per_req`` tokens has under any of the kernels' candidates (1
    for plain decode)."""
    tiles = max(-(-q_len_per_req * c["gqa_pack"] // c["q_rows"]) for c in info.candidates)
    return pages * page_size * tiles


def to_device_i32(name, x, device, fixed=None):
    """An int32 device copy of ``x``; into ``fixed[:len]`` when given (CUDA graphs)."""
    torch = torch_module()
    if not hasattr(x, "detach"):
        x = torch.tensor(list(x), dtype=torch.int32)
    n = int(x.numel())
    if fixed is not None:
        check_tensor(f"{name} buffer", fixed, dtype="i32", device=device, dims=1)
        if fixed.numel() < n:
            raise ValueError(f"attn: {name} has {n} entries but its fixed buffer (use_cuda_graph=True) "
                             f"holds only {fixed.numel()}")
        fixed[:n].copy_(x.to(device=device, dtype=torch.int32), non_blocking=True)
        return fixed
    if x.device == torch.device(device) and x.dtype == torch.int32 and x.is_contiguous():
        return x
    return x.to(device=device, dtype=torch.int32).contiguous()


class PagedWrapperBase(core.WrapperBase):
    """plan/run over a paged KV cache for any query length."""

    def _plan_paged(self, *, qo_indptr, kv_indptr, kv_indices, kv_last_len, num_qo_heads, num_kv_heads,
                    head_dim, page_size, dtype, query_rows, causal, window_left, sm_scale, fixed,
                    max_batch=None, max_total_q_rows=None, custom_mask=None, packed_custom_mask=None,
                    qo_host=None, min_kv_len=1, split=None, **variant_kwargs):
        """``qo_host``: qo_indptr already read on the host (decode's constant
        0, k, 2k, ..); ``min_kv_len`` > 1: every request must hold that many keys (decode
        with ``q_len_per_req`` query tokens among its last keys); ``split``:
        (fixed_split_tokens, disable_split) of a batch-invariant decode plan
        (:func:`attn.core.split_mode`), None for the planner's own splits."""
        check_heads(num_qo_heads, num_kv_heads, head_dim, page_size)
        has_mask = custom_mask is not None or packed_custom_mask is not None
        causal = bool(causal) and not has_mask
        spec, values = make_spec(num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                                 page_size=page_size, dtype=dtype, kv_layout=self._kv_layout,
                                 query_rows=query_rows, causal=causal, window_left=window_left,
                                 custom_mask=has_mask, **variant_kwargs)
        qo_h = qo_host if qo_host is not None else host_i32("qo_indptr", qo_indptr)
        kv_h, last_h = host_i32("kv_indptr", kv_indptr), host_i32("last_page_len", kv_last_len)
        if len(kv_h) != len(qo_h) or len(last_h) != len(kv_h) - 1:
            raise ValueError(f"attn: indptr arrays must have batch + 1 entries and last_page_len batch: "
                             f"qo_indptr {len(qo_h)}, kv_indptr {len(kv_h)}, last_page_len {len(last_h)}")
        if min_kv_len > 1:
            for b in range(len(last_h)):
                pages = kv_h[b + 1] - kv_h[b]
                kv_len = (pages - 1) * page_size + last_h[b] if pages > 0 else 0
                if kv_len < min_kv_len:
                    raise ValueError(f"attn: request {b} has {kv_len} keys, fewer than q_len_per_req "
                                     f"({min_kv_len}): its query tokens must be among its keys")
        n_idx = kv_indices.shape[0] if hasattr(kv_indices, "shape") else len(kv_indices)
        if n_idx < kv_h[-1]:
            raise ValueError(f"attn: kv_indptr[-1] is {kv_h[-1]} but kv_indices has only {n_idx} entries: "
                             "every page the requests use needs its index")
        if split is not None:
            pages = fixed["kv_indices"].numel() if fixed.get("kv_indices") is not None else kv_h[-1]
            split = (split[0], split[1], split_kv_bound(core.kernel_info(spec, self._device), int(pages),
                                                        page_size, min_kv_len))
        # The plan carries the index arrays read above (the planner's copies, no host sync); the page
        # table goes up apart (graph mode: into the fixed buffer the graph captured).
        p = self._plan(spec, values, qo_indptr=qo_h, kv_indptr=kv_h, kv_last_len=last_h, max_batch=max_batch,
                       max_total_q_rows=max_total_q_rows, custom_mask=has_mask, split=split, fixed=fixed)
        d_idx = to_device_i32("kv_indices", kv_indices, self._device, fixed.get("kv_indices"))
        p.keepalive = [d_idx]
        p.ptrs = {"kv_indices": d_idx.data_ptr()}
        p.kv_pages = kv_h[-1]
        if has_mask:
            kv_lens = [(kv_h[b + 1] - kv_h[b] - 1) * page_size + last_h[b] if kv_h[b + 1] > kv_h[b] else 0
                       for b in range(len(last_h))]
            self._plan_mask(p, custom_mask, packed_custom_mask, qo_h, kv_lens, fixed)
        p.sm_scale = core.default_sm_scale(head_dim, sm_scale)
        p.dtype, p.page_size, p.window_left = dtype, page_size, window_left
        p.keywords = planned_keywords(head_dim, has_mask, causal, window_left, sm_scale, variant_kwargs)
        p.sinks = variant_kwargs.get("sinks")
        self._planned = p
        return p

    def _run_paged(self, q, paged_kv_cache, *, out, lse, return_lse, q_scale=None, k_scale=None, v_scale=None,
                   sinks=None):
        p = self._check_planned()
        core.check_run_sinks(p, sinks)
        s = p.spec
        per_req = getattr(p, "q_len_per_req", 1)
        # Multi-token decode: name the rows as the plan made them, so a wrong q_len_per_req reads as one.
        label = "nnz_qo" if per_req == 1 else f"batch {p.total_q // per_req} * q_len_per_req {per_req}"
        rows = (label, None if self._use_cuda_graph else p.total_q)
        check_tensor("q", q, dtype=p.dtype, shape=(rows, ("num_qo_heads", s.num_qo_heads),
                                                   ("head_dim", s.head_dim)), device=self._device, contiguous=False)
        if self._use_cuda_graph and not (p.total_q <= q.shape[0] <= p.config["max_total_q_rows"]):
            raise ValueError(f"attn: q has {q.shape[0]} rows; the plan has {p.total_q} ({label}) and the graph "
                             f"maximum is {p.config['max_total_q_rows']}")
        k, v, page_stride, v_offset = core.split_paged_kv_cache(paged_kv_cache, self._kv_layout, p.page_size,
                                                                s.num_kv_heads, s.head_dim, p.dtype, self._device)
        q = core.dense_q(self, q, p.config["max_total_q_rows"])  # a strided q: a q-sized copy
        out, lse = self._outputs(p, q, out, lse, return_lse)
        scale = p.sm_scale * (1.0 if q_scale is None else float(q_scale)) * (1.0 if k_scale is None else float(k_scale))
        k_ptr = k.data_ptr()
        v_ptr = k_ptr + v_offset * k.element_size() if v_offset is not None else v.data_ptr()
        # The kernels check every page index against the cache's pages and
        # set the device's index_error word on a bad one (attn.errors.PageIndexError).
        num_pages = int(k.shape[0])
        if num_pages >= 2 ** 31:
            raise ValueError(f"attn: paged_kv_cache has {num_pages} pages; at most {2 ** 31 - 1} are supported")
        if num_pages == 0 and p.kv_pages > 0:
            raise ValueError(f"attn: paged_kv_cache has no pages but the plan reads {p.kv_pages}")
        args = [("q", "ptr", q.data_ptr()), ("k_cache", "ptr", k_ptr), ("v_cache", "ptr", v_ptr),
                ("o", "ptr", out.data_ptr()), ("lse", "ptr", lse.data_ptr()),
                ("kv_indices", "ptr", p.ptrs["kv_indices"]), ("page_stride", "i64", page_stride),
                ("num_pages", "i32", num_pages),
                ("index_error", "ptr", core.index_error_word(self._device).data_ptr()),
                ("sm_scale", "f32", scale)] + core.mask_args(p)
        self._launch(p, args)
        if v_scale is not None:
            out.mul_(float(v_scale))
        return (out, lse) if return_lse else out
