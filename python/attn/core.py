"""Shared machinery of the wrappers: argument checks, planning, launching.

Every wrapper follows the runtime's batch step (docs/Runtime.md):
``plan`` (CPU, outside any CUDA graph) validates its arguments, gets the
compiled module (kernel cache, compiling on first use), plans the batch into a
pinned host workspace and uploads it into the caller's workspace buffer on the
current stream; ``run`` validates the tensors and launches the persistent
attention kernel (and the merge kernel) on ``torch.cuda.current_stream()``.

torch is imported lazily: the argument checks are duck-typed (``shape``,
``dtype``, ``device``, ``is_contiguous()``), so they run, and are tested,
without it.
"""

import collections
import ctypes
import functools
import json
import math
import numbers
import os
import sys
import threading

from . import _native, ops
from .compiler import describe, get_kernel
from .errors import PageIndexError

KV_LAYOUTS = ("NHD", "HND")
_DTYPE_NAMES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "f16", "half": "f16", "f16": "f16",
                "float32": "f32", "float": "f32", "f32": "f32", "int32": "i32", "int": "i32",
                "uint8": "u8", "int8": "i8"}


def torch_module():
    """Imports torch, or explains that this call needs it (and registers
    attn's torch.compile ops, :mod:`attn.ops`, on first use)."""
    try:
        import torch
    except ImportError as e:
        raise ImportError("attn: running attention needs PyTorch with CUDA (torch is not installed); "
                          "planning and compiling work without it") from e
    if ops._torch is None:
        ops.register()
    return torch


_dtype_names_of = {}  # dtype (torch.dtype or string) -> its name: dtype_name's answers, kept


def dtype_name(dt, what="dtype"):
    """'bf16' / 'f16' / 'f32' / 'i32' / 'u8' for a torch dtype or a string."""
    n = _dtype_names_of.get(dt)
    if n is not None:
        return n
    s = str(dt).replace("torch.", "")
    if s not in _DTYPE_NAMES:
        raise TypeError(f"attn: {what}: unsupported dtype {dt} (bfloat16 or float16)")
    _dtype_names_of[dt] = _DTYPE_NAMES[s]
    return _DTYPE_NAMES[s]


def check_kv_layout(kv_layout):
    if kv_layout not in KV_LAYOUTS:
        raise ValueError(f"attn: kv_layout must be 'NHD' or 'HND', got {kv_layout!r}")
    return kv_layout


def check_tensor(name, t, *, dtype=None, shape=None, device=None, contiguous=True, dims=None, align=None):
    """Checks one tensor; the error names the tensor and what was expected.

    ``dtype``: a name ('bf16', 'f32', 'i32', ...) or a tuple of names;
    ``shape``: a tuple of ints or None (any) or (label, int) pairs for the
    message; ``device``: a device string ('cuda:0'); ``align``: the bytes the
    tensor's address must be a multiple of.

    >>> class T:  # a stand-in for torch.Tensor
    ...     shape, dtype, device = (3, 4), "torch.float16", "cuda:0"
    ...     def is_contiguous(self): return True
    >>> check_tensor("q", T(), dtype="bf16")
    Traceback (most recent call last):
    TypeError: attn: q: expected dtype bf16, got f16
    """
    # Called several times per plan() and run(): the passing path builds no
    # message and formats no device (the checks in order, cheapest first).
    try:
        t_shape, t_dtype, t_device = t.shape, t.dtype, t.device
    except AttributeError:
        raise TypeError(f"attn: {name}: expected a torch.Tensor, got {type(t).__name__}") from None
    got_shape = tuple(map(int, t_shape))
    if dtype is not None:
        want = (dtype,) if isinstance(dtype, str) else tuple(dtype)
        got = _dtype_names_of.get(t_dtype)
        if got is None:
            got = dtype_name(t_dtype, name) if str(t_dtype).replace("torch.", "") in _DTYPE_NAMES else str(t_dtype)
        if got not in want:
            raise TypeError(f"attn: {name}: expected dtype {' or '.join(want)}, got {got}")
    if dims is not None and len(got_shape) != dims:
        raise ValueError(f"attn: {name}: expected {dims} dimensions, got shape {list(got_shape)}")
    if shape is not None:
        ok = len(shape) == len(got_shape)
        if ok:
            for s, g in zip(shape, got_shape):
                v = s[1] if isinstance(s, tuple) else s
                if v is not None and v != g:
                    ok = False
                    break
        if not ok:
            labels = [s if isinstance(s, tuple) else (None, s) for s in shape]
            want = ", ".join((f"{l}={v}" if l and v is not None else (l or str(v)))
                             for l, v in labels)
            raise ValueError(f"attn: {name}: expected shape [{want}], got {list(got_shape)}")
    if device is not None and not (t_device is device or t_device == device) and str(t_device) != str(device):
        raise ValueError(f"attn: {name}: expected a tensor on {device}, got one on {t_device}")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"attn: {name}: expected a contiguous tensor (call .contiguous())")
    if align and t.data_ptr() % align:
        raise ValueError(f"attn: {name}: expected a {align}-byte aligned tensor, got address "
                         f"{t.data_ptr():#x} (the kernels write {align}-byte chunks of each row)")
    return got_shape


def host_i32(name, x):
    """A host int32 buffer (array('i') or NumPy) from a tensor, array or list."""
    import array
    if hasattr(x, "detach"):  # torch.Tensor
        x = x.detach().to("cpu")
        if str(x.dtype) not in ("torch.int32", "torch.int64"):
            raise TypeError(f"attn: {name}: expected an integer tensor, got {x.dtype}")
        if x.dim() != 1:
            return array.array("i", x.int().tolist())
        # A 1-D tensor's bytes, copied straight into the array (no Python ints).
        x = x.int().contiguous()
        n = int(x.numel())
        a = array.array("i", bytes(4 * n))
        if n:
            ctypes.memmove(a.buffer_info()[0], x.data_ptr(), 4 * n)
        return a
    try:
        return array.array("i", [int(v) for v in x])
    except (TypeError, ValueError) as e:
        raise TypeError(f"attn: {name}: expected a 1-D integer tensor or sequence ({e})") from None


_MULTI_ITEM = ("multi-item scoring is not implemented: express the item boundaries as a custom_mask "
               "(or packed_custom_mask)")
_FP8_SCALE = ("attn does not apply fp8 calibration scales to ragged bf16/f16 K/V (FlashInfer's result "
              "depends on the backend): fold the scale into plan()'s sm_scale")

# FlashInfer arguments attn does not implement: the values that mean "off"
# (accepted), and what to do instead (the NotImplementedError says it).
UNSUPPORTED = {
    "fixed_split_size": ((None, -1), "a fixed split (batch-invariant output) is implemented by the decode "
                         "wrappers only; the prefill wrappers' planner cuts long KV into equal-cost chunks itself: "
                         "leave it None"),
    "disable_split_kv": ((False,), "planning without split-KV (batch-invariant output) is implemented by the "
                         "decode wrappers only: leave it False"),
    "prefix_len_ptr": ((None,), _MULTI_ITEM),
    "token_pos_in_items_ptr": ((None,), _MULTI_ITEM),
    "token_pos_in_items_len": ((0,), _MULTI_ITEM),
    "max_item_len_ptr": ((None,), _MULTI_ITEM),
    "block_tables": ((None,), "attn reads the CSR page table (indptr, indices, last_page_len), not a "
                     "trtllm-gen block table"),
    "seq_lens": ((None,), "attn derives the KV lengths from the page table (indptr, last_page_len)"),
    "seq_lens_q": ((None,), "attn takes the query lengths from qo_indptr"),
    "max_token_per_sequence": ((None,), "it is an argument of FlashInfer's cuDNN backend; attn needs none"),
    "max_sequence_kv": ((None,), "it is an argument of FlashInfer's cuDNN backend; attn needs none"),
    "v_indptr": ((None,), "V shares K's rows (kv_indptr)"),
    "o_indptr": ((None,), "the output shares q's rows (qo_indptr)"),
    "window_right": ((0,), "only a left window (window_left) is implemented"),
    "skip_softmax_threshold_scale_factor": ((None,), "skip-softmax sparsity is not implemented"),
    "kv_cache_sf": ((None,), "NVFP4 KV caches are not supported: use a bfloat16/float16 cache"),
    "use_fp16_softmax": ((None, False), "attn's softmax is float32"),
    "uses_spcompress": ((None, False), "trtllm-gen's sparse compression is not implemented"),
    "jit_args": ((None,), "attn has no C++ JIT kernels: write the variant as an attn.Variant and pass "
                 "variant= and variant_params= to plan()"),
    "jit_kwargs": ((None,), "attn has no C++ JIT kernels: write the variant as an attn.Variant and pass "
                   "variant= and variant_params= to plan()"),
    "q_scale": ((None, 1.0), _FP8_SCALE),
    "k_scale": ((None, 1.0), _FP8_SCALE),
    "v_scale": ((None, 1.0), _FP8_SCALE),
    "o_scale": ((None, 1.0), _FP8_SCALE),
}


