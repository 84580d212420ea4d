"""The names engines import from ``flashinfer.utils`` that attn can honestly provide.

Enums with FlashInfer's values, the cached index/workspace buffers engines
reuse, small helpers with FlashInfer's semantics, and attn's
:func:`get_workspace_size` (the float workspace a configuration needs). ``FP4Tensor`` exists so
that imports work: attn has no NVFP4, and constructing one raises
NotImplementedError.
"""

import enum

from . import _native, core
from .core import torch_module


class PosEncodingMode(enum.Enum):
    NONE = 0
    ROPE_LLAMA = 1
    ALIBI = 2


class MaskMode(enum.Enum):
    NON_CAUSAL = 0
    CAUSAL = 1
    CUSTOM = 2
    MULTIITEMSCORING = 3


class TensorLayout(enum.Enum):
    NHD = 0
    HND = 1


_cache_buf = {}


def _get_cache_buf(name, bytes, device, zero_init=False):
    """A uint8 device buffer of at least ``bytes`` bytes, kept per (name, device)."""
    torch = torch_module()
    key = (name, str(device))
    buf = _cache_buf.get(key)
    if buf is None or buf.numel() < bytes:
        buf = _cache_buf[key] = (torch.zeros if zero_init else torch.empty)(bytes, dtype=torch.uint8, device=device)
    return buf


def _get_range_buf(seq_len, device):
    """int32 ``arange(seq_len)`` on ``device``: a view of one cached buffer
    (engines use it as decode's ``qo_indptr`` without allocating each step)."""
    torch = torch_module()
    key = ("range", str(device))
    buf = _cache_buf.get(key)
    if buf is None or buf.numel() < seq_len:
        buf = _cache_buf[key] = torch.arange(next_positive_power_of_2(seq_len), dtype=torch.int32, device=device)
    return buf[:seq_len]


def get_compute_capability(device):
    """(major, minor) of a CUDA device; ValueError for any other device."""
    torch = torch_module()
    if torch.device(device).type != "cuda":
        raise ValueError(f"attn: get_compute_capability needs a CUDA device, got {device}")
    return tuple(torch.cuda.get_device_capability(device))


def is_float8(x):
    torch = torch_module()
    return x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)


def canonicalize_torch_dtype(dtype):
    """A torch.dtype from a dtype or its name ("bfloat16")."""
    torch = torch_module()
    if isinstance(dtype, str):
        return getattr(torch, dtype)
    if isinstance(dtype, torch.dtype):
        return dtype
    raise TypeError(f"attn: dtype must be a string or torch.dtype, got {type(dtype).__name__}")


def ceil_div(x, y):
    return (x + y - 1) // y


def round_up(x, y):
    return ceil_div(x, y) * y


def next_positive_power_of_2(x):
    """The smallest power of 2 that is >= x (1 for x < 1).

    >>> [next_positive_power_of_2(x) for x in (0, 1, 5, 8)]
    [1, 1, 8, 8]
    """
    return 1 if x < 1 else 1 << (int(x) - 1).bit_length()


