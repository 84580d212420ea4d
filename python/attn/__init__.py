"""attn: attention for LLM serving, compiled by an MLIR compiler, with FlashInfer's Python API.

Switching from FlashInfer is an import change::

    import attn as flashinfer   # or: from attn import BatchDecodeWithPagedKVCacheWrapper

Kernels are compiled on first use and kept in an on-disk cache
(``$ATTN_CACHE_DIR`` or ``~/.cache/attn``); machines without the compiler
load kernels precompiled with ``python -m attn.precompile``. Importing needs
neither a GPU nor PyTorch; running attention needs both.
``python -m attn show-config`` says what this installation has (compiler,
arch, cache), ``ATTN_LOGLEVEL=INFO`` logs what is compiled, and
:func:`get_workspace_size` how big the float workspace must be. See docs/Python.md.
"""

from . import log as _log
from . import cascade, decode, mla, ops, page, prefill, utils
from .cache import KernelCache, default_cache, default_cache_dir
from .cascade import (BatchDecodeWithSharedPrefixPagedKVCacheWrapper, BatchPrefillWithSharedPrefixPagedKVCacheWrapper,
                      MultiLevelCascadeAttentionWrapper, merge_state, merge_state_in_place, merge_states)
from .decode import (BatchDecodeMlaWithPagedKVCacheWrapper, BatchDecodeWithPagedKVCacheWrapper,
                     CUDAGraphBatchDecodeWithPagedKVCacheWrapper, fast_decode_plan, single_decode_with_kv_cache)
from .errors import AttnError, CompileError, KernelNotFoundError, PageIndexError
from .mask import packbits, segment_packbits
from .mla import BatchMLAPagedAttentionWrapper
from .page import (append_paged_kv_cache, get_batch_indices_positions, get_seq_lens,
                   nvfp4_quantize_append_paged_kv_cache, nvfp4_quantize_append_paged_kv_cache_with_slot_mapping)
from .prefill import (BatchPrefillWithPagedKVCacheWrapper, BatchPrefillWithRaggedKVCacheWrapper,
                      single_prefill_with_kv_cache, single_prefill_with_kv_cache_return_lse)
from .utils import get_workspace_size, next_positive_power_of_2
from .variants import AttentionSpec, Variant
from ._native import has_compiler, has_native

__version__ = "0.1.6"

_log.configure()  # ATTN_LOGLEVEL
ops.register_if_loaded()  # torch.ops.attn.* for torch.compile, when torch is already imported

__all__ = [
    "BatchDecodeWithPagedKVCacheWrapper", "CUDAGraphBatchDecodeWithPagedKVCacheWrapper",
    "BatchPrefillWithPagedKVCacheWrapper",
    "BatchPrefillWithRaggedKVCacheWrapper", "MultiLevelCascadeAttentionWrapper",
    "BatchDecodeWithSharedPrefixPagedKVCacheWrapper", "BatchPrefillWithSharedPrefixPagedKVCacheWrapper",
    "merge_state", "merge_state_in_place", "merge_states", "append_paged_kv_cache",
    "get_batch_indices_positions", "get_seq_lens", "fast_decode_plan", "single_prefill_with_kv_cache",
    "single_prefill_with_kv_cache_return_lse", "single_decode_with_kv_cache", "next_positive_power_of_2",
    "BatchMLAPagedAttentionWrapper", "BatchDecodeMlaWithPagedKVCacheWrapper",
    "Variant", "AttentionSpec", "KernelCache", "default_cache", "default_cache_dir",
    "AttnError", "CompileError", "KernelNotFoundError", "PageIndexError", "has_compiler", "has_native",
    "packbits", "segment_packbits", "get_workspace_size",
    "nvfp4_quantize_append_paged_kv_cache", "nvfp4_quantize_append_paged_kv_cache_with_slot_mapping",
]
