"""Custom masks: packing and the per-request byte offsets the kernels read.

A custom mask (docs/Semantics.md) is boolean, ``qo_len x kv_len`` per request,
row-major, concatenated over requests. The kernels read it bit-packed,
little-endian, each request starting on its own byte: element ``(i, j)`` of
request ``b`` is bit ``mask_indptr[b] * 8 + i * kv_len + j`` of the packed
bytes, ``mask_indptr[b]`` being the byte where request ``b`` starts. This is
FlashInfer's ``segment_packbits(..., bitorder="little")`` layout, and what
the CPU reference (lib/Runtime/Reference.cpp) reads. ``packbits`` and
``segment_packbits`` default to ``bitorder="big"`` as FlashInfer's do (numpy's
order), so pass ``bitorder="little"`` for a ``packed_custom_mask``.

    >>> mask_indptr([2, 1], [3, 9])
    [0, 1, 3]
    >>> segment_packbits([1, 0, 1, 1, 0, 0,  1, 1, 1, 1, 1, 1, 1, 1, 0], [0, 6, 15], bitorder="little")[0]
    [13, 255, 0]
    >>> packbits([1, 0, 1, 1, 0, 0, 1, 1])
    [179]
"""

import operator

from .core import check_tensor, torch_module

BITORDERS = ("big", "little")


def _ints(name, x):
    """The entries of a 1-D integer tensor or sequence, as Python ints."""
    try:
        return [operator.index(v) for v in (x.tolist() if hasattr(x, "tolist") else x)]
    except TypeError:
        raise TypeError(f"attn: {name} must be a 1-D integer tensor or sequence, got {type(x).__name__}") from None


def _lengths(name, x):
    lens = _ints(name, x)
    for b, n in enumerate(lens):
        if n < 0:
            raise ValueError(f"attn: {name}[{b}] is negative ({n})")
    return lens


def mask_indptr(qo_lens, kv_lens):
    """Byte offsets ``[batch + 1]`` of each request's packed mask."""
    qo, kv = _lengths("qo_lens", qo_lens), _lengths("kv_lens", kv_lens)
    if len(qo) != len(kv):
        raise ValueError(f"attn: qo_lens ({len(qo)} entries) and kv_lens ({len(kv)}) must both have one per request")
    out = [0]
    for q, k in zip(qo, kv):
        out.append(out[-1] + (q * k + 7) // 8)
    return out


def _check_bitorder(bitorder):
    if bitorder not in BITORDERS:
        raise ValueError(f"attn: bitorder must be 'big' or 'little', got {bitorder!r:.40}")


def _num_elements(x):
    if hasattr(x, "numel"):
        return int(x.numel())
    try:
        return len(x)
    except TypeError:
        raise TypeError(f"attn: x must be a tensor or a sequence of booleans, got {type(x).__name__}") from None


def packbits(x, bitorder="big"):
    """Packs a flat boolean tensor (or sequence) into ``ceil(n / 8)`` uint8
    (``numpy.packbits``; big-endian by default, as FlashInfer's)."""
    _check_bitorder(bitorder)
    return segment_packbits(x, [0, _num_elements(x)], bitorder)[0]


def segment_packbits(x, indptr, bitorder="big"):
    """Packs segments ``x[indptr[b]:indptr[b+1]]`` each from its own byte.

    Returns ``(packed, byte_indptr)``; a torch tensor in gives a uint8
    tensor on its device (and an int32 byte_indptr there), a sequence gives
    lists. ``indptr`` (``[batch + 1]``) must not decrease, start below 0 or
    end past ``x``: the kernels would read another request's bits.
    """
    _check_bitorder(bitorder)
    bounds = _ints("indptr", indptr)
    n = _num_elements(x)
    if not bounds:
        raise ValueError("attn: indptr must have batch + 1 entries (at least one), got none")
    if bounds[0] < 0:
        raise ValueError(f"attn: indptr[0] is negative ({bounds[0]})")
    for b in range(len(bounds) - 1):
        if bounds[b + 1] < bounds[b]:
            raise ValueError(f"attn: indptr decreases at entry {b + 1} ({bounds[b]} -> {bounds[b + 1]})")
    if bounds[-1] > n:
        raise ValueError(f"attn: indptr[-1] = {bounds[-1]} is past the end of x ({n} elements)")
    lens = [bounds[b + 1] - bounds[b] for b in range(len(bounds) - 1)]
    byte_indptr = mask_indptr(lens, [1] * len(lens))
    shift = (lambda k: 7 - k) if bitorder == "big" else (lambda k: k)
    if not hasattr(x, "numel"):
        bits = [1 if v else 0 for v in x]
        out = []
        for b in range(len(lens)):
            seg = bits[bounds[b]:bounds[b + 1]]
            seg += [0] * (-len(seg) % 8)
            out += [sum(seg[i + k] << shift(k) for k in range(8)) for i in range(0, len(seg), 8)]
        return out, byte_indptr
    torch = torch_module()
    flat = x.reshape(-1).to(torch.uint8)
    if sum(lens) == 0:
        packed = torch.zeros(0, dtype=torch.uint8, device=x.device)
    else:
        # Pad every segment to whole bytes, then weight bit k of each byte by its place.
        pieces = []
        for b, n in enumerate(lens):
            seg = flat[bounds[b]:bounds[b + 1]]
            pad = -n % 8
            pieces.append(torch.cat([seg, seg.new_zeros(pad)]) if pad else seg)
        bits = torch.cat(pieces).view(-1, 8).to(torch.int32)
        weights = torch.tensor([1 << shift(k) for k in range(8)], dtype=torch.int32, device=x.device)
        packed = (bits * weights).sum(1).to(torch.uint8)
    return packed, torch.tensor(byte_indptr, dtype=torch.int32, device=x.device)


def prepare_mask(custom_mask, packed_custom_mask, qo_lens, kv_lens, device):
    """(packed uint8 tensor on ``device``, host byte indptr) for a plan.

    ``custom_mask``: bool, flat (sum of qo_len * kv_len elements);
    ``packed_custom_mask``: uint8 in the kernels' layout (takes precedence,
    as in FlashInfer).
    """
    torch = torch_module()
    indptr = mask_indptr(qo_lens, kv_lens)
    elements = sum(int(q) * int(k) for q, k in zip(qo_lens, kv_lens))
    if packed_custom_mask is not None:
        check_tensor("packed_custom_mask", packed_custom_mask, dtype=("u8", "i8"), dims=1)
        if int(packed_custom_mask.numel()) < indptr[-1]:
            raise ValueError(f"attn: packed_custom_mask has {int(packed_custom_mask.numel())} bytes; the batch's "
                             f"masks need {indptr[-1]} (each request's qo_len * kv_len bits, from its own byte)")
        packed = packed_custom_mask.to(device=device, dtype=torch.uint8).contiguous()
    else:
        if int(custom_mask.numel()) != elements:
            raise ValueError(f"attn: custom_mask has {int(custom_mask.numel())} elements; the batch has "
                             f"{elements} (sum over requests of qo_len * kv_len)")
        bounds = [0]
        for q, k in zip(qo_lens, kv_lens):
            bounds.append(bounds[-1] + int(q) * int(k))
        packed, _ = segment_packbits(custom_mask.to(device=device).reshape(-1).bool(), bounds, "little")
    if packed.numel() == 0:  # the kernels still get a valid pointer
        packed = torch.zeros(1, dtype=torch.uint8, device=device)
    return packed, indptr
