"""Merging attention states and multi-level cascade attention (FlashInfer's ``flashinfer.cascade``).

A state is ``(v, s)``: the attention output over a set of keys and its base-2
log-sum-exp. Attention over the union of disjoint key sets is the merge
``s = log2(2^s_a + 2^s_b)``, ``v = 2^(s_a - s) v_a + 2^(s_b - s) v_b``
(docs/Semantics.md). States with LSE ``-inf`` (no visible key) contribute
nothing; if all are ``-inf`` the result is output 0 and LSE ``-inf`` (never
NaN).

On CUDA tensors the merges run as generated kernels (``attn.merge_states``
compiled like attention: attn/rows.py), float32 math, the result in the
states' element type; on CPU tensors they are PyTorch code (the reference).
"""

from .core import check_tensor, torch_module
from .rows import merge_into
from .paged import PagedWrapperBase
from .prefill import BatchPrefillWithPagedKVCacheWrapper


def _merge(vs, ss):
    """vs: [..., n, H, D] float, ss: [..., n, H] -> merged (v, s)."""
    torch = torch_module()
    m = ss.max(dim=-2, keepdim=True).values
    m_safe = torch.where(torch.isinf(m) & (m < 0), torch.zeros_like(m), m)
    w = torch.exp2(ss - m_safe)                       # 0 for -inf states
    denom = w.sum(dim=-2, keepdim=True)
    v = (vs * w.unsqueeze(-1)).sum(dim=-3) / torch.where(denom > 0, denom, torch.ones_like(denom)).squeeze(-2).unsqueeze(-1)
    s = torch.where(denom > 0, torch.log2(denom) + m_safe, torch.full_like(denom, float("-inf"))).squeeze(-2)
    return v, s


def _check_state(name, v, s):
    check_tensor(f"v_{name}", v, dtype=("bf16", "f16", "f32"), dims=3)
    check_tensor(f"s_{name}", s, dtype="f32", shape=tuple(v.shape[:2]), device=v.device)


def merge_state(v_a, s_a, v_b, s_b):
    """Merges two states: ``v`` ``[seq, H, D]``, ``s`` float32 ``[seq, H]`` (base 2).

    >>> v, s = attn.merge_state(v_a, s_a, v_b, s_b)   # doctest: +SKIP
    """
    torch = torch_module()
    _check_state("a", v_a, s_a)
    _check_state("b", v_b, s_b)
    if v_a.shape != v_b.shape or v_a.dtype != v_b.dtype:
        raise ValueError(f"attn: v_a {list(v_a.shape)} {v_a.dtype} and v_b {list(v_b.shape)} {v_b.dtype} differ")
    check_tensor("v_b", v_b, device=v_a.device, contiguous=False)
    if v_a.is_cuda:
        v = torch.empty(v_a.shape, dtype=v_a.dtype, device=v_a.device)
        s = torch.empty(s_a.shape, dtype=torch.float32, device=v_a.device)
        merge_into([v_a, v_b], [s_a, s_b], v, s)
        return v, s
    v, s = _merge(torch.stack([v_a.float(), v_b.float()], dim=-3), torch.stack([s_a, s_b], dim=-2))
    return v.to(v_a.dtype), s


def merge_state_in_place(v, s, v_other, s_other, mask=None):
    """Merges ``(v_other, s_other)`` into ``(v, s)`` in place; ``mask`` (bool ``[seq]``) limits the rows."""
    torch = torch_module()
    if mask is not None:
        check_tensor("mask", mask, shape=(v.shape[0],), device=v.device, contiguous=False)
    if v.is_cuda:
        _check_state("a", v, s)
        _check_state("b", v_other, s_other)
        if v.shape != v_other.shape or v.dtype != v_other.dtype:
            raise ValueError(f"attn: v {list(v.shape)} {v.dtype} and v_other {list(v_other.shape)} "
                             f"{v_other.dtype} differ")
        check_tensor("v_other", v_other, device=v.device, contiguous=False)
        merge_into([v, v_other], [s, s_other], v, s, mask)
        return
    mv, ms = merge_state(v, s, v_other, s_other)
    if mask is not None:
        m = mask.bool()
        mv = torch.where(m[:, None, None], mv, v)
        ms = torch.where(m[:, None], ms, s)
    v.copy_(mv)
    s.copy_(ms)


