"""Writing new tokens into a paged KV cache (FlashInfer's ``flashinfer.page``)."""

from .core import check_kv_layout, check_tensor, torch_module
from .errors import not_implemented
from .rows import append_into, dropped_counter


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

    On CUDA tensors this is one generated kernel (``attn.append_kv``,
    attn/rows.py) for K and V together; on CPU tensors PyTorch indexing.
    ``kv_last_page_len`` is accepted for compatibility and not needed.

    attn difference: a token whose request is not in the batch, whose
    position is negative or past its request's pages, or whose page is not
    in the cache is not written (FlashInfer writes wherever the indices
    point); the kernel counts such tokens per head, and
    :func:`dropped_append_rows` returns the count.

    >>> append_paged_kv_cache(k, v, b, p, kv_cache, kv_indices, kv_indptr, last)   # doctest: +SKIP
    """
    check_kv_layout(kv_layout)
    torch = torch_module()
    check_tensor("append_key", append_key, dims=3, contiguous=False)
    check_tensor("append_value", append_value, shape=tuple(append_key.shape), device=append_key.device,
                 contiguous=False)
    if isinstance(paged_kv_cache, (tuple, list)):
        k_cache, v_cache = paged_kv_cache
    else:
        check_tensor("paged_kv_cache", paged_kv_cache, dims=5, contiguous=False)
        k_cache, v_cache = paged_kv_cache.unbind(1)  # one call for both views (half of two slices)
    page_size = int(k_cache.shape[1] if kv_layout == "NHD" else k_cache.shape[2])
    for cache in (k_cache, v_cache):
        if str(cache.dtype) != str(append_key.dtype):
            raise TypeError(f"attn: cache dtype {cache.dtype} differs from appended {append_key.dtype}")
    if append_key.is_cuda:
        for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
            check_tensor(name, t, dims=4, device=append_key.device, contiguous=False)
        heads_axis = 2 if kv_layout == "NHD" else 1
        if k_cache.shape[heads_axis] != append_key.shape[1] or k_cache.shape[3] != append_key.shape[2]:
            raise ValueError(f"attn: append_key {list(append_key.shape)} does not fit a {kv_layout} cache of "
                             f"shape {list(k_cache.shape)}")
        for name, t in (("batch_indices", batch_indices), ("positions", positions)):
            check_tensor(name, t, shape=(append_key.shape[0],), device=append_key.device, contiguous=False)
        for name, t in (("kv_indptr", kv_indptr), ("kv_indices", kv_indices)):
            check_tensor(name, t, dims=1, device=append_key.device, contiguous=False)
        append_into(append_key, append_value, batch_indices, positions, k_cache, v_cache, kv_indices,
                    kv_indptr, page_size, kv_layout)
        return
    b = batch_indices.long()
    pos = positions.long()
    page = kv_indices.long()[kv_indptr.long()[b] + pos // page_size]
    slot = pos % page_size
    for cache, x in ((k_cache, append_key), (v_cache, append_value)):
        if kv_layout == "NHD":
            cache[page, slot] = x
        else:
            cache[page, :, slot] = x


def dropped_append_rows(device="cuda", reset=True):
    """How many (token, head) rows :func:`append_paged_kv_cache` left out on
    ``device`` since the last reset because their request, position or page
    was out of range (0 when every write landed). Synchronizes the device."""
    torch = torch_module()
    counter = dropped_counter(torch.device(device))
    n = int(counter.item())
    if reset:
        counter.zero_()
    return n


_NO_FP4 = ("attn's KV cache is bf16 or f16 (no NVFP4 pages): keep the cache in the model's dtype and write it "
           "with append_paged_kv_cache")
nvfp4_quantize_append_paged_kv_cache = not_implemented("nvfp4_quantize_append_paged_kv_cache", _NO_FP4)
nvfp4_quantize_append_paged_kv_cache_with_slot_mapping = not_implemented(
    "nvfp4_quantize_append_paged_kv_cache_with_slot_mapping", _NO_FP4)