class FP4Tensor:
    """FlashInfer's NVFP4 tensor (packed data and scales); constructing one
    raises NotImplementedError, since attn has no NVFP4 output."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("attn: FP4Tensor (NVFP4 output) is not implemented; attn writes the output "
                                  "in q's dtype (bfloat16/float16): pass a plain tensor as out=")


WORKSPACE_KINDS = ("decode", "prefill", "ragged")


def get_workspace_size(num_qo_heads, num_kv_heads, head_dim, page_size=16, *, kind="decode", max_batch=1,
                       max_total_q_rows=None, q_len_per_req=1, dtype="bfloat16", kv_layout="NHD", causal=False,
                       custom_mask=False, window_left=-1, logits_soft_cap=None, pos_encoding_mode="NONE",
                       rope_scale=None, rope_theta=None, logits_scale=None, sinks=None, variant=None,
                       variant_params=None, use_cuda_graph=False, device=None, arch=None, num_sms=None,
                       fixed_split_size=None, disable_split_kv=False, max_kv_tokens=None):
    """The bytes of ``float_workspace_buffer`` a wrapper's plan() needs:
    every plan of up to ``max_batch`` requests and ``max_total_q_rows``
    query rows fits in a buffer of this size with the planner's own split-KV
    scratch. A smaller buffer works too: plan() caps the scratch to fit it
    (the planner then splits fewer tiles; the output is the same attention),
    and raises ValueError naming this size only when the plan itself does
    not fit.

    ``kind``: ``"decode"`` (BatchDecodeWithPagedKVCacheWrapper;
    ``q_len_per_req`` query tokens per request, so ``max_total_q_rows`` is
    ``max_batch * q_len_per_req``), ``"prefill"``
    (BatchPrefillWithPagedKVCacheWrapper) or ``"ragged"``
    (BatchPrefillWithRaggedKVCacheWrapper; ``page_size`` is ignored); the
    prefill kinds need ``max_total_q_rows``. The remaining keywords are
    plan()'s (``custom_mask``: True when plan() gets a custom or packed
    mask; ``sinks``: anything not None, the table itself is not read), and
    ``use_cuda_graph`` the constructor's. The size is computed as plan()
    computes it (:func:`attn.core.plan_config`, then the C++ planner's
    ``plan_workspace_size``), from the kernels' tile candidates (their
    launch contracts: compiled in milliseconds, or looked up in the kernel
    cache) and the SM count: of ``device`` (default: the current CUDA
    device), or, without a GPU, ``arch`` and ``num_sms`` (an H100/H200:
    ``arch="sm_90a", num_sms=132``). ``fixed_split_size``/``disable_split_kv``
    (decode): plan()'s batch-invariant split; a fixed split needs
    ``max_kv_tokens``, the most KV tokens of one plan (pages times
    ``page_size``; in graph mode the indices buffer's pages), since its work
    list grows with the keys over the split size.

    What the size holds: the flat plan (work list and merge map, which grow
    with the query tiles, about 100 bytes a query row) and the split-KV
    scratch (partial outputs and LSE of split tiles), which is bounded by the
    kernels' grid, 2 x CTAs x tile rows, not by the query rows
    (docs/Runtime.md, "The split scratch follows the grid"): 128 requests x
    127 rows at 32/8 heads, head_dim 128 need 18.3 MiB on an H200, so the
    256 MiB workspace FlashInfer's tests allocate holds every plan of their
    shapes. A fixed split keeps its own bound (``max_kv_tokens``).

    >>> get_workspace_size(32, 8, 128, 16, kind="prefill", max_batch=128,
    ...                    max_total_q_rows=16384, arch="sm_90a", num_sms=132)  # doctest: +SKIP
    """
    from .paged import check_heads, decode_query, make_spec, q_kv_dtypes, split_kv_bound
    if kind not in WORKSPACE_KINDS:
        raise ValueError(f"attn: kind must be one of {', '.join(WORKSPACE_KINDS)}, got {kind!r}")
    check_heads(num_qo_heads, num_kv_heads, head_dim, page_size if kind != "ragged" else None)
    k = q_len_per_req
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"attn: q_len_per_req must be a positive int, got {k!r}")
    if not isinstance(max_batch, int) or max_batch < 1:
        raise ValueError(f"attn: max_batch must be a positive int, got {max_batch!r}")
    if kind == "decode":
        query_rows, causal = decode_query(k)
        max_total_q_rows = max_batch * k
    elif not isinstance(max_total_q_rows, int) or max_total_q_rows < 1:
        raise ValueError(f"attn: kind={kind!r} needs max_total_q_rows (a positive int: the most query rows "
                         f"of one plan), got {max_total_q_rows!r}")
    else:
        query_rows = None
    has_mask = bool(custom_mask)
    spec, values = make_spec(num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                             page_size=page_size if kind != "ragged" else 1, dtype=q_kv_dtypes(dtype, None),
                             kv_layout=core.check_kv_layout(kv_layout), query_rows=query_rows,
                             indexing="ragged" if kind == "ragged" else "paged", custom_mask=has_mask,
                             causal=bool(causal) and not has_mask, window_left=window_left,
                             pos_encoding_mode=pos_encoding_mode, logits_soft_cap=logits_soft_cap,
                             rope_scale=rope_scale, rope_theta=rope_theta, sinks=sinks, variant=variant,
                             variant_params=variant_params, logits_scale=logits_scale)
    split = core.split_mode(fixed_split_size, disable_split_kv)
    if split != (0, False) and kind != "decode":
        raise NotImplementedError("attn: fixed_split_size and disable_split_kv are implemented by the decode "
                                  f"wrappers only, not kind={kind!r}")
    if split[0] and (not isinstance(max_kv_tokens, int) or isinstance(max_kv_tokens, bool) or max_kv_tokens < 1):
        raise ValueError("attn: fixed_split_size needs max_kv_tokens (a positive int: the most KV tokens of one "
                         f"plan, pages x page_size), got {max_kv_tokens!r}")
    info = _sizing_info(spec, device, arch, num_sms)
    config = core.plan_config(info, core.variant_args(spec, values, None), custom_mask=has_mask,
                              graph_mode=use_cuda_graph, max_batch=max_batch, max_total_q_rows=max_total_q_rows,
                              split=None if split == (0, False) else
                              (split[0], split[1], split_kv_bound(info, max_kv_tokens or 0, 1, k)))
    return int(_native.native().plan_workspace_size(config)[1])


def _sizing_info(spec, device, arch, num_sms):
    """The KernelInfo plan() would use: that of ``device`` (or the current
    CUDA device) unless ``arch``/``num_sms`` say the chip."""
    if arch is None and num_sms is None:
        if device is None:
            device = _current_cuda_device("arch= and num_sms=")
        return core.kernel_info(spec, device)
    if (arch is None or num_sms is None) and device is None:
        device = _current_cuda_device("both arch= and num_sms=")
    arch = arch or core.device_arch(device)
    num_sms = num_sms or core.num_sms(device)
    if not isinstance(num_sms, int) or num_sms < 1:
        raise ValueError(f"attn: num_sms must be a positive int, got {num_sms!r}")
    from .compiler import describe
    return core.KernelInfo(spec, arch, device, describe(spec, arch), num_sms)


def _current_cuda_device(instead):
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        raise ValueError("attn: get_workspace_size: no CUDA device to size for; without one give "
                         f"{instead} (an H100/H200: arch='sm_90a', num_sms=132)")
    return torch.device("cuda", torch.cuda.current_device())
