"""Writing new tokens into a paged KV cache (FlashInfer's ``flashinfer.page``)."""

from .core import check_kv_layout, check_tensor, torch_module


def get_seq_lens(kv_indptr, kv_last_page_len, page_size):
    """KV length of each request from its page table, as FlashInfer computes it:
    ``max(pages - 1, 0) * page_size + last_page_len``.

    >>> get_seq_lens(torch.tensor([0, 3, 7]), torch.tensor([5, 16]), 16)   # doctest: +SKIP
    tensor([37, 64])
    """
    torch = torch_module()
    return torch.clamp(kv_indptr[1:] - kv_indptr[:-1] - 1, min=0) * page_size + kv_last_page_len


def get_batch_indices_positions(append_indptr, seq_lens, nnz):
    """For each appended token: its request and its position in the request.

    ``append_indptr`` ``[batch + 1]`` counts appended tokens, ``seq_lens``
    ``[batch]`` are the lengths after appending. Returns int32
    ``(batch_indices, positions)`` of length ``nnz``.

    >>> b, p = get_batch_indices_positions(indptr, seq_lens, nnz)   # doctest: +SKIP
    """
    torch = torch_module()
    counts = append_indptr[1:] - append_indptr[:-1]
    batch = torch.repeat_interleave(torch.arange(len(counts), device=append_indptr.device), counts.long(),
                                    output_size=nnz)
    offset = torch.arange(nnz, device=append_indptr.device) - append_indptr[batch].long()
    positions = (seq_lens[batch].long() - counts[batch].long()) + offset
    return batch.int(), positions.int()


def append_paged_kv_cache(append_key, append_value, batch_indices, positions, paged_kv_cache, kv_indices,
                          kv_indptr, kv_last_page_len, kv_layout="NHD"):
    """Writes ``append_key``/``append_value`` ``[nnz, Hkv, D]`` into the paged cache.

    Token t goes to request ``batch_indices[t]`` at position ``positions[t]``:
    page ``kv_indices[kv_indptr[b] + pos // page_size]``, slot
    ``pos % page_size``. The cache is the combined ``[pages, 2, ...]`` tensor
    or a ``(k_cache, v_cache)`` tuple, NHD or HND.

    attn difference: implemented with PyTorch indexing (one scatter per K
    and V), not a dedicated kernel; ``kv_last_page_len`` is accepted for
    compatibility and not needed.

    >>> append_paged_kv_cache(k, v, b, p, kv_cache, kv_indices, kv_indptr, last)   # doctest: +SKIP
    """
    check_kv_layout(kv_layout)
    torch = torch_module()
    check_tensor("append_key", append_key, dims=3)
    check_tensor("append_value", append_value, shape=tuple(append_key.shape), device=append_key.device)
    if isinstance(paged_kv_cache, (tuple, list)):
        k_cache, v_cache = paged_kv_cache
    else:
        check_tensor("paged_kv_cache", paged_kv_cache, dims=5, contiguous=False)
        k_cache, v_cache = paged_kv_cache[:, 0], paged_kv_cache[:, 1]
    page_size = int(k_cache.shape[1] if kv_layout == "NHD" else k_cache.shape[2])
    b = batch_indices.long()
    pos = positions.long()
    page = kv_indices.long()[kv_indptr.long()[b] + pos // page_size]
    slot = pos % page_size
    for cache, x in ((k_cache, append_key), (v_cache, append_value)):
        if str(cache.dtype) != str(x.dtype):
            raise TypeError(f"attn: cache dtype {cache.dtype} differs from appended {x.dtype}")
        if kv_layout == "NHD":
            cache[page, slot] = x
        else:
            cache[page, :, slot] = x
