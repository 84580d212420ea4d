"""torch.compile support: attn's attention entry points as PyTorch custom operators.

Registered with ``torch.library.custom_op`` under the ``attn`` namespace
(``torch.ops.attn.*``), each with a fake (meta) implementation that only
allocates the outputs, so that ``torch.compile(fullgraph=True)`` traces
through attn without graph breaks and ``mode="reduce-overhead"`` (CUDA-graph
trees) can capture it:

- ``attn::paged_run(q, k_cache, v_cache?, handle, q_scale?, k_scale?, v_scale?,
  window_left?, q_len_per_req?, sinks?) -> (out, lse)``: ``run`` of the
  decode and paged-prefill wrappers;
- ``attn::ragged_run(q, k, v, handle, q_scale?, k_scale?, v_scale?, o_scale?)
  -> (out, lse)``: ``run`` of the ragged-prefill wrapper;
- ``attn::single_decode(q, k, v, ...) -> (out, lse)`` and
  ``attn::single_prefill(q, k, v, ...) -> (out, lse)``: the single-request
  functions.

A wrapper's plan stays outside the op: ``plan()`` is host work done before
the compiled region (as FlashInfer's is), and the op names the wrapper by an
integer handle (:func:`new_handle`), so the traced graph holds tensors and
plain numbers only. The wrappers' ``run`` and the ``single_*`` functions call
the op themselves when they are traced (``torch.compiler.is_compiling()``);
called eagerly they run as before, without the dispatcher. The ops return
fresh contiguous outputs (``out`` has q's shape and dtype, ``lse`` is float32
``q.shape[:-1]``); a traced ``run(out=..., lse=...)`` copies into the given
tensors.

The ops are registered when ``attn`` is imported after torch, or right after
``import torch`` when attn came first (an import hook, so that a function
compiled before any eager attn call finds them: Dynamo cannot register them
while it traces), or by :func:`register`; importing attn never imports torch
itself.
"""

import importlib.abc
import importlib.util
import itertools
import sys
import threading
import weakref

_torch = None       # the torch module once the ops are registered
_lock = threading.Lock()
_handles = itertools.count(1)
_wrappers = weakref.WeakValueDictionary()

OPS = ("paged_run", "ragged_run", "single_decode", "single_prefill")


def compiling():
    """Whether torch.compile (Dynamo) is tracing this call; False without torch.

    The ops are registered before this can be True: a wrapper's constructor
    registers them, and so does ``import attn`` after ``import torch``.
    """
    return _torch is not None and _torch.compiler.is_compiling()


def new_handle(wrapper):
    """The integer that names ``wrapper`` inside a traced graph; the wrapper's
    constructor takes one (``wrapper._op_handle``), a weak reference is kept."""
    h = next(_handles)
    _wrappers[h] = wrapper
    return h


def wrapper_of(handle):
    w = _wrappers.get(int(handle))
    if w is None:
        raise RuntimeError(f"attn: the wrapper of handle {handle} is gone (garbage-collected); a compiled "
                           "function must keep the wrappers it runs alive")
    return w


def registered():
    return _torch is not None


def register_if_loaded():
    """Registers the ops if torch is already imported, or else once it is
    (``import attn`` calls this)."""
    if _torch is not None:
        return
    if "torch" in sys.modules:
        register()
    elif not any(isinstance(f, _RegisterAfterTorch) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterTorch())


class _RegisterAfterTorch(importlib.abc.MetaPathFinder):
    """Finds ``torch`` as the other finders do, once, and registers the ops
    when its module has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run_module = loader.exec_module

        def exec_module(module):
            run_module(module)
            try:
                register()
            except Exception:  # e.g. torch < 2.4: the first attn call says so
                pass

        loader.exec_module = exec_module
        return spec


def register():
    """Registers ``torch.ops.attn.*`` (idempotent); needs torch >= 2.4."""
    global _torch
    if _torch is not None:
        return
    with _lock:
        if _torch is not None:
            return
        import torch
        if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
            raise ImportError(f"attn: torch.compile support needs torch >= 2.4 (torch.library.custom_op); "
                              f"this is torch {torch.__version__}")
        _define(torch)
        _torch = torch


def _outputs_like(torch, q):
    """The ops' outputs: fresh, contiguous (the real and the fake implementations agree)."""
    return (torch.empty(tuple(q.shape), dtype=q.dtype, device=q.device),
            torch.empty(tuple(q.shape[:-1]), dtype=torch.float32, device=q.device))