def reject_unsupported(where, **given):
    """Raises NotImplementedError for an argument of :data:`UNSUPPORTED` given
    a value other than its "off" one, so that it is never silently ignored.

    >>> reject_unsupported("plan", fixed_split_size=-1, disable_split_kv=False)
    >>> reject_unsupported("plan", window_right=-1)
    Traceback (most recent call last):
    NotImplementedError: attn: plan(window_right=-1) is not implemented: only a left window (window_left) is implemented
    """
    for name, value in given.items():
        off, instead = UNSUPPORTED[name]
        if not any(value is o or (o is not None and isinstance(value, numbers.Number) and value == o)
                   for o in off):
            shown = "<tensor>" if hasattr(value, "shape") else repr(value)
            raise NotImplementedError(f"attn: {where}({name}={shown}) is not implemented: {instead}")


def reject_extra_args(where, args):
    """FlashInfer passes run()'s extra positional arguments to a ``jit_args``
    custom kernel; attn has none, so they are an error, never ignored."""
    if args:
        raise NotImplementedError(
            f"attn: {where}() got {len(args)} positional argument(s) after its tensors; FlashInfer passes "
            "those to a jit_args custom kernel, which attn does not have: pass sinks= (or variant= and "
            "variant_params=) to plan()")


def check_run_matches_plan(p, **given):
    """FlashInfer's run() repeats some of plan()'s arguments; attn fixes them
    at plan time, so a run value (not None) other than the plan's is an error."""
    for name, value in given.items():
        planned = getattr(p, name)
        if value is not None and value != planned:
            raise ValueError(f"attn: run({name}={value}) differs from plan's {planned}; pass it to plan()")


def check_run_sinks(p, sinks):
    """FlashInfer takes ``sinks`` at run time too; attn reads them through the plan."""
    if sinks is not None and sinks is not p.sinks:
        raise ValueError("attn: run(sinks=...) is not the tensor given to plan(); attn reads the sinks "
                         "through the plan: pass sinks= to plan()")


def run_keywords(head_dim, *, pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, sm_scale=None,
                 rope_scale=None, rope_theta=None, **flags):
    """The variant keywords of a plan (or of a deprecated ``forward``), with
    FlashInfer's defaults filled in, so two spellings of one attention compare
    equal. ``flags``: further keywords compared as given (``causal``)."""
    kw = dict(flags, pos_encoding_mode=pos_encoding_mode,
              window_left=-1 if window_left is None or window_left < 0 else int(window_left),
              logits_soft_cap=float(logits_soft_cap) if logits_soft_cap and logits_soft_cap > 0 else 0.0,
              sm_scale=default_sm_scale(head_dim, sm_scale))
    if pos_encoding_mode in ("ROPE_LLAMA", "ROPE_LLAMA31"):
        kw["rope_scale"] = 1.0 if rope_scale is None else float(rope_scale)
        kw["rope_theta"] = (5e5 if pos_encoding_mode == "ROPE_LLAMA31" else 1e4) if rope_theta is None \
            else float(rope_theta)
    return kw


def parse_manifest(text):
    """(attention kernel names in manifest order, the merge kernel each pairs
    with, doc). An attention kernel names its merge kernel (``merge_kernel``);
    a manifest without that field has one merge kernel for all."""
    doc = json.loads(text)
    attention = [k for k in doc["kernels"] if k.get("role") == "attention"]
    only = next((k["name"] for k in doc["kernels"] if k.get("role") == "merge"), None)
    return [k["name"] for k in attention], [k.get("merge_kernel", only) for k in attention], doc


def manifest_candidates(text):
    """The tile candidates of a manifest's attention kernels (the runtime's parser)."""
    return _native.native().manifest_candidates(text)


def plan_mask(band, args):
    """(causal, window_left) for the planner from the mask band of the
    kernels' launch contract (docs/Manifest.md) and the kernel arguments
    ``args`` [(name, kind, value)]: the KV range a query row can see, which the
    planner clips work to. A band the planner cannot express is not clipped
    (the kernel masks it anyway).

    >>> plan_mask({"upper": 0, "lower_param": "window_left"}, [("window_left", "i32", 128)])
    (True, 128)
    >>> plan_mask({}, [])
    (False, -1)
    """
    causal = band.get("upper") == 0
    window = band.get("lower", -1)
    if "lower_param" in band:
        values = {name: value for name, _, value in args}
        window = int(values[band["lower_param"]])
    return causal, int(window)


_capabilities = {}


def device_arch(device):
    """The chip attn compiles for on a CUDA device: 'sm_XY' of its compute
    capability, with the arch-specific 'sm_90a' on 9.0 (Hopper's wgmma kernels;
    such code runs on 9.0 only, which is this device). ``ATTN_ARCH`` overrides
    (``ATTN_ARCH=sm_90`` gives Hopper the portable mma.sync kernels)."""
    if os.environ.get("ATTN_ARCH"):
        return os.environ["ATTN_ARCH"]
    key = str(device)
    cap = _capabilities.get(key)
    if cap is None:
        torch = torch_module()
        cap = tuple(torch.cuda.get_device_capability(device))
        if ":" in key:  # an indexed device ("cuda" alone follows the current device)
            _capabilities[key] = cap
    return "sm_90a" if cap == (9, 0) else f"sm_{cap[0]}{cap[1]}"


_modules = {}


def load_module(kernel, device):
    """The loaded runtime Module of a CachedKernel on ``device`` (memoized)."""
    key = (id(kernel), str(device))
    if key not in _modules:
        torch = torch_module()
        with torch.cuda.device(device):
            torch.cuda.current_stream(device)  # makes the primary context current
            _modules[key] = (kernel, _native.native().Module(kernel.image, kernel.manifest))
    return _modules[key][1]


class KernelInfo:
    """What plan() needs of the kernels of one spec on one device.

    It depends only on the spec, the arch, the device and the kernel cache
    directory, so :func:`kernel_info` builds it once per process from the
    launch contracts (:func:`attn.compiler.describe`): the attention kernel
    of each tile candidate and its merge kernel, the candidates the planner
    chooses from (tile, cost, CTAs per SM, minimum chunk), the mask band and
    the SM count. A candidate's code is compiled (or looked up) and loaded
    only when a plan first picks it (:meth:`module`).
    """

    __slots__ = ("spec", "arch", "device", "attention", "merge", "doc", "candidates", "band", "num_sms",
                 "_modules")

    def __init__(self, spec, arch, device, contracts, num_sms):
        self.spec, self.arch, self.device, self.num_sms = spec, arch, device, num_sms
        self.attention, self.merge, self.doc = parse_manifest(contracts.manifest)
        if not self.attention:
            raise RuntimeError("attn: the compiled module has no attention kernel")
        self.candidates = manifest_candidates(contracts.manifest)
        first = next(k for k in self.doc["kernels"] if k["name"] == self.attention[0])
        self.band = first.get("band", {})
        self._modules = {}

    def module(self, candidate):
        """The loaded module holding tile candidate ``candidate``'s kernels."""
        m = self._modules.get(candidate)
        if m is None:
            kernel = get_kernel(self.spec, self.arch, candidate=candidate)
            names, _, _ = parse_manifest(kernel.manifest)
            if self.attention[candidate] not in names:
                raise RuntimeError(f"attn: the kernels of tile candidate {candidate} ({kernel.path or 'memory'}) "
                                   f"do not hold {self.attention[candidate]}; the cache entry is stale")
            m = self._modules[candidate] = load_module(kernel, self.device)
        return m


_kernel_infos = {}


