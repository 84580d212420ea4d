"""The row kernels: merging attention states, appending to a paged cache,
copying index arrays (named at launch, or listed in a copy table).

``attn.merge_states``, ``attn.append_kv`` and ``attn.copy_indices`` compile,
like attention, from attn IR to generated kernels ("row kernels": one
thread group per token and head, or one thread per word, grid-strided;
docs/Kernels.md). This module holds their specs (what a kernel depends on:
element type, head dim, number of states, page size or number of arrays)
and their launches on CUDA tensors. Head counts, strides and the layout of
the cache are kernel arguments, so one kernel serves every model of its
head dim.

A row is the ``head_dim`` elements of one token's head, read and written
16 bytes at a time: the functions below pass a tensor to the kernel as it
is when its heads are dense (``stride(-1) == 1``, ``stride(-2) ==
head_dim``), its token stride a multiple of 8 elements and its address
16-byte aligned, and copy it first otherwise.
"""

import os
from collections import namedtuple

from . import _native
from .compiler import get_kernel
from .core import device_arch, dtype_name, load_module, stream_handle, torch_module


class MergeStatesSpec(namedtuple("MergeStatesSpec", "dtype head_dim num_states masked")):
    """The merge_states kernel of ``num_states`` states of ``dtype``
    (``"bf16"``, ``"f16"``, ``"f32"``) and ``head_dim``; ``masked``: rows
    whose mask byte is 0 keep state 0.

    >>> print(MergeStatesSpec("bf16", 128, 2, False).to_ir().splitlines()[2].strip())
    %o, %lse = attn.merge_states %v0, %v1 lse %s0, %s1
    """

    def to_ir(self):
        n, t = self.num_states, f"tensor<?x?x{self.head_dim}x{self.dtype}>"
        lse, mask = "tensor<?x?xf32>", "tensor<?xi8>"
        args = [f"%v{i}: {t}" for i in range(n)] + [f"%s{i}: {lse}" for i in range(n)]
        if self.masked:
            args.append(f"%m: {mask}")
        vs = ", ".join(f"%v{i}" for i in range(n))
        ss = ", ".join(f"%s{i}" for i in range(n))
        m = " mask %m" if self.masked else ""
        mt = f", {mask}" if self.masked else ""
        return (f"func.func @merge_states({', '.join(args)}) -> ({t}, {lse}) {{\n"
                f"  // {self.summary()}\n"
                f"  %o, %lse = attn.merge_states {vs} lse {ss}{m}\n"
                f"      : {t}, {lse}{mt} -> {t}\n"
                f"  return %o, %lse : {t}, {lse}\n}}\n")

    def summary(self):
        return (f"merge_states of {self.num_states} d={self.head_dim} {self.dtype}"
                + (" masked" if self.masked else ""))


class AppendKVSpec(namedtuple("AppendKVSpec", "dtype head_dim page_size")):
    """The append_kv kernel of ``dtype`` (``"bf16"``, ``"f16"``) keys and
    values of ``head_dim`` into pages of ``page_size`` tokens (either layout).

    >>> "attn.append_kv" in AppendKVSpec("bf16", 128, 16).to_ir()
    True
    """

    def to_ir(self):
        d, p, t = self.head_dim, self.page_size, self.dtype
        new, cache, i32 = f"tensor<?x?x{d}x{t}>", f"tensor<?x{p}x?x{d}x{t}>", "tensor<?xi32>"
        return (f"func.func @append_kv(%k: {new}, %v: {new}, %kc: {cache}, %vc: {cache}, %b: {i32}, "
                f"%p: {i32}, %ip: {i32}, %ix: {i32}) -> ({cache}, {cache}) {{\n"
                f"  // {self.summary()}\n"
                f"  %k1, %v1 = attn.append_kv %k, %v into %kc, %vc format(#attn.bsr<block_cols = {p}>)\n"
                f"      indices(%b, %p, %ip, %ix : {i32}, {i32}, {i32}, {i32}) : {new} into {cache}\n"
                f"  return %k1, %v1 : {cache}, {cache}\n}}\n")

    def summary(self):
        return f"append_kv d={self.head_dim} page={self.page_size} {self.dtype}"


class CopyIndicesSpec(namedtuple("CopyIndicesSpec", "pairs")):
    """The copy_indices kernel of ``pairs`` int32 arrays (1 to 8) copied
    into the start of other buffers in one launch: plan() copies the plan
    (read from pinned host memory) and, in graph mode, the step's
    qo_indptr, kv_indptr, last_page_len and page table into the fixed
    buffers with it (:data:`PLAN_COPIES`).

    >>> print(CopyIndicesSpec(2).to_ir().splitlines()[2].strip())
    %d0_1, %d1_1 = attn.copy_indices %s0, %s1 into %d0, %d1
    """

    def to_ir(self):
        n, t = self.pairs, "tensor<?xi32>"
        args = [f"%s{i}: {t}" for i in range(n)] + [f"%d{i}: {t}" for i in range(n)]
        outs = ", ".join(f"%d{i}_1" for i in range(n))
        types = ", ".join([t] * n)
        return (f"func.func @copy_indices({', '.join(args)}) -> ({types}) {{\n"
                f"  // {self.summary()}\n"
                f"  {outs} = attn.copy_indices {', '.join(f'%s{i}' for i in range(n))} into "
                f"{', '.join(f'%d{i}' for i in range(n))}\n"
                f"      : {types} into {types}\n"
                f"  return {outs} : {types}\n}}\n")

    def summary(self):
        return f"copy_indices of {self.pairs} arrays"


