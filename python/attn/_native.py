"""Loads the binding module ``attn._attn`` and says clearly when it is missing.

The module is built by CMake (``ninja attn-python``) into ``<build>/python/attn``;
``PYTHONPATH=<build>/python`` makes ``import attn`` find it. Everything in the
package that needs no kernels (IR generation, argument checks, the cache's
bookkeeping) works without it.
"""

_native = None
_error = None


def native():
    """The ``_attn`` binding module; ImportError with a build hint if absent."""
    global _native, _error
    if _native is not None:
        return _native
    try:
        from . import _attn  # type: ignore
    except ImportError as e:  # pragma: no cover - depends on the build
        _error = e
        raise ImportError(
            "attn: the binding module attn._attn is not built or not on the path "
            f"({e}). Build it with `ninja -C <build> attn-python` and put "
            "<build>/python on PYTHONPATH (docs/Python.md).") from e
    _native = _attn
    return _native


def has_native():
    """Whether the binding module can be imported."""
    try:
        native()
        return True
    except ImportError:
        return False


def has_compiler():
    """Whether the binding module was built with the compiler (libattn_compiler.so)."""
    return has_native() and bool(getattr(native(), "has_compiler", False))