def stream_handle(device):
    """The raw handle (cudaStream_t, an int) of ``device``'s current stream,
    for the binding's launches (see stream_getter)."""
    return stream_getter(device)()


def stream_getter(device):
    """A function of no arguments returning the raw handle of ``device``'s
    current stream: PyTorch's raw-stream query when it has one (no Stream
    object built per launch), else ``current_stream().cuda_stream``; looked
    up once per device (plan() asks every step)."""
    get = _stream_getters.get(device)
    if get is None:
        torch = torch_module()
        raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
        index = getattr(device, "index", None)
        if raw is None or index is None:
            get = lambda: torch.cuda.current_stream(device).cuda_stream  # noqa: E731
        else:
            get = functools.partial(raw, index)
        _stream_getters[device] = get
    return get


_stream_getters = {}


def num_sms(device):
    return torch_module().cuda.get_device_properties(device).multi_processor_count


def kernel_info(spec, device):
    """The KernelInfo of ``spec`` on ``device``, memoized per process.

    The key is the frozen spec, the arch, the device and the kernel cache
    directory (``ATTN_CACHE_DIR``, else under ``HOME``): a first call looks the
    launch contracts up in the cache (compiling them on a miss where the
    compiler is built in, raising KernelNotFoundError on a runtime-only
    build), later calls with the same key reuse everything. Failures are not
    memoized.
    """
    arch = device_arch(device)
    key = (spec, arch, str(device), os.environ.get("ATTN_CACHE_DIR"), os.environ.get("HOME"))
    info = _kernel_infos.get(key)
    if info is None:
        info = KernelInfo(spec, arch, device, describe(spec, arch), num_sms(device))
        if ":" in str(device):  # an indexed device ("cuda" alone follows the current device)
            info = _kernel_infos.setdefault(key, info)
    return info


def variant_args(spec, values, device):
    """The kernel arguments [(name, kind, value)] of a spec's variant
    parameters, from their values by (variant, parameter). Tables must be
    float32 tensors on ``device``; with ``device`` None (workspace sizing)
    they are not read and stand as null pointers."""
    args, seen = [], set()
    for variant, pname, ty in spec.param_list():
        v = values[(variant, pname)]
        # Argument names as the kernel generator gives them: a name a
        # previous variant already used is qualified as variant_name.
        name = pname if pname not in seen else f"{variant}_{pname}"
        seen.update((pname, name))
        if ty == "i32":
            args.append((name, "i32", int(v)))
        elif ty == "f32":
            args.append((name, "f32", float(v)))
        elif device is None:  # sizing only: no table is read
            args.append((name, "ptr", 0))
        else:  # a table (memref): a float32 tensor on the device
            # @sinks is read at sinks[query head]; a custom table is 1-D.
            shape = (("num_qo_heads", spec.num_qo_heads),) if variant == "sinks" else None
            check_tensor(name, v, dtype="f32", device=device, shape=shape, dims=1)
            args.append((name, "ptr", v.data_ptr()))
    return args


def plan_config(info, args, *, custom_mask, graph_mode, max_batch, max_total_q_rows, split=None):
    """The planner's config (``attnRtPlanConfig``, as a dict) for the kernels
    of ``info`` (a KernelInfo): what plan() plans with and what
    :func:`attn.get_workspace_size` sizes the workspace from, built here
    only. ``args``: the variant arguments [(name, kind, value)], of
    which the mask band reads the window; ``max_batch`` and
    ``max_total_q_rows``: the batch and query rows the workspace must hold
    (a plan's own, or the CUDA-graph maxima; at least 1). ``split``: None,
    or (fixed_split_tokens, disable_split, max_kv_tokens) of a
    batch-invariant decode plan (:func:`split_mode`). In graph mode
    ``graph_candidate`` is 0 here; plan() sets the captured tile's."""
    fixed, disable, max_kv = split if split is not None else (0, False, 0)
    spec = info.spec
    causal, window_left = plan_mask(info.band, args)
    return {
        "num_qo_heads": spec.num_qo_heads, "num_kv_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim, "indexing": 0 if spec.indexing == "paged" else 1,
        "block_size": spec.page_size if spec.indexing == "paged" else 1,
        "causal": int(causal), "window_left": window_left,
        "has_custom_mask": int(bool(custom_mask)),
        "num_sms": info.num_sms,
        "graph_mode": int(bool(graph_mode)), "graph_candidate": 0,
        "max_batch": max(1, int(max_batch or 0)), "max_total_q_rows": max(1, int(max_total_q_rows or 0)),
        "candidates": info.candidates,
        "disable_split": int(bool(disable)), "fixed_split_tokens": int(fixed),
        "max_kv_tokens": int(max_kv) if fixed else 0,
    }


def split_mode(fixed_split_size, disable_split_kv):
    """(fixed_split_tokens, disable_split) of FlashInfer's ``fixed_split_size``
    and ``disable_split_kv`` (decode plans), checked; (0, False) is the
    balancing planner's own splits.

    Either option makes a request's output batch-invariant (the same bits
    whatever else the batch holds): ``disable_split_kv=True`` keeps every
    query tile whole (it wins over a fixed split, as in FlashInfer);
    ``fixed_split_size=N`` cuts every request's KV at the multiples of N
    tokens, N rounded up to the kernels' KV granule (their KV tile in whole
    pages: docs/Runtime.md), merged in key order.

    >>> split_mode(None, False), split_mode(-1, False), split_mode(2048, False), split_mode(2048, True)
    ((0, False), (0, False), (2048, False), (0, True))
    >>> split_mode(0, False)
    Traceback (most recent call last):
    ValueError: attn: fixed_split_size must be None or -1 (off) or a positive number of tokens below 2^31, got 0
    """
    if not isinstance(disable_split_kv, (bool, numbers.Integral)) or disable_split_kv not in (0, 1):
        raise TypeError(f"attn: disable_split_kv must be a bool, got {disable_split_kv!r}")
    if fixed_split_size is None or (isinstance(fixed_split_size, numbers.Integral) and
                                    not isinstance(fixed_split_size, bool) and fixed_split_size == -1):
        fixed = 0
    elif isinstance(fixed_split_size, numbers.Integral) and not isinstance(fixed_split_size, bool) and \
            0 < fixed_split_size < 2 ** 31:
        fixed = int(fixed_split_size)
    else:
        raise ValueError("attn: fixed_split_size must be None or -1 (off) or a positive number of tokens below "
                         f"2^31, got {fixed_split_size!r}")
    return (0, True) if disable_split_kv else (fixed, False)


def fit_partial_rows(config, have, host_bytes, device_bytes):
    """The largest cap on the planner's partial rows (``max_partial_rows``:
    split-KV scratch) whose workspace fits ``have`` bytes, with its sizes:
    ``(cap, host_bytes, device_bytes)``; ``(0, ...)`` as given when no cap
    fits (the plan itself is bigger). Under a cap the planner splits fewer
    tiles, never fails (docs/Runtime.md), so a buffer sized for FlashInfer
    (e.g. 16 MiB) serves plans whose default scratch is larger. A fixed
    split (``fixed_split_size``) is never capped."""
    size = _native.native().plan_workspace_size
    # A fixed split is the caller's (batch-invariant output): never changed.
    if config["fixed_split_tokens"] or size(dict(config, max_partial_rows=1))[1] > have:
        return 0, host_bytes, device_bytes
    lo, hi = 1, 1 << 40   # lo fits; hi: above any bound
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if size(dict(config, max_partial_rows=mid))[1] <= have:
            lo = mid
        else:
            hi = mid
    h, d = size(dict(config, max_partial_rows=lo))
    return lo, h, d


def workspace_too_small(have, need, config, batch, total_q):
    """The message of plan()'s ValueError when float_workspace_buffer is too small."""
    graph = " (CUDA-graph maxima: batch {max_batch}, {max_total_q_rows} query rows)".format(**config) \
        if config["graph_mode"] else ""
    return (f"attn: float_workspace_buffer has {have} bytes ({have / 2**20:.1f} MiB), this plan needs {need} "
            f"({need / 2**20:.1f} MiB) for batch {batch}, {total_q} query rows{graph}; allocate at least that. "
            "attn.get_workspace_size(num_qo_heads, num_kv_heads, head_dim, page_size, kind=..., max_batch=..., "
            "max_total_q_rows=...) gives the bytes for the largest batch you will plan")


