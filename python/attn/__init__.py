"""attn: attention for LLM serving, compiled by an MLIR compiler, with FlashInfer's Python API.

Switching from FlashInfer is an import change::

    import attn as flashinfer   # or: from attn import BatchDecodeWithPagedKVCacheWrapper

Kernels are compiled on first use and kept in an on-disk cache
(``$ATTN_CACHE_DIR`` or ``~/.cache/attn``); machines without the compiler
load kernels precompiled with ``python -m attn.precompile``. Importing needs
neither a GPU nor PyTorch; running attention needs both. See docs/Python.md.
"""

from .cache import KernelCache, default_cache, default_cache_dir
from .cascade import MultiLevelCascadeAttentionWrapper, merge_state, merge_state_in_place, merge_states
from .decode import BatchDecodeWithPagedKVCacheWrapper, single_decode_with_kv_cache
from .errors import AttnError, CompileError, KernelNotFoundError
from .mask import packbits, segment_packbits
from .page import append_paged_kv_cache, get_batch_indices_positions
from .prefill import (BatchPrefillWithPagedKVCacheWrapper, BatchPrefillWithRaggedKVCacheWrapper,
                      single_prefill_with_kv_cache)
from .variants import AttentionSpec, Variant
from ._native import has_compiler, has_native

__version__ = "0.1.0"

__all__ = [
    "BatchDecodeWithPagedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper",
    "BatchPrefillWithRaggedKVCacheWrapper", "MultiLevelCascadeAttentionWrapper",
    "merge_state", "merge_state_in_place", "merge_states", "append_paged_kv_cache",
    "get_batch_indices_positions", "single_prefill_with_kv_cache", "single_decode_with_kv_cache",
    "Variant", "AttentionSpec", "KernelCache", "default_cache", "default_cache_dir",
    "AttnError", "CompileError", "KernelNotFoundError", "has_compiler", "has_native",
    "packbits", "segment_packbits",
]
