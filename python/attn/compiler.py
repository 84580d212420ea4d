"""Compile on first use, through the kernel cache.

:func:`get_kernel` returns the compiled module of an :class:`AttentionSpec`
for an arch: from the process's memory, from the disk cache, or compiled by
the compiler C API (``libattn_compiler.so``) and stored. On a runtime-only
build (no MLIR, e.g. the GPU machine) it only looks kernels up; precompile
them with ``python -m attn.precompile`` (docs/Python.md).
"""

import os

from . import _native
from .cache import CachedKernel, cache_key, default_cache
from .errors import CompileError, KernelNotFoundError


_build_id = None


def _compiler_build_id():
    """Size and modification time of the loaded libattn_compiler.so: a rebuilt
    compiler makes the disk cache's entries of the old one misses, since the
    version number alone does not change between builds. Empty where the
    library cannot be found (Linux's /proc/self/maps names it)."""
    global _build_id
    if _build_id is None:
        _build_id = ""
        try:
            with open("/proc/self/maps") as maps:
                paths = {line.split()[-1] for line in maps if "libattn_compiler" in line}
            for path in sorted(paths):
                st = os.stat(path)
                _build_id = f"{st.st_size:x}-{st.st_mtime_ns:x}"
                break
        except OSError:
            pass
    return _build_id


def compiler_version():
    """The compiler's version string plus its build id, or None on a
    runtime-only build. A cache entry from another string is a miss."""
    if not _native.has_compiler():
        return None
    version = _native.native().compiler_version()
    build = _compiler_build_id()
    return f"{version} build {build}" if build else version


def compile_ir(ir, arch="sm_90", emit_cubin=True, what="attention"):
    """Compiles attn IR text; returns the binding's result dict.

    Raises CompileError with the compiler's diagnostics on failure.
    """
    if not _native.has_compiler():
        raise KernelNotFoundError("attn: this build has no compiler (runtime-only)")
    r = _native.native().compile(ir, chip=arch, emit_cubin=emit_cubin,
                                 cuda_path=os.environ.get("CUDA_HOME", ""))
    if not r["ok"]:
        raise CompileError(r["status"], r["diagnostics"], what=what)
    return r


def get_kernel(spec, arch, cache=None, emit_cubin=True):
    """The compiled kernels of ``spec`` for ``arch`` (a CachedKernel).

    >>> from attn.variants import AttentionSpec
    >>> k = get_kernel(AttentionSpec(128, 32, 8), "sm_90")  # doctest: +SKIP
    >>> k.source in ("memory", "disk", "compiled")            # doctest: +SKIP
    True
    """
    cache = cache or default_cache()
    ir = spec.to_ir()
    emit = "cubin" if emit_cubin else "ptx"
    key = cache_key(ir, arch, emit)
    version = compiler_version()
    hit = cache.lookup(key, version)
    if hit is not None:
        return hit
    if version is None:
        raise KernelNotFoundError(
            f"attn: no precompiled kernel for {spec} on {arch} in {cache.directory} (key {key[:16]}...), "
            "and this build has no compiler. Precompile on a machine with the compiler "
            "(`python -m attn.precompile ... --out DIR`), carry DIR here and set ATTN_CACHE_DIR=DIR.")
    r = compile_ir(ir, arch, emit_cubin)
    image = r["cubin"] if emit_cubin else r["ptx"].encode()
    kernel = CachedKernel(image, r["manifest"], version, "compiled", stages=r["stages"])
    cache.store(key, kernel, inputs={"arch": arch, "emit": emit, "spec": repr(spec),
                                     "generator": r["generator"],
                                     "stages_ms": [[n, round(ms, 3)] for n, ms in r["stages"]]})
    return kernel