SIZING_KEYWORDS = ("sinks", "variant", "variant_params", "logits_scale")


def scratch_wrapper(wrappers, key, make, need, device):
    """``wrappers[key]``, a wrapper of the single-request functions whose
    float workspace holds at least ``need`` bytes: made with ``make(buffer)``
    on first use, given a larger buffer (``need`` rounded up to 1 MiB) when a
    call needs more. One per device (and layout), kept for the process."""
    w = wrappers.get(key)
    if w is not None and w._workspace.numel() * w._workspace.element_size() >= need:
        return w
    torch = torch_module()
    buf = torch.empty(-(-max(need, 1) // (1 << 20)) << 20, dtype=torch.uint8, device=device)
    if w is None:
        w = wrappers[key] = make(buf)
    else:
        w.reset_workspace_buffer(buf)
    return w


def plain_key(*values, kwargs=None):
    """A hashable key of plain arguments (None, bools, numbers, strings, dtypes),
    or None when one of them is not plain (a tensor, a Variant, a dict): such
    a call's plan depends on more than its key."""
    items = values + (tuple(sorted(kwargs.items())) if kwargs else ())

    def plain(v):
        if isinstance(v, tuple):
            return all(plain(x) for x in v)
        return v is None or isinstance(v, (bool, int, float, str)) or type(v).__name__ == "dtype"
    return items if plain(items) else None


def _in_helper_thread(fn):
    """Runs ``fn()`` on a short-lived thread and returns its result (re-raising
    its exception). CUDA-graph trees route every allocation of the calling
    thread to their pool while they warm up or record; the buffers a plan
    keeps (workspace, index arrays) must not live in that pool, and another
    thread's allocations do not."""
    result = {}

    def body():
        try:
            result["value"] = fn()
        except BaseException as e:  # re-raised in the caller
            result["error"] = e
    t = threading.Thread(target=body, name="attn-plan")
    t.start()
    t.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def _graph_trees_on(device):
    """Whether torch.compile's CUDA-graph trees (``mode="reduce-overhead"``)
    run on ``device`` in this process. Their warm-up routes every allocation
    of the calling thread to the graph pool, even inside a user's own custom
    op that calls attn eagerly; a plan's buffers outlive the call, so while
    the trees are on, plans are made on a helper thread."""
    trees = sys.modules.get("torch._inductor.cudagraph_trees")
    if trees is None:
        return False
    try:
        torch = torch_module()
        index = device.index if getattr(device, "index", None) is not None else torch.cuda.current_device()
        return trees.get_manager(index, create_if_none_exists=False) is not None
    except Exception:  # a torch whose private layout differs: plan in this thread, as before
        return False


class SinglePlans:
    """The planned wrappers of a single-request function (``single_decode_with_kv_cache``,
    ``single_prefill_with_kv_cache``), one per call key (device, shapes, dtype,
    variant arguments), each with its own workspace.

    A call whose key was planned before runs that plan again without
    re-planning (the plan depends on the key alone), and such a run may be
    captured into a CUDA graph (torch.compile's ``mode="reduce-overhead"``
    warms up before it records): a wrapper once captured, or used from the
    traced op (:mod:`attn.ops`), is pinned, never re-planned nor dropped,
    since a graph may replay it. The other keys are kept least-recently-used,
    ``capacity`` of them; a new key re-plans the oldest one's wrapper (its
    buffers reused, grown when needed). A call without a key (tensor
    arguments: a custom mask, sinks, a Variant) plans every time into a
    scratch wrapper and cannot be captured.

    ``last[device_key]`` is the wrapper of the last call on that device.
    """

    def __init__(self, capacity=4):
        self.capacity = capacity
        self.lru = collections.OrderedDict()
        self.pinned = {}
        self.scratch = {}
        self.last = {}

    def get(self, key, device_key, device, need, make, plan, *, pin=False, where="attn"):
        """The wrapper planned for ``key``: found, or ``make(workspace)`` /
        an evicted one re-planned with ``plan(wrapper)`` (workspace of at least
        ``need()`` bytes). ``pin``: the call comes from a traced op (its plan
        is made on a helper thread, outside any CUDA-graph memory pool)."""
        torch = torch_module()
        capturing = torch.cuda.is_current_stream_capturing()
        w = None
        if key is not None:
            w = self.pinned.get(key)
            if w is None and key in self.lru:
                w = self.lru[key]
                if pin or capturing:
                    del self.lru[key]
                    self.pinned[key] = w
                else:
                    self.lru.move_to_end(key)
        if w is not None:
            if capturing:
                w._capture_ok = True
            self.last[device_key] = w
            return w
        if capturing:
            why = ("it has tensor arguments (a custom mask, sinks or a Variant), so it plans every call" if key is None
                   else "these shapes and arguments were not planned before")
            raise RuntimeError(f"attn: {where} is being captured into a CUDA graph but {why}, and a plan cannot be "
                               "made during capture; call it once with the same arguments outside capture first "
                               "(torch.compile's mode='reduce-overhead' warms up before it records)")
        stream = torch.cuda.current_stream(device)

        def build():
            with torch.cuda.device(device), torch.cuda.stream(stream):
                if key is None:
                    w = self.scratch.get(device_key)
                    old = w
                elif not pin and len(self.lru) >= self.capacity:
                    # The oldest key's workspace is reused, not its wrapper:
                    # that was made for its own call (its KV layout, device).
                    w, old = None, self.lru.popitem(last=False)[1]
                else:
                    w = old = None
                n = need()
                buf = old._workspace if old is not None else None
                if (buf is None or buf.numel() * buf.element_size() < n
                        or str(getattr(buf, "device", device)) != str(device)):
                    buf = torch.empty(-(-max(n, 1) // (1 << 20)) << 20, dtype=torch.uint8, device=device)
                if w is None:
                    w = make(buf)
                elif buf is not w._workspace:
                    w.reset_workspace_buffer(buf)
                plan(w)
                return w
        w = _in_helper_thread(build) if pin or _graph_trees_on(device) else build()
        if key is None:
            self.scratch[device_key] = w
        elif pin:
            self.pinned[key] = w
        else:
            self.lru[key] = w
        self.last[device_key] = w
        return w


class PlannedRun:
    """What plan() leaves for run(): the module, kernels, host plan and arguments."""

    def __init__(self):
        self.module = None
        self.attention_kernel = None
        self.merge_kernel = None
        self.summary = None
        self.config = None
        self.args = []          # (name, kind, value) of plan-time arguments
        self.keepalive = []     # device tensors the arguments point at
        self.spec = None
        self.total_q = 0
        self.batch = 0
        self.mask_ptrs = None   # {"custom_mask": ptr, "mask_indptr": ptr} with a custom mask
        self.keywords = {}      # run_keywords() of the plan, for the deprecated forward()
        self.sinks = None       # the plan's sinks tensor


class PlanMemo:
    """One configuration's entry of a wrapper's plan() memo: what plan()'s
    scalar arguments decide (the kernels, a native Planner of the config, the
    run's template attributes), so that a later plan() with the same
    arguments reads its index arrays and plans, nothing else (decode's
    ``_plan_memoized``, prefill's ``_plan_prefill_memoized``)."""

    __slots__ = ("k", "info", "config", "maxima", "workspace", "planner", "binding", "torch", "i32", "template",
                 "qo_host", "qo_address", "runs", "stream", "defers")

    def __init__(self, **kw):
        self.k = self.qo_host = self.qo_address = self.binding = None
        self.defers = False  # its planner writes the copy table instead of copying (graph mode, once captured)
        self.runs = {}  # tile candidate -> the template with its kernels (_memoized_run)
        for n, v in kw.items():
            setattr(self, n, v)


def memo_keys():
    """A function from plan()'s scalar arguments to their memo key: one
    object per distinct set of values and types (True is not 1, nor 1.0 1),
    made by functools.lru_cache(typed=True), which builds and finds the key
    in C, at half what a tuple of the values and their types built in Python
    every plan() costs. The keys of the 16 sets seen last are kept; an older
    set gets a new key (and its plan() the full path once more)."""
    return functools.lru_cache(maxsize=16, typed=True)(lambda *scalars: object())


class _PinnedWord(ctypes.c_int32):
    """A pinned int32 word read and cleared in place through ctypes (a
    tensor's item() would cost several times more); ``tensor`` keeps its
    memory alive and gives its address."""


_index_error_words = {}  # device -> _PinnedWord, keyed by what callers pass too


def index_error_word(device):
    """The pinned int32 word the paged attention kernels of ``device`` set
    when a page index is outside the cache (``index_error``): host memory the
    kernels write through its unified address, so that reading it costs no
    device sync, and one fixed address per device, so that CUDA graphs
    capture it."""
    w = _index_error_words.get(device)  # a wrapper's device, every call
    if w is None:
        torch = torch_module()
        d = torch.device(device)
        if d.index is None:
            d = torch.device("cuda", torch.cuda.current_device())
        w = _index_error_words.get(d)
        if w is None:
            with torch.cuda.device(d):
                t = torch.zeros(1, dtype=torch.int32, pin_memory=True)
            w = _index_error_words[d] = _PinnedWord.from_address(t.data_ptr())
            w.tensor = t
        if torch.device(device).index is not None:
            _index_error_words[device] = w
    return w.tensor


def raise_page_index_errors(device):
    """Raises PageIndexError (and clears the word) if a paged attention
    kernel of ``device`` that has finished read a bad page index."""
    word = _index_error_words.get(device)
    if word is None:  # no paged kernel has run on this device yet (the word is made by the first)
        return
    if word.value:
        word.value = 0
        raise PageIndexError(
            f"attn: a paged attention kernel on {device} read a kv_indices entry outside [0, num_pages) of its "
            "KV cache (a page table that names a page the cache does not have, or a negative one); it read "
            "page 0 instead, so the output of that run is wrong. Set ATTN_CHECK_INDICES=1 to raise in the "
            "run() that launched it.")


_plan_copiers = {}


def optional_row_kernel(spec, device, memo, without):
    """(module, kernel) of row kernel ``spec`` on ``device``, or None where
    the device is not a CUDA one (the CPU stand-ins of the planner's tests)
    or this install has no such kernel (a runtime-only install whose kernel
    pack predates it; ``without`` says, once per device at the INFO level,
    what plan() does instead). Looked up once per device, in ``memo``."""
    if getattr(device, "type", None) != "cuda":
        return None
    if device not in memo:
        from .errors import KernelNotFoundError
        from .rows import row_kernel
        try:
            memo[device] = row_kernel(spec, device)
        except KernelNotFoundError:
            from .log import logger
            logger.info("attn: no %s kernel in the kernel pack; %s on %s", spec.summary(), without, device)
            memo[device] = None
    return memo[device]


def plan_copier(device):
    """(module, kernel) of the copy_indices kernel plan()'s fast path copies
    with: the plan read from the pinned host workspace and, in graph mode,
    the step's index arrays and page table into the fixed buffers, in one
    launch where the driver would make several copies (attnRtUploadOptions).
    None without it (:func:`optional_row_kernel`): plan() then copies with
    the driver, a few microseconds more."""
    from .rows import PLAN_COPIES
    return optional_row_kernel(PLAN_COPIES, device, _plan_copiers,
                               "plan() uploads the plan (and graph mode's fixed buffers) with the driver's copies")


_table_copiers = {}

#: The words graph mode's copy_by_table launch covers at most: its grid is
#: one CTA per SM whatever this is, and each launch stops at its table's
#: words, so the bound only says no plan's copies are cut short.
COPY_TABLE_CAPACITY = 2 ** 31 - 1


def plan_table_copier(device):
    """(module, kernel) of the copy_by_table kernel graph mode defers a
    plan's copies to (:data:`attn.rows.PLAN_TABLE_COPIES`), or None: without
    it (:func:`optional_row_kernel`) or with ``ATTN_DEFER_PLAN_COPIES=0`` (to
    measure one form against the other), plan() queues its copies itself,
    as in eager mode."""
    if os.environ.get("ATTN_DEFER_PLAN_COPIES") == "0":
        return None
    from .rows import PLAN_TABLE_COPIES
    return optional_row_kernel(PLAN_TABLE_COPIES, device, _table_copiers,
                               "graph-mode plan() queues its copies itself")


def fixed_addresses(fixed):
    """The device addresses of graph mode's fixed qo_indptr, kv_indptr and
    last_page_len buffers in ``fixed`` (0 for one it lacks): where plan()
    copies the batch's arrays."""
    return tuple(fixed[n].data_ptr() if fixed.get(n) is not None else 0 for n in ("qo", "kv_indptr", "kv_last_len"))


class WrapperBase:
    """Workspace, layout, CUDA-graph mode and the plan/launch steps."""

    def __init__(self, float_workspace_buffer, kv_layout="NHD", use_cuda_graph=False):
        check_kv_layout(kv_layout)
        check_tensor("float_workspace_buffer", float_workspace_buffer, dtype=("u8", "i8", "f32"),
                     dims=1)
        if not str(float_workspace_buffer.device).startswith("cuda"):
            raise ValueError("attn: float_workspace_buffer must be a CUDA tensor, got one on "
                             f"{float_workspace_buffer.device}")
        self._workspace = float_workspace_buffer
        self._device = float_workspace_buffer.device
        self._kv_layout = kv_layout
        self._use_cuda_graph = bool(use_cuda_graph)
        self._host_ws = None
        self._fence = None          # orders reuse of the pinned plan buffers (_upload_fence)
        self._graph_config = None
        self._planned = None
        self._pinned = None         # (host ws address, bytes): _pin_buffers
        self._ws_sizes = (None, None)  # (config key, plan_workspace_size) of the last plan
        self._capture_ok = False    # a frozen plan (SinglePlans) may be captured without graph mode
        self._memo = {}             # plan()'s fast path: memo key -> what the scalar arguments decide (PlanMemo)
        self._memo_keys = memo_keys()
        self._graph_bufs = None     # graph mode's fixed buffers as the fast path passes them (_graph_step)
        # Graph mode's deferred copies (_copy_table): plan() writes them into a pinned table, run()
        # copies them: once after a plan when eager, once in each capture.
        self._copy_table = None     # (pinned int64 table, its device copy, module, kernel) or None: plan() queues its copies
        self._copy_pending = False  # a plan's table no run() has copied yet
        self._copy_capture = 0      # the capture (its id) whose graph holds the copy
        self._copy_table_looked_up = False
        self._op_handle = ops.new_handle(self)  # names the wrapper in torch.compile graphs (attn.ops)
        ops.register_if_loaded()

    @property
    def is_cuda_graph_enabled(self):
        return self._use_cuda_graph

    def reset_workspace_buffer(self, float_workspace_buffer, *unused):
        """Uses a new workspace buffer from the next plan() on."""
        check_tensor("float_workspace_buffer", float_workspace_buffer, dtype=("u8", "i8", "f32"), dims=1)
        self._workspace = float_workspace_buffer
        self._memo = {}

    # -- plan ---------------------------------------------------------------

    def _upload_fence(self):
        """The wrapper's UploadFence (made at the first plan): every plan
        waits on it before refilling the pinned host workspace, and records
        it after queuing its copy."""
        if self._fence is None:
            self._fence = _native.native().UploadFence()
        return self._fence

    def _graph_copy_table(self):
        """Graph mode's copy table, made at the first plan (before any
        capture, so that every captured graph holds its copy) and never
        moved: a captured launch reads it at its address. Until the
        wrapper's first capture, plan() copies at once and the table stays
        empty (an engine's eager warm-up may read the fixed buffers before
        run()); from then on plan() writes its copies into the table.
        Returns None outside graph mode or without the copy_by_table
        kernel."""
        if self._copy_table is None and self._use_cuda_graph and not self._copy_table_looked_up:
            self._copy_table_looked_up = True
            copier = plan_table_copier(self._device)
            if copier is not None:
                from .rows import PLAN_TABLE_COPIES
                torch = torch_module()
                table = torch.zeros(3 * PLAN_TABLE_COPIES.rows, dtype=torch.int64, pin_memory=True)
                if _native.native().host_is_device_mapped(table.data_ptr(), table.nbytes):
                    staging = torch.empty_like(table, device=self._device)
                    self._copy_table = (table, staging, *copier)
        return self._copy_table

    def _copy_by_table(self, handle):
        """Queues the copy_by_table launch of the table (the last plan's
        copies) and the upload fence after it on stream ``handle``. The
        table goes to a device buffer first, from which the kernel's CTAs
        read it (bench/NOTES.md, v63)."""
        table, staging, module, kernel = self._copy_table
        _native.native().copy_by_table(module, kernel, table.data_ptr(), COPY_TABLE_CAPACITY,
                                       self._upload_fence(), handle, staging.data_ptr())

    # -- plan()'s fast path (decode.py's _plan_memoized, prefill.py's _plan_prefill_memoized)

    def _memo_entry(self, *scalars):
        """(the memo's entry for plan()'s scalar arguments ``scalars`` or
        None, their key or None when one is unhashable)."""
        try:
            key = self._memo_keys(*scalars)
        except TypeError:  # an unhashable argument: the full path says what is wrong with it
            return None, None
        return self._memo.get(key), key

    def _memoize(self, key, template, **extra):
        """Keeps what the plan just made depends on only through plan()'s
        scalar arguments (the kernels, the planner's config converted once,
        the planned run's attributes named in ``template``), so that the next
        plan() with the same arguments reads its index arrays and plans,
        nothing else. A few configurations per wrapper;
        reset_workspace_buffer() clears them."""
        p = self._planned
        if len(self._memo) >= 8:
            self._memo.clear()
        torch = torch_module()
        ws = self._workspace
        planner = _native.native().Planner(p.config)
        copier = plan_copier(self._device)
        if copier is not None:
            planner.set_copy_kernel(*copier)
        c = p.config
        self._memo[key] = PlanMemo(
            info=kernel_info(p.spec, self._device), config=c,
            maxima=(c["max_batch"], c["max_total_q_rows"], c["max_kv_tokens"]),
            workspace=(ws.data_ptr(), ws.numel() * ws.element_size()),
            planner=planner, torch=torch, i32=torch.int32, stream=stream_getter(self._device),
            template={n: getattr(p, n) for n in template}, **extra)

    def _graph_step(self, indices, n_idx):
        """What graph mode's fast plan() passes for a step whose page table
        ``indices`` (None: ragged KV) holds ``n_idx`` entries: ``(fixed
        buffers' addresses, page-table copy (src, dst, bytes), tensors to
        keep alive, kernel pointers)``, or None when the fixed page table
        is smaller (the full path says so). The fixed buffers never move,
        so their addresses are read once."""
        g = self._graph_bufs
        if g is None:
            idx = self._fixed.get("kv_indices")
            keep, ptrs = ((), {}) if idx is None else ((idx,), {"kv_indices": idx.data_ptr()})
            g = self._graph_bufs = (fixed_addresses(self._fixed), 0 if idx is None else idx.numel(),
                                    ptrs.get("kv_indices", 0), keep, ptrs)
        fixed, capacity, idx_ptr, keep, ptrs = g
        if indices is None:
            return fixed, (0, 0, 0), keep, ptrs
        if capacity < n_idx:
            return None
        # The page table goes into the fixed buffer with the plan's copies
        # (device to device), which a copy table defers to run(): the
        # caller's page table is then kept until the next plan, whose fence
        # wait outlasts the copy.
        if self._copy_capture and idx_ptr != indices.data_ptr():
            keep = keep + (indices,)
        return fixed, (indices.data_ptr(), idx_ptr, 4 * n_idx), keep, ptrs

    def _plan_natively(self, m, batch, maxima, host, fixed=(0, 0, 0), min_kv_len=1, page_table=(0, 0, 0)):
        """The fast path's one native call: plans ``batch`` requests under
        ``maxima`` (max_batch, max_total_q_rows, max_kv_tokens) from the host
        arrays at the addresses ``host`` (qo_indptr, kv_indptr, last_page_len;
        0: none) and queues the plan's copy (which carries those arrays), in
        graph mode the arrays' copies into the ``fixed`` buffers at those
        device addresses (0 skips one) and ``page_table`` (src, dst, bytes);
        the call refuses a capturing stream and waits on, then records, the
        upload fence. Grows the pinned host workspace once when the batch
        needs more. Returns the summary, or None (nothing done) when the
        device workspace is too small or a request holds fewer than
        ``min_kv_len`` keys: the full path then fits or says which."""
        planner = m.planner
        handle = m.stream()
        src, dst, table_bytes = page_table
        if self._copy_capture and not m.defers:
            # Graph mode, once captured: the copies go into the table, which
            # the graphs (at their head) and eager run()s copy.
            table, _, module, kernel = self._copy_table
            planner.set_copy_table(module, kernel, table.data_ptr(), COPY_TABLE_CAPACITY)
            m.defers = True
        for _ in range(2):
            # What every step passes alike is bound once (the workspaces, the
            # fence, the fixed buffers: this wrapper's and this memo's), again
            # when the pinned host workspace grows.
            binding = (self._pinned, fixed, dst, min_kv_len)
            if m.binding != binding:
                pinned = self._pinned or self._pin_buffers()
                binding = (pinned, fixed, dst, min_kv_len)
                planner.bind(*pinned, *m.workspace, self._fence or self._upload_fence(), *fixed, dst, min_kv_len)
                m.binding = binding
            summary = planner.step(handle, batch, *maxima, *host, src, table_bytes)
            if summary is not None:
                self._copy_pending = m.defers  # the copies wait in the table for run()
                return summary
            host_bytes, device_bytes = planner.sizes(*maxima)
            if device_bytes > m.workspace[1] or self._pinned[1] >= host_bytes:
                return None
            # A larger batch: a pinned host workspace with room for growth.
            self._pin_buffers(host_bytes)
        return None

    def _pin_buffers(self, host_bytes=0):
        """Grows the pinned host workspace to ``host_bytes`` (at least
        doubling, so that a growing batch reallocates a few times; the only
        place it is allocated) and returns its (address, bytes), which
        plan()'s fast path passes every step."""
        torch = torch_module()
        host_ws = self._host_ws
        if host_ws is None or host_ws.numel() < host_bytes:
            if self._fence is not None:
                self._fence.wait()  # the last plan's copies may still read the buffer given back here
            host_ws = self._host_ws = torch.empty(
                max(host_bytes, 4096, 2 * (host_ws.numel() if host_ws is not None else 0)), dtype=torch.uint8,
                pin_memory=True)
        self._pinned = (host_ws.data_ptr(), host_ws.numel())
        return self._pinned

    def _memoized_run(self, m, summary, *, batch, total_q, config, keepalive, ptrs):
        """The fast path's PlannedRun: the memo's template and the kernels of
        the summary's tile candidate (joined once per candidate)."""
        cand = summary.candidate
        base = m.runs.get(cand)
        if base is None:
            info = m.info
            base = m.runs[cand] = dict(m.template, module=info.module(cand), attention_kernel=info.attention[cand],
                                       merge_kernel=info.merge[cand])
        p = PlannedRun.__new__(PlannedRun)
        p.__dict__.update(base)
        p.summary, p.host_bytes, p.total_q, p.batch = summary, summary.host_bytes, total_q, batch
        p.config, p.keepalive, p.ptrs = config, keepalive, ptrs
        self._planned = p
        return p

    def _check_not_capturing(self, what):
        torch = torch_module()
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"attn: {what}() must be called outside CUDA-graph capture "
                               "(plan on the host, then replay the captured run())")

    def _plan(self, spec, values, *, qo_indptr, kv_indptr, kv_last_len=None, kv_lens=None,
              max_batch=None, max_total_q_rows=None, custom_mask=False, split=None, fixed=None):
        """Picks the tile for the batch, plans, uploads the plan, and loads
        (compiling on first use) the picked candidate's kernels.

        The planner chooses the tile candidate from the batch's average
        packed query length (docs/Runtime.md); in CUDA-graph mode the first
        plan's choice holds for every later plan, since the captured launch
        cannot change kernels. The KV range each query row sees (causal,
        sliding window) comes from the kernels' mask band. The plan carries
        the index arrays the kernels read (qo_indptr, kv_indptr,
        last_page_len); graph mode also copies them into the caller's
        ``fixed`` buffers (a dict with "qo", "kv_indptr", "kv_last_len"),
        as FlashInfer's plan() does. ``split``: :func:`plan_config`'s.
        """
        torch = torch_module()
        self._check_not_capturing("plan")
        raise_page_index_errors(self._device)
        # Everything that depends only on the spec is computed once per process.
        info = kernel_info(spec, self._device)
        batch = len(qo_indptr) - 1
        if max_batch is not None and batch > max_batch:
            raise ValueError(f"attn: batch {batch} exceeds the CUDA-graph buffers' {max_batch}")
        total_q = int(qo_indptr[-1]) if batch >= 0 else 0
        variant_args = self._variant_args(spec, values)
        config = plan_config(info, variant_args, custom_mask=custom_mask, graph_mode=self._use_cuda_graph,
                             max_batch=max_batch or batch, max_total_q_rows=max_total_q_rows or total_q,
                             split=split)
        if self._use_cuda_graph:
            first = self._graph_config
            config["graph_candidate"] = first["graph_candidate"] if first is not None else \
                _native.native().select_tile_candidate(info.candidates, total_q, batch)
            # The workspace layout must not move between plans of a captured graph.
            if first is not None and first != config:
                raise ValueError("attn: in CUDA-graph mode every plan() must keep the heads, head_dim, "
                                 "page size, variants, maxima, fixed_split_size and disable_split_kv of the "
                                 "first one")
            self._graph_config = config
        # The workspace sizes follow from the config alone (the candidates from the spec).
        size_key = (info, config["causal"], config["window_left"], config["has_custom_mask"],
                    config["graph_mode"], config["max_batch"], config["max_total_q_rows"],
                    config["disable_split"], config["fixed_split_tokens"], config["max_kv_tokens"])
        ws_bytes = self._workspace.numel() * self._workspace.element_size()
        size_key += (ws_bytes,)
        if self._ws_sizes[0] == size_key:
            host_bytes, device_bytes, cap = self._ws_sizes[1]
        else:
            host_bytes, device_bytes = _native.native().plan_workspace_size(config)
            cap = 0
            if ws_bytes < device_bytes:
                # Split-KV scratch that fits the caller's buffer: fewer splits.
                cap, host_bytes, device_bytes = fit_partial_rows(config, ws_bytes, host_bytes, device_bytes)
            self._ws_sizes = (size_key, (host_bytes, device_bytes, cap))
        if ws_bytes < device_bytes:
            raise ValueError(workspace_too_small(ws_bytes, device_bytes, config, batch, total_q))
        plan_cfg = dict(config, max_partial_rows=cap) if cap else config
        fence = self._upload_fence()
        fence.wait()  # the previous plan's copy may still read the pinned host workspace
        deferred = self._graph_copy_table()
        if deferred is not None:
            # This path queues its copies itself: a captured graph's copy of
            # the table then copies nothing.
            deferred[0].zero_()
            self._copy_pending = False
        self._pin_buffers(host_bytes)
        handle = stream_handle(self._device)
        # Plans and queues the plan's copy (the device workspace size checked).
        summary = _native.native().plan(
            plan_cfg, self._host_ws.data_ptr(), qo_indptr, kv_indptr, kv_last_len=kv_last_len,
            kv_lens=kv_lens, workspace_bytes=host_bytes, device_workspace=self._workspace.data_ptr(),
            device_bytes=ws_bytes, stream=handle)
        if self._use_cuda_graph and fixed:
            _native.native().copy_plan_arrays(self._host_ws.data_ptr(), *fixed_addresses(fixed), handle)
        fence.record(handle)
        p = PlannedRun()
        candidate = summary.candidate
        p.module, p.spec, p.config, p.summary = info.module(candidate), spec, config, summary
        p.attention_kernel, p.merge_kernel = info.attention[candidate], info.merge[candidate]
        p.total_q, p.batch = total_q, batch
        p.host_bytes = host_bytes
        p.args = variant_args
        return p

    def _plan_mask(self, p, custom_mask, packed_custom_mask, qo_lens, kv_lens, fixed):
        """Packs the custom mask and its byte offsets onto the device for ``p``.

        In CUDA-graph mode they go into the fixed ``custom_mask_buf`` /
        ``mask_indptr_buf`` given to the constructor.
        """
        from .mask import prepare_mask
        from .paged import to_device_i32
        torch = torch_module()
        qo_lens = [int(qo_lens[b + 1]) - int(qo_lens[b]) for b in range(len(qo_lens) - 1)]
        packed, indptr = prepare_mask(custom_mask, packed_custom_mask, qo_lens, kv_lens, self._device)
        d_indptr = to_device_i32("mask_indptr", torch.tensor(indptr, dtype=torch.int32), self._device,
                                 fixed.get("mask_indptr"))
        if self._use_cuda_graph:
            buf = fixed.get("custom_mask")
            if buf is None or d_indptr is not fixed.get("mask_indptr"):
                raise ValueError("attn: a custom mask with use_cuda_graph=True needs custom_mask_buf and "
                                 "mask_indptr_buf (uint8 and int32 device tensors) at construction")
            check_tensor("custom_mask_buf", buf, dtype=("u8", "i8"), device=self._device, dims=1)
            if buf.numel() < packed.numel():
                raise ValueError(f"attn: the packed mask has {packed.numel()} bytes but custom_mask_buf "
                                 f"holds only {buf.numel()}")
            buf[:packed.numel()].copy_(packed.view(buf.dtype), non_blocking=True)
            packed = buf
        p.keepalive += [packed, d_indptr]
        p.mask_ptrs = {"custom_mask": packed.data_ptr(), "mask_indptr": d_indptr.data_ptr()}

    def _variant_args(self, spec, values):
        return variant_args(spec, values, self._device)

    # -- run ----------------------------------------------------------------

    def _check_forward(self, where, **given):
        """FlashInfer's deprecated ``forward`` sets the variant for the run;
        attn compiles it into the plan, so a value other than plan()'s is an
        error naming it (never a silently different attention)."""
        p = self._check_planned()
        for name, value in run_keywords(p.spec.head_dim, **given).items():
            if name in p.keywords and value != p.keywords[name]:
                raise ValueError(f"attn: {where}({name}={value!r}) differs from plan()'s {p.keywords[name]!r}; "
                                 f"attn fixes it at plan time: pass {name}= to plan()")

    def _launch(self, p, args, kernels=None):
        """Runs the plan ``p`` with the caller's ``args``; ``kernels``:
        ``(module, attention, merge)`` to run instead of the plan's (the
        same tile's kernels of a variant build, e.g. strided K/V)."""
        torch = torch_module()
        capturing = torch.cuda.is_current_stream_capturing()
        if capturing and not (self._use_cuda_graph or self._capture_ok):
            raise RuntimeError("attn: run() is being captured into a CUDA graph, but this wrapper was "
                               "built with use_cuda_graph=False; construct it with use_cuda_graph=True "
                               "(and fixed buffers) to capture run()")
        if not capturing:
            raise_page_index_errors(self._device)
        module, attention, merge = kernels or (p.module, p.attention_kernel, p.merge_kernel)
        handle = stream_handle(self._device)
        if self._copy_table is not None:
            # The table's copies: in each capture once, at the graph's head
            # (the first run() of the capture puts it there, before whatever
            # the capture holds so far), and eagerly once after each plan
            # that wrote the table.
            if capturing:
                capture = _native.native().stream_capture_id(handle)
                if capture != self._copy_capture:
                    self._copy_by_table(handle)
                    self._copy_capture = capture
            elif self._copy_pending:
                self._copy_by_table(handle)
                self._copy_pending = False
        _native.native().run(module, attention, merge, self._host_ws.data_ptr(),
                             p.host_bytes, self._workspace.data_ptr(), args + p.args, handle,
                             device_bytes=self._workspace.nbytes)
        if os.environ.get("ATTN_CHECK_INDICES") == "1" and not capturing:
            torch.cuda.current_stream(self._device).synchronize()
            raise_page_index_errors(self._device)

    def _check_planned(self):
        if self._planned is None:
            raise RuntimeError("attn: call plan() before run()")
        return self._planned

    def _outputs(self, p, q, out, lse, return_lse):
        if out is None:
            out = torch_module().empty_like(q)
        else:
            check_tensor("out", out, dtype=dtype_name(q.dtype), shape=tuple(q.shape), device=self._device,
                         align=16)
        if lse is None:
            torch = torch_module()
            lse = torch.empty((q.shape[0], q.shape[1]), dtype=torch.float32, device=q.device)
        else:
            check_tensor("lse", lse, dtype="f32", shape=(q.shape[0], q.shape[1]), device=self._device)
        return out, lse


def row_major(shape):
    """The strides (in elements) of a dense row-major tensor of ``shape``."""
    out, step = [], 1
    for n in reversed(tuple(int(x) for x in shape)):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def tensor_strides(t):
    """``t.stride()`` as ints; for a stand-in without ``stride()``, a
    contiguous tensor's row-major strides (None when it is not contiguous)."""
    st = getattr(t, "stride", None)
    if callable(st):
        return tuple(int(x) for x in st())
    return row_major(t.shape) if t.is_contiguous() else None


def dense_after(shape, strides, dim):
    """Whether dims ``dim..`` are dense row-major (dims of size 1 may have any stride)."""
    shape = tuple(int(x) for x in shape)
    want = row_major(shape[dim:])
    return all(n == 1 or s == w for n, s, w in zip(shape[dim:], strides[dim:], want))


def _page_dims(kv_layout):
    return "[page_size, num_kv_heads, head_dim]" if kv_layout == "NHD" else "[num_kv_heads, page_size, head_dim]"


def _cache_page_stride(name, t, shape, strides, first_inner, page_elems, kv_layout):
    """The distance between t's pages in elements (None: one page, any), or a
    ValueError naming the stride the kernels cannot read."""
    if strides is None:
        raise ValueError(f"attn: {name}: expected a contiguous tensor (call .contiguous())")
    if not dense_after(shape, strides, first_inner):
        raise ValueError(
            f"attn: {name}: strides {list(strides)} (shape {list(shape)}): the kernels read each page as a dense "
            f"{_page_dims(kv_layout)} block (strides {list(row_major(shape[first_inner:]))} for its last "
            f"{len(shape) - first_inner} dims); a cache view with other strides cannot be read in place, and attn "
            "does not copy a KV cache: lay the cache out so (or pass kv_layout= matching it)")
    return int(strides[0]) if int(shape[0]) > 1 else None


def split_paged_kv_cache(paged_kv_cache, kv_layout, page_size, num_kv_heads, head_dim, dtype, device):
    """``(k, v, page_stride, v_offset)`` from a paged KV cache, checked.

    Accepted forms (FlashInfer's): a ``[num_pages, 2, *page]`` tensor (K and V
    of page i at ``[i, 0]`` and ``[i, 1]``), a ``(k_cache, v_cache)`` tuple of
    ``[num_pages, *page]`` tensors, with ``page`` ``[page_size, num_kv_heads,
    head_dim]`` (NHD) or ``[num_kv_heads, page_size, head_dim]`` (HND); with
    ``page_size`` 1 also SGLang's page-less forms, a tuple of ``[num_tokens,
    num_kv_heads, head_dim]`` tensors or a ``[num_tokens, 2, num_kv_heads,
    head_dim]`` tensor (page size 1 makes NHD and HND the same bytes).

    The kernels take a base pointer per K and V and the distance between two
    pages in elements (``page_stride``, one for both: they share a page
    table); each page must be dense. So the combined tensor, a tuple, the
    tuple ``(kv[:, 0], kv[:, 1])`` of a combined cache, the halves of a
    ``[2, num_pages, ...]`` cache and one layer of a ``[num_pages,
    num_layers, 2, ...]`` buffer are all read in place; a page that is not
    dense is a ValueError naming its strides (a KV cache is never copied).
    ``v_offset``: the elements from ``k``'s data pointer to V's (the combined
    form: its ``stride(1)``), None for a tuple (V at ``v.data_ptr()``).
    """
    page = (("page_size", page_size), ("num_kv_heads", num_kv_heads)) if kv_layout == "NHD" else \
        (("num_kv_heads", num_kv_heads), ("page_size", page_size))
    page_elems = page_size * num_kv_heads * head_dim
    if isinstance(paged_kv_cache, (tuple, list)):
        if len(paged_kv_cache) != 2:
            raise ValueError("attn: paged_kv_cache tuple must be (k_cache, v_cache)")
        k, v = paged_kv_cache
        strides = []
        for n, t in (("k_cache", k), ("v_cache", v)):
            dims = len(t.shape) if hasattr(t, "shape") else None
            if dims == 3:  # SGLang's [num_tokens, num_kv_heads, head_dim]: page size 1
                if page_size != 1:
                    raise ValueError(
                        f"attn: {n}: a 3-D cache {list(t.shape)} is [num_tokens, num_kv_heads, head_dim], a "
                        f"page-size-1 cache, but plan() was given page_size={page_size}; plan with page_size=1 "
                        "(kv_indices then index tokens) or pass [num_pages, ...] tensors")
                want = (("num_tokens", None), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim))
            else:
                want = (("num_pages", None),) + page + (("head_dim", head_dim),)
            shape = check_tensor(n, t, dtype=dtype, shape=want, device=device, contiguous=False)
            strides.append(_cache_page_stride(n, t, shape, tensor_strides(t), 1, page_elems, kv_layout))
        if tuple(k.shape) != tuple(v.shape):
            raise ValueError(f"attn: k_cache {list(k.shape)} and v_cache {list(v.shape)} differ in shape")
        known = {s for s in strides if s is not None}
        if len(known) > 1:
            raise ValueError(f"attn: k_cache and v_cache must have identical strides: k_cache pages are "
                             f"{strides[0]} elements apart but v_cache pages {strides[1]} (K and V share one "
                             "page table, so they need one page stride)")
        return k, v, known.pop() if known else page_elems, None
    t = paged_kv_cache
    dims = len(t.shape) if hasattr(t, "shape") else None
    if dims == 4 and page_size == 1:  # [num_tokens, 2, num_kv_heads, head_dim]: page size 1
        want = (("num_tokens", None), ("2", 2), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim))
    else:
        want = (("num_pages", None), ("2", 2)) + page + (("head_dim", head_dim),)
    shape = check_tensor("paged_kv_cache", t, dtype=dtype, shape=want, device=device, contiguous=False)
    strides = tensor_strides(t)
    stride = _cache_page_stride("paged_kv_cache", t, shape, strides, 2, page_elems, kv_layout)
    return t, t, stride if stride is not None else 2 * page_elems, int(strides[1])


def dense_q(wrapper, q, max_rows=None):
    """``q`` as the kernels read it: dense ``[rows, num_qo_heads, head_dim]``.

    The kernels take no row stride for q, so a strided q (a slice of a fused
    QKV projection, ``qkv[:, :Hq * D].view(-1, Hq, D)``) is copied to a dense
    one: a q-sized copy (rows x num_qo_heads x head_dim elements), never the
    KV cache. A CUDA-graph wrapper (``use_cuda_graph=True``) copies into a
    staging buffer of ``max_rows`` rows kept on the wrapper, allocated by the
    first such run outside capture (the warm-up run), so that a captured run
    copies into fixed memory and allocates nothing; capturing a strided q
    before any eager run raises RuntimeError. Other wrappers use
    ``q.contiguous()``.
    """
    if q.is_contiguous():
        return q
    torch = torch_module()
    if not wrapper._use_cuda_graph:
        return q.contiguous()
    rows = int(q.shape[0])
    buf = getattr(wrapper, "_q_buf", None)
    fits = buf is not None and buf.dtype == q.dtype and tuple(buf.shape[1:]) == tuple(q.shape[1:]) and \
        buf.shape[0] >= rows
    if not fits:
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                "attn: run() is being captured with a strided (non-contiguous) q, and this CUDA-graph wrapper "
                "has no staging buffer for it yet: run() once with such a q before capture (the usual warm-up "
                "run), which allocates it, or pass a contiguous q")
        buf = wrapper._q_buf = torch.empty((max(rows, int(max_rows or 0)),) + tuple(q.shape[1:]), dtype=q.dtype,
                                           device=q.device)
    dst = buf[:rows]
    dst.copy_(q)
    return dst


def mask_args(p):
    """The custom-mask kernel arguments of a planned run (none without a mask)."""
    if p.mask_ptrs is None:
        return []
    return [("custom_mask", "ptr", p.mask_ptrs["custom_mask"]),
            ("mask_indptr", "ptr", p.mask_ptrs["mask_indptr"])]


def default_sm_scale(head_dim, sm_scale):
    return 1.0 / math.sqrt(head_dim) if sm_scale is None else float(sm_scale)
