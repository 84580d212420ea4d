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