def merge_states(v, s):
    """Merges ``n`` states per row: ``v`` ``[seq, n, H, D]``, ``s`` ``[seq, n, H]`` -> ``([seq, H, D], [seq, H])``."""
    check_tensor("v", v, dtype=("bf16", "f16", "f32"), dims=4)
    check_tensor("s", s, dtype="f32", shape=tuple(v.shape[:3]), device=v.device)
    if v.is_cuda and v.shape[1] > 0:
        torch = torch_module()
        seq, n, heads, d = v.shape
        out = torch.empty((seq, heads, d), dtype=v.dtype, device=v.device)
        lse = torch.empty((seq, heads), dtype=torch.float32, device=v.device)
        if n == 1:  # one state: itself, except that -inf rows are 0
            out.copy_(torch.where(torch.isneginf(s[:, 0])[..., None], 0, v[:, 0]))
            lse.copy_(s[:, 0])
        else:
            merge_into([v[:, i] for i in range(n)], [s[:, i] for i in range(n)], out, lse)
        return out, lse
    out, lse = _merge(v.float(), s)
    return out.to(v.dtype), lse


class MultiLevelCascadeAttentionWrapper:
    """Cascade attention over ``num_levels`` page tables of one paged cache.

    Level 0 is typically the shared prefix, the last level each request's
    own tokens; every level is attended with the paged prefill wrapper and
    the states are merged. FlashInfer's API: ``plan`` takes a list of
    indptr/indices arrays per level; only the last level is causal.

    >>> w = attn.MultiLevelCascadeAttentionWrapper(2, ws, "NHD")                    # doctest: +SKIP
    >>> w.plan([qo0, qo1], [kvp0, kvp1], [kvi0, kvi1], [last0, last1], 32, 8, 128, 16)  # doctest: +SKIP
    >>> o = w.run(q, kv_cache)                                                       # doctest: +SKIP

    attn difference: the levels run as separate prefill launches merged in
    PyTorch; the compiler's composed formats (one decomposed attention) are
    not wired here yet. Positions for RoPE are per level, as in FlashInfer.
    """

    def __init__(self, num_levels, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False,
                 qo_indptr_buf_arr=None, paged_kv_indptr_buf_arr=None, paged_kv_indices_buf_arr=None,
                 paged_kv_last_page_len_buf_arr=None):
        if not isinstance(num_levels, int) or num_levels < 1:
            raise ValueError(f"attn: num_levels must be a positive int, got {num_levels!r}")
        torch = None
        n = num_levels
        self._num_levels = n
        # One workspace slice per level.
        size = float_workspace_buffer.numel() // n
        self._wrappers = []
        for i in range(n):
            bufs = {}
            if use_cuda_graph:
                bufs = dict(qo_indptr_buf=qo_indptr_buf_arr[i], paged_kv_indptr_buf=paged_kv_indptr_buf_arr[i],
                            paged_kv_indices_buf=paged_kv_indices_buf_arr[i],
                            paged_kv_last_page_len_buf=paged_kv_last_page_len_buf_arr[i])
            ws = float_workspace_buffer[i * size:(i + 1) * size]
            self._wrappers.append(BatchPrefillWithPagedKVCacheWrapper(ws, kv_layout, use_cuda_graph, **bufs))

    def plan(self, qo_indptr_arr, paged_kv_indptr_arr, paged_kv_indices_arr, paged_kv_last_page_len, num_qo_heads,
             num_kv_heads, head_dim, page_size, causal=False, pos_encoding_mode="NONE",
             use_fp16_qk_reduction=False, sm_scale=None, window_left=-1, logits_soft_cap=None, rope_scale=None,
             rope_theta=None, q_data_type="float16", kv_data_type=None, *, variant=None, variant_params=None,
             logits_scale=None):
        """Plans every level (``paged_kv_last_page_len`` is a list per level);
        FlashInfer's arguments in FlashInfer's order, attn's keyword-only.
        No ``sinks``: each level's softmax would count them once more."""
        n = self._num_levels
        for name, a in (("qo_indptr_arr", qo_indptr_arr), ("paged_kv_indptr_arr", paged_kv_indptr_arr),
                        ("paged_kv_indices_arr", paged_kv_indices_arr),
                        ("paged_kv_last_page_len", paged_kv_last_page_len)):
            if len(a) != n:
                raise ValueError(f"attn: {name} has {len(a)} levels, the wrapper {n}")
        for i, w in enumerate(self._wrappers):
            w.plan(qo_indptr_arr[i], paged_kv_indptr_arr[i], paged_kv_indices_arr[i], paged_kv_last_page_len[i],
                   num_qo_heads, num_kv_heads, head_dim, page_size, causal=causal if i == n - 1 else False,
                   pos_encoding_mode=pos_encoding_mode, sm_scale=sm_scale, window_left=window_left,
                   logits_soft_cap=logits_soft_cap, rope_scale=rope_scale, rope_theta=rope_theta,
                   q_data_type=q_data_type, kv_data_type=kv_data_type, variant=variant,
                   variant_params=variant_params, logits_scale=logits_scale)

    begin_forward = plan

    def run(self, q, paged_kv_cache):
        """Output of cascade attention for ``q`` ``[nnz_qo, H, D]``."""
        out, lse = self._wrappers[0].run(q, paged_kv_cache, return_lse=True)
        for w in self._wrappers[1:]:
            o_i, s_i = w.run(q, paged_kv_cache, return_lse=True)
            merge_state_in_place(out, lse, o_i, s_i)
        return out

    forward = run