#: The copy kernel plan() launches (attnRtUploadOptions): the plan's parts
#: (up to three at decode sizes), graph mode's qo_indptr, kv_indptr,
#: last_page_len and the page table.
PLAN_COPIES = CopyIndicesSpec(8)


class CopyByTableSpec(namedtuple("CopyByTableSpec", "rows")):
    """The copy_by_table kernel reading ``rows`` rows (count, source,
    destination: int64 each) of a copy table when it runs: graph mode's
    plan() writes its copies into such a table in pinned host memory and
    launches nothing; run() launches the kernel once after each plan, or
    captures it once in each CUDA graph, whose every replay then copies
    what the last plan wrote (:data:`PLAN_TABLE_COPIES`).

    >>> print(CopyByTableSpec(10).to_ir().splitlines()[2].strip())
    attn.copy_by_table %table {rows = 10} : memref<?xi64>
    """

    def to_ir(self):
        return (f"func.func @copy_by_table(%table: memref<?xi64>) {{\n"
                f"  // {self.summary()}\n"
                f"  attn.copy_by_table %table {{rows = {self.rows}}} : memref<?xi64>\n"
                f"  return\n}}\n")

    def summary(self):
        return f"copy_by_table of {self.rows} rows"


#: Graph mode's deferred copies: as many rows as a plan's upload makes at
#: most (its spans, three index arrays and the page table).
PLAN_TABLE_COPIES = CopyByTableSpec(10)


_kernels = {}


def row_kernel(spec, device):
    """(loaded module, kernel name) of ``spec`` on ``device``, memoized: from
    the kernel cache, compiled on first use where the compiler is built."""
    # Every launch: a tensor's indexed device, no arch lookup and no device
    # formatting (unless ATTN_ARCH picks the chip, which may change).
    fast = not os.environ.get("ATTN_ARCH")
    hit = _kernels.get((spec, device)) if fast else None
    if hit is not None:
        return hit
    arch = device_arch(device)
    key = (spec, arch, str(device))
    hit = _kernels.get(key)
    if hit is None:
        kernel = get_kernel(spec, arch)
        import json
        names = [k["name"] for k in json.loads(kernel.manifest)["kernels"]]
        if len(names) != 1:
            raise RuntimeError(f"attn: the kernels of {spec.summary()} are {names}, expected one row kernel")
        hit = _kernels[key] = (load_module(kernel, device), names[0])
    if fast and ":" in str(device):  # an indexed device names one chip
        _kernels[(spec, device)] = hit
    return hit


def launch_rows(spec, device, num_rows, args):
    """Launches ``spec``'s kernel over ``num_rows`` rows on the current stream."""
    module, name = row_kernel(spec, device)
    _native.native().launch_rows(module, name, int(num_rows), args, stream_handle(device))


def _rows_ok(t, head_dim):
    """Whether the kernels can read ``t`` ([tokens, heads, head_dim] or a
    cache view) in place: dense heads, 16-byte aligned rows."""
    st = t.stride()
    if len(st) < 2 or st[-1] != 1 or (t.shape[-2] > 1 and st[-2] != head_dim) or t.data_ptr() % 16:
        return False
    for s in st[:-2]:
        if s % 8:
            return False
    return True


def row_view(t, head_dim):
    """``t`` itself when the row kernels can read it, else a dense copy."""
    return t if _rows_ok(t, head_dim) else t.contiguous()


def _rows(tokens, heads, what):
    """tokens x heads, the rows a row kernel is launched over (< 2^31)."""
    rows = tokens * heads
    if rows > 2**31 - 1:
        raise ValueError(f"attn: {tokens} x {heads} rows to {what} exceed the kernel's 2^31-1")
    return rows


def _lse_ok(s):
    return s.stride(-1) == 1 or s.size(-1) == 1


