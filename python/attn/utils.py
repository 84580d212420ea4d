"""The names engines import from ``flashinfer.utils`` that attn can honestly provide.

Enums with FlashInfer's values, the cached index/workspace buffers engines
reuse, and small helpers with FlashInfer's semantics. ``FP4Tensor`` exists so
that imports work: attn has no NVFP4, and constructing one raises
NotImplementedError.
"""

import enum

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
