"""Multi-head latent attention (FlashInfer's ``flashinfer.mla``): not implemented.

attn has no MLA kernels (DeepSeek's compressed latent KV). The names exist
because engines import them at module level; using one raises
NotImplementedError saying so.
"""

from .errors import not_implemented

INSTEAD = "attn has no MLA kernels (compressed latent KV): run MLA layers with FlashInfer or FlashMLA"


class BatchMLAPagedAttentionWrapper:
    """FlashInfer's MLA wrapper; constructing it raises NotImplementedError."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"attn: BatchMLAPagedAttentionWrapper is not implemented; {INSTEAD}")


trtllm_batch_decode_with_kv_cache_mla = not_implemented("trtllm_batch_decode_with_kv_cache_mla", INSTEAD)