def _shared_prefix_state(q, k_shared, v_shared, kv_layout, sm_scale):
    """Every query row over the whole shared prefix (non-causal), with LSE."""
    from .prefill import single_prefill_with_kv_cache
    return single_prefill_with_kv_cache(q, k_shared, v_shared, causal=False, kv_layout=kv_layout,
                                        sm_scale=sm_scale, return_lse=True)


def _reject_rope(name, rope_scale, rope_theta, allow_fp16_qk_reduction):
    if rope_scale is not None or rope_theta is not None:
        raise NotImplementedError(f"attn: {name}.forward(rope_scale/rope_theta) is not implemented (its "
                                  "pos_encoding_mode is NONE); use MultiLevelCascadeAttentionWrapper with "
                                  "pos_encoding_mode='ROPE_LLAMA'")
    if allow_fp16_qk_reduction:
        raise NotImplementedError(f"attn: {name}.forward(allow_fp16_qk_reduction=True) is not implemented "
                                  "(attn accumulates Q K^T in float32)")


class _SharedPrefixWrapper:
    """What FlashInfer's two two-level wrappers share: the unique part's
    wrapper, planned at the first ``forward`` of each set of plan keywords
    after ``begin_forward`` (FlashInfer takes ``sm_scale``, and for prefill
    ``causal``, at ``forward``; attn's kernels need them at plan time), the
    prefix attended by :func:`_shared_prefix_state`, and the merge."""

    def __init__(self, unique, kv_layout):
        self._kv_layout, self._unique = kv_layout, unique
        self._args = None
        self._planned = None

    def _record(self, args):
        self._args, self._planned = args, None

    def _merged(self, q, k_shared, v_shared, unique_kv_cache, plan_keywords, sm_scale, rope_scale, rope_theta,
                allow_fp16_qk_reduction):
        _reject_rope(type(self).__name__, rope_scale, rope_theta, allow_fp16_qk_reduction)
        if self._args is None:
            raise RuntimeError("attn: call begin_forward() (plan) before forward() (run)")
        if self._planned != plan_keywords:
            self._unique.plan(*self._args, **plan_keywords)
            self._planned = plan_keywords
        v_a, s_a = _shared_prefix_state(q, k_shared, v_shared, self._kv_layout, sm_scale)
        v_b, s_b = self._unique.run(q, unique_kv_cache, return_lse=True)
        merge_state_in_place(v_a, s_a, v_b, s_b)
        return v_a

    def end_forward(self):
        """Nothing to release (FlashInfer's no-op)."""


