"""Exceptions of the attn package."""


class AttnError(RuntimeError):
    """Base class of attn's own errors."""


class CompileError(AttnError):
    """The compiler rejected a variant or an attention.

    ``status`` is the compiler's status name (``ParseError``, ``VerifyError``,
    ``Unsupported``, ...) and ``diagnostics`` its messages, as printed by MLIR
    (``attn.mlir:LINE:COL: error: ...``), which the message also contains.
    """

    def __init__(self, status, diagnostics, what="attention"):
        self.status = status
        self.diagnostics = diagnostics
        super().__init__(f"attn: compiling the {what} failed ({status}):\n{diagnostics.rstrip()}")


class PageIndexError(AttnError, IndexError):
    """A paged attention kernel read a ``kv_indices`` entry outside
    ``[0, num_pages)`` of its KV cache.

    The kernels never dereference such an index: they read page 0 in its
    place (so that launch's output is wrong) and set a per-device word that
    the next ``plan()`` or ``run()`` on the device reads once the launch has
    finished, raising this error; with ``ATTN_CHECK_INDICES=1`` every
    ``run()`` waits for its kernels and raises at once. The CUDA context
    stays usable.
    """


class KernelNotFoundError(AttnError):
    """No precompiled kernel for this configuration, and no compiler to make one."""


def not_implemented(name, instead):
    """A stand-in for a FlashInfer entry point attn lacks.

    Engines import these names at module level, so the import works; a call
    raises NotImplementedError naming the entry point and what to use instead.
    """
    def missing(*args, **kwargs):
        raise NotImplementedError(f"attn: {name} is not implemented; {instead}")
    missing.__name__ = missing.__qualname__ = name
    missing.__doc__ = f"Not implemented in attn (raises NotImplementedError): {instead}."
    return missing