def merge_into(vs, ss, out, out_lse, mask=None):
    """Merges states ``vs[i]`` ``[seq, H, D]`` (one element type) with base-2
    LSEs ``ss[i]`` ``[seq, H]`` (float32) into ``out`` / ``out_lse`` (which
    may be ``vs[0]`` / ``ss[0]``) on the GPU. ``mask``: a byte or bool per
    token; rows of tokens whose mask is 0 keep state 0. All on one CUDA
    device, already checked for shapes and dtypes by the caller."""
    torch = torch_module()
    seq, heads, d = out.shape
    rows = _rows(seq, heads, "merge")
    if rows == 0:
        return
    vs = [row_view(v, d) for v in vs]
    ss = [s if _lse_ok(s) else s.contiguous() for s in ss]
    # One stride per family: states that disagree are made dense.
    if len({v.stride(0) for v in vs}) > 1:
        vs = [v.contiguous() for v in vs]
    if len({s.stride(0) for s in ss}) > 1:
        ss = [s.contiguous() for s in ss]
    o = out if _rows_ok(out, d) else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    lse = out_lse if _lse_ok(out_lse) else torch.empty(out_lse.shape, dtype=out_lse.dtype, device=out.device)
    spec = MergeStatesSpec(dtype_name(out.dtype), d, len(vs), mask is not None)
    args = [("heads", "i32", heads)]
    args += [(f"v{i}", "ptr", v.data_ptr()) for i, v in enumerate(vs)]
    args += [("v_stride", "i64", vs[0].stride(0))]
    args += [(f"s{i}", "ptr", s.data_ptr()) for i, s in enumerate(ss)]
    args += [("s_stride", "i64", ss[0].stride(0)), ("o", "ptr", o.data_ptr()), ("o_stride", "i64", o.stride(0)),
             ("lse", "ptr", lse.data_ptr()), ("lse_stride", "i64", lse.stride(0))]
    if mask is not None:
        # A byte per token, nonzero to merge (bool tensors are such bytes).
        one_byte = mask.dtype in (torch.bool, torch.uint8, torch.int8) and mask.is_contiguous()
        m = mask if one_byte else (mask != 0).to(torch.uint8)
        args.append(("mask", "ptr", m.data_ptr()))
    launch_rows(spec, out.device, rows, args)
    if o is not out:
        out.copy_(o)
    if lse is not out_lse:
        out_lse.copy_(lse)


_dropped = {}


def dropped_counter(device):
    """The per-device int32 counter the append kernel adds dropped rows to
    (``"cuda"`` and ``"cuda:<current>"`` name the same one)."""
    c = _dropped.get(device)  # a tensor's own device, every append: no normalizing
    if c is not None:
        return c
    torch = torch_module()
    d = torch.device(device)
    if d.index is None:
        d = torch.device(d.type, torch.cuda.current_device())
    c = _dropped.get(d)
    if c is None:
        c = _dropped[d] = torch.zeros(1, dtype=torch.int32, device=d)
    if torch.device(device).index is not None:
        _dropped[device] = c
    return c


def append_into(key, value, batch_indices, positions, k_cache, v_cache, kv_indices, kv_indptr, page_size,
                kv_layout):
    """Writes ``key``/``value`` ``[nnz, Hkv, D]`` into the page slots of
    ``k_cache``/``v_cache`` (NHD ``[pages, page_size, Hkv, D]`` or HND
    ``[pages, Hkv, page_size, D]`` views) on the GPU. Rows whose request,
    position or page is out of range are not written; they are counted in
    :func:`dropped_counter`."""
    torch = torch_module()
    nnz, heads, d = key.shape
    rows = _rows(nnz, heads, "append")
    if rows == 0:
        return
    key, value = row_view(key, d), row_view(value, d)
    strides = k_cache.stride()
    for name, c, st in (("k_cache", k_cache, strides), ("v_cache", v_cache, v_cache.stride())):
        if st[-1] != 1 or c.data_ptr() % 16 or any(s % 8 for s in st[:-1]):
            raise ValueError(f"attn: {name} (strides {list(c.stride())}) must have a dense last dimension, "
                             "16-byte aligned rows and strides that are multiples of 8 elements for the "
                             "append kernel")
    if strides != v_cache.stride():
        raise ValueError(f"attn: k_cache strides {list(strides)} and v_cache strides "
                         f"{list(v_cache.stride())} differ")
    if kv_layout == "NHD":
        page_stride, slot_stride, head_stride = strides[0], strides[1], strides[2]
    else:
        page_stride, head_stride, slot_stride = strides[0], strides[1], strides[2]
    i32 = [t if t.dtype == torch.int32 and t.is_contiguous() else t.to(torch.int32).contiguous()
           for t in (batch_indices, positions, kv_indptr, kv_indices)]
    batch = i32[2].numel() - 1
    if batch < 0:
        raise ValueError("attn: kv_indptr must hold at least one entry")
    spec = AppendKVSpec(dtype_name(key.dtype), d, int(page_size))
    args = [("heads", "i32", heads), ("batch", "i32", batch), ("num_pages", "i32", int(k_cache.shape[0])),
            ("key", "ptr", key.data_ptr()), ("value", "ptr", value.data_ptr()),
            ("key_stride", "i64", key.stride(0)), ("value_stride", "i64", value.stride(0)),
            ("batch_indices", "ptr", i32[0].data_ptr()), ("positions", "ptr", i32[1].data_ptr()),
            ("kv_indptr", "ptr", i32[2].data_ptr()), ("kv_indices", "ptr", i32[3].data_ptr()),
            ("k_cache", "ptr", k_cache.data_ptr()), ("v_cache", "ptr", v_cache.data_ptr()),
            ("page_stride", "i64", page_stride), ("slot_stride", "i64", slot_stride),
            ("head_stride", "i64", head_stride), ("dropped", "ptr", dropped_counter(key.device).data_ptr())]
    launch_rows(spec, key.device, rows, args)