class BatchDecodeWithSharedPrefixPagedKVCacheWrapper(_SharedPrefixWrapper):
    """FlashInfer's two-level decode (deprecated there in favour of
    :class:`MultiLevelCascadeAttentionWrapper`): every request shares the
    prefix ``k_shared``/``v_shared`` (``[shared_len, Hkv, D]``, NHD; HND
    ``[Hkv, shared_len, D]``), given as plain tensors, and has its own pages.

    The prefix is attended once per query row by
    :func:`attn.single_prefill_with_kv_cache` (non-causal, LSE), the unique
    pages by :class:`BatchDecodeWithPagedKVCacheWrapper`, and the two states
    are merged by their LSE (:func:`merge_state`). Same constructor,
    ``begin_forward``/``plan`` and ``forward``/``run`` as FlashInfer's;
    FlashInfer takes ``sm_scale`` at ``forward``, so the unique part is
    planned at the first ``forward`` of each ``sm_scale`` after
    ``begin_forward``.
    """

    def __init__(self, float_workspace_buffer, kv_layout="NHD"):
        from .decode import BatchDecodeWithPagedKVCacheWrapper
        super().__init__(BatchDecodeWithPagedKVCacheWrapper(float_workspace_buffer, kv_layout), kv_layout)

    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
             data_type="float16"):
        """Records the unique part's page table (FlashInfer's arguments and order)."""
        self._record((indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size))
        self._dtype = data_type

    begin_forward = plan

    def run(self, q, k_shared, v_shared, unique_kv_cache, allow_fp16_qk_reduction=False, sm_scale=None,
            rope_scale=None, rope_theta=None):
        """Decode output of ``q`` ``[batch, Hq, D]`` over the prefix and each
        request's own pages."""
        return self._merged(q, k_shared, v_shared, unique_kv_cache,
                            dict(q_data_type=self._dtype, sm_scale=sm_scale), sm_scale, rope_scale, rope_theta,
                            allow_fp16_qk_reduction)

    forward = run


class BatchPrefillWithSharedPrefixPagedKVCacheWrapper(_SharedPrefixWrapper):
    """FlashInfer's two-level prefill/append (deprecated there in favour of
    :class:`MultiLevelCascadeAttentionWrapper`): every request's new rows see
    the whole shared prefix ``k_shared``/``v_shared`` (plain tensors, as in
    the decode variant) and, causally when ``causal``, their own pages.

    The prefix part is :func:`attn.single_prefill_with_kv_cache` of all rows
    (non-causal, LSE), the unique part
    :class:`BatchPrefillWithPagedKVCacheWrapper`, merged by LSE. FlashInfer
    takes ``causal`` at ``forward``; attn's kernels need it at plan time, so
    the unique part is planned at the first ``forward`` of each ``causal``
    value after ``begin_forward`` (the plan is kept for later calls).
    """

    def __init__(self, float_workspace_buffer, kv_layout="NHD"):
        from .prefill import BatchPrefillWithPagedKVCacheWrapper
        super().__init__(BatchPrefillWithPagedKVCacheWrapper(float_workspace_buffer, kv_layout), kv_layout)

    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
             num_kv_heads, head_dim, page_size):
        """Records the unique part's page table (FlashInfer's arguments and order)."""
        self._record((qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len, num_qo_heads,
                      num_kv_heads, head_dim, page_size))

    begin_forward = plan

    def run(self, q, k_shared, v_shared, unique_kv_cache, causal=False, allow_fp16_qk_reduction=False,
            sm_scale=None, rope_scale=None, rope_theta=None):
        """Output of ``q`` ``[nnz_qo, Hq, D]`` over the prefix and each
        request's own pages."""
        return self._merged(q, k_shared, v_shared, unique_kv_cache,
                            dict(causal=bool(causal), sm_scale=sm_scale, q_data_type=q.dtype), sm_scale,
                            rope_scale, rope_theta, allow_fp16_qk_reduction)

    forward = run