def _define(torch):
    from typing import Optional

    Tensor = torch.Tensor

    # -- the wrappers' run -------------------------------------------------

    @torch.library.custom_op("attn::paged_run", mutates_args=())
    def paged_run(q: Tensor, k_cache: Tensor, v_cache: Optional[Tensor], handle: int,
                  q_scale: Optional[float] = None, k_scale: Optional[float] = None,
                  v_scale: Optional[float] = None, window_left: Optional[int] = None,
                  q_len_per_req: Optional[int] = None,
                  sinks: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        w = wrapper_of(handle)
        out, lse = _outputs_like(torch, q)
        kv = k_cache if v_cache is None else (k_cache, v_cache)
        extra = {} if q_len_per_req is None else {"q_len_per_req": q_len_per_req}
        w.run(q, kv, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, out=out, lse=lse, return_lse=True,
              window_left=window_left, sinks=sinks, **extra)
        return out, lse

    @paged_run.register_fake
    def _(q, k_cache, v_cache, handle, q_scale=None, k_scale=None, v_scale=None, window_left=None,
          q_len_per_req=None, sinks=None):
        return _outputs_like(torch, q)

    @torch.library.custom_op("attn::ragged_run", mutates_args=())
    def ragged_run(q: Tensor, k: Tensor, v: Tensor, handle: int, q_scale: Optional[float] = None,
                   k_scale: Optional[float] = None, v_scale: Optional[float] = None,
                   o_scale: Optional[float] = None) -> tuple[Tensor, Tensor]:
        w = wrapper_of(handle)
        out, lse = _outputs_like(torch, q)
        w.run(q, k, v, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, o_scale=o_scale, out=out, lse=lse,
              return_lse=True)
        return out, lse

    @ragged_run.register_fake
    def _(q, k, v, handle, q_scale=None, k_scale=None, v_scale=None, o_scale=None):
        return _outputs_like(torch, q)

    # -- the single-request functions ---------------------------------------

    @torch.library.custom_op("attn::single_decode", mutates_args=())
    def single_decode(q: Tensor, k: Tensor, v: Tensor, kv_layout: str = "NHD", pos_encoding_mode: str = "NONE",
                      q_scale: Optional[float] = None, k_scale: Optional[float] = None,
                      v_scale: Optional[float] = None, window_left: int = -1,
                      logits_soft_cap: Optional[float] = None, sm_scale: Optional[float] = None,
                      rope_scale: Optional[float] = None, rope_theta: Optional[float] = None,
                      logits_scale: Optional[float] = None,
                      sinks: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        from .decode import _single_decode
        out, lse = _outputs_like(torch, q)
        extra = {n: x for n, x in (("logits_scale", logits_scale), ("sinks", sinks)) if x is not None}
        _single_decode(q, k, v, kv_layout=kv_layout, pos_encoding_mode=pos_encoding_mode, q_scale=q_scale,
                       k_scale=k_scale, v_scale=v_scale, window_left=window_left, logits_soft_cap=logits_soft_cap,
                       sm_scale=sm_scale, rope_scale=rope_scale, rope_theta=rope_theta, out=out, lse=lse,
                       from_op=True, kwargs=extra)
        return out, lse

    @single_decode.register_fake
    def _(q, k, v, *args, **kwargs):
        return _outputs_like(torch, q)

    @torch.library.custom_op("attn::single_prefill", mutates_args=())
    def single_prefill(q: Tensor, k: Tensor, v: Tensor, custom_mask: Optional[Tensor] = None,
                       packed_custom_mask: Optional[Tensor] = None, causal: bool = False, kv_layout: str = "NHD",
                       pos_encoding_mode: str = "NONE", sm_scale: Optional[float] = None, window_left: int = -1,
                       logits_soft_cap: Optional[float] = None, rope_scale: Optional[float] = None,
                       rope_theta: Optional[float] = None, logits_scale: Optional[float] = None,
                       sinks: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
        from .prefill import _single_prefill
        out, lse = _outputs_like(torch, q)
        extra = {n: x for n, x in (("logits_scale", logits_scale), ("sinks", sinks)) if x is not None}
        _single_prefill(q, k, v, custom_mask=custom_mask, packed_custom_mask=packed_custom_mask, causal=causal,
                        kv_layout=kv_layout, pos_encoding_mode=pos_encoding_mode, sm_scale=sm_scale,
                        window_left=window_left, logits_soft_cap=logits_soft_cap, rope_scale=rope_scale,
                        rope_theta=rope_theta, out=out, lse=lse, from_op=True, kwargs=extra)
        return out, lse

    @single_prefill.register_fake
    def _(q, *args, **kwargs):
        return _outputs_like(torch, q)


# -- what the traced entry points call ---------------------------------------

TRACED_KEYWORDS = ("logits_scale", "sinks")


def traced_extras(where, kwargs):
    """The keywords a traced ``single_*`` call passes to its op; any other
    given (not None) raises NotImplementedError naming it."""
    for name, value in kwargs.items():
        if name not in TRACED_KEYWORDS and value is not None:
            raise NotImplementedError(
                f"attn: {where}({name}=...) inside torch.compile is not implemented: the traced op takes "
                f"tensors and numbers only ({', '.join(TRACED_KEYWORDS)} besides FlashInfer's arguments); "
                "call it outside the compiled region, or plan a wrapper outside and run it inside")
    return {n: kwargs.get(n) for n in TRACED_KEYWORDS}


def finish(o, l, out, lse, return_lse):
    """A traced run's result: the op's fresh outputs, copied into ``out``/``lse`` when given."""
    if out is not None:
        out.copy_(o)
        o = out
    if lse is not None:
        lse.copy_(l)
        l = lse
    return (o, l) if return_lse else o


def paged_run(wrapper, q, paged_kv_cache, *, q_scale, k_scale, v_scale, out, lse, return_lse, window_left=None,
              q_len_per_req=None, sinks=None):
    """The traced form of a paged wrapper's ``run`` (decode, paged prefill)."""
    if isinstance(paged_kv_cache, (tuple, list)):
        k, v = paged_kv_cache
    else:
        k, v = paged_kv_cache, None
    o, l = _torch.ops.attn.paged_run(q, k, v, wrapper._op_handle, q_scale, k_scale, v_scale, window_left,
                                     q_len_per_req, sinks)
    return finish(o, l, out, lse, return_lse)


def ragged_run(wrapper, q, k, v, *, q_scale, k_scale, v_scale, o_scale, out, lse, return_lse):
    """The traced form of the ragged wrapper's ``run``."""
    o, l = _torch.ops.attn.ragged_run(q, k, v, wrapper._op_handle, q_scale, k_scale, v_scale, o_scale)
    return finish(o, l, out, lse, return_lse)
