"""Compile on first use, through the kernel cache.

:func:`describe` returns the launch contracts of an :class:`AttentionSpec`'s
kernels for an arch (a manifest-only entry: every tile candidate, no code),
and :func:`get_kernel` the compiled kernels of one candidate (or of all):
from the process's memory, from the disk cache, or compiled by the compiler
C API (``libattn_compiler.so``) and stored; a compile holds the key's lock
(:meth:`KernelCache.locked`), so concurrent processes compile a key once and
the others load it. plan() describes first, picks a
candidate for the batch, and compiles only that one, so a module whose
batches all decode never compiles its 128-row tile. On a runtime-only build
(no MLIR, e.g. the GPU machine) both only look entries up; precompile them
with ``python -m attn.precompile`` (docs/Python.md).

With ``ATTN_RECORD_MISSES=PATH`` a runtime-only build appends one JSON line
to PATH for every kernel it misses (:func:`record_miss`) before raising
KernelNotFoundError; ``python -m attn.precompile --from-record PATH``
compiles exactly those where the compiler is.

``ATTN_KV_TMA=1`` compiles attention with whole K/V tiles loaded by TMA
where the tile and the pages can take it (the warp-specialized wgmma tiles
of sm_90a; :func:`kv_tma_for`): an opt-in while it is measured, with cache
keys of its own, so set it alike where kernels are precompiled and where
they run.
"""

import dataclasses
import json
import logging
import os
import time

from . import _native
from .cache import CachedKernel, cache_key, default_cache
from .errors import CompileError, KernelNotFoundError
from .log import logger


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


KV_TMA_ENV = "ATTN_KV_TMA"


def kv_tma_for(spec):
    """Whether ``spec``'s kernels are compiled with K/V tiles loaded by TMA
    where the tile and the pages can take it: ``ATTN_KV_TMA=1`` and an
    attention spec (row kernels have no K/V tiles). ValueError for a value
    other than 0 or 1, naming the variable."""
    value = os.environ.get(KV_TMA_ENV, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"attn: {KV_TMA_ENV} must be 0 or 1, got {value!r:.20}")
    from .variants import AttentionSpec
    return value == "1" and isinstance(spec, AttentionSpec)


def compile_ir(ir, arch, emit_cubin=True, what="attention", manifest_only=False, candidate=None, kv_tma=False):
    """Compiles attn IR text; returns the binding's result dict.

    ``manifest_only``: the launch contracts alone (no lowering, milliseconds);
    ``candidate``: only that tile candidate's kernels (None: all);
    ``kv_tma``: K/V tiles by TMA where the tile and the pages can.
    Raises CompileError with the compiler's diagnostics on failure.
    """
    if not _native.has_compiler():
        raise KernelNotFoundError("attn: this build has no compiler (runtime-only)")
    r = _native.native().compile(ir, chip=arch, emit_cubin=emit_cubin,
                                 cuda_path=os.environ.get("CUDA_HOME", ""), manifest_only=manifest_only,
                                 candidate=-1 if candidate is None else int(candidate), kv_tma=bool(kv_tma))
    if not r["ok"]:
        raise CompileError(r["status"], r["diagnostics"], what=what)
    return r


def spec_summary(spec):
    """A one-line description of an AttentionSpec for logs and messages:
    ``decode heads 32/8 d=128 page=16 bf16 NHD [soft_cap, causal]``.

    >>> from attn.variants import AttentionSpec
    >>> spec_summary(AttentionSpec(128, 32, 8, 16, variants=("causal",)))
    'decode heads 32/8 d=128 page=16 bf16 NHD [causal]'
    """
    if hasattr(spec, "summary"):  # a row kernel's spec (attn/rows.py)
        return spec.summary()
    kind = "decode" if spec.query_rows == 1 else (
        f"{spec.query_rows}-row" if spec.query_rows is not None else
        "ragged prefill" if spec.indexing == "ragged" else "prefill")
    page = f" page={spec.page_size}" if spec.indexing == "paged" else ""
    variants = list(spec.variants) + (["custom_mask"] if spec.custom_mask else [])
    layout = "strided" if getattr(spec, "strided_kv", False) else spec.layout
    return (f"{kind} heads {spec.num_qo_heads}/{spec.num_kv_heads} d={spec.head_dim}{page} {spec.dtype} "
            f"{layout}" + (f" [{', '.join(variants)}]" if variants else ""))


def _log_hit(hit, what, spec, arch, key, in_memory):
    if hit is not None:
        logger.debug("kernel cache hit (%s): %s of %s for %s (key %s)", "memory" if in_memory else "disk",
                     what, spec_summary(spec), arch, key[:16])


def _lookup_or_compile(spec, arch, cache, emit, candidate):
    cache = cache or default_cache()
    ir = spec.to_ir()
    kv_tma = kv_tma_for(spec)
    key = cache_key(ir, arch, emit, candidate, kv_tma)
    version = compiler_version()
    what = "the launch contracts" if emit == "manifest" else (
        "the kernels" if candidate is None else f"tile candidate {candidate}'s kernels")
    if version is None or key in cache.memory:
        in_memory = key in cache.memory
        hit = cache.lookup(key, version)
        _log_hit(hit, what, spec, arch, key, in_memory)
        if hit is None:
            record_miss(spec, arch, emit, candidate, key, cache.directory)
            raise KernelNotFoundError(
                f"attn: {what} of {spec} on {arch} are not in {cache.directory} (key {key[:16]}...), "
                "and this build has no compiler. Precompile on a machine with the compiler "
                "(`python -m attn.precompile ... --out DIR`), carry DIR here and set ATTN_CACHE_DIR=DIR.")
        return hit
    # One process compiles a key; the others wait here, then find its entry.
    with cache.locked(key):
        hit = cache.lookup(key, version)
        if hit is not None:
            _log_hit(hit, what, spec, arch, key, False)
            return hit
        logger.debug("kernel cache miss: %s of %s for %s (key %s) in %s; compiling", what, spec_summary(spec),
                     arch, key[:16], cache.directory)
        t0 = time.perf_counter()
        r = compile_ir(ir, arch, emit == "cubin", manifest_only=emit == "manifest", candidate=candidate,
                       kv_tma=kv_tma)
        ms = (time.perf_counter() - t0) * 1e3
        image = b"" if emit == "manifest" else r["cubin"] if emit == "cubin" else r["ptx"].encode()
        kernel = CachedKernel(image, r["manifest"], version, "compiled", stages=r["stages"])
        cache.store(key, kernel, inputs={"arch": arch, "emit": emit, "candidate": candidate, "kv_tma": kv_tma,
                                         "spec": repr(spec),
                                         "generator": r["generator"],
                                         "stages_ms": [[n, round(ms, 3)] for n, ms in r["stages"]]})
    if logger.isEnabledFor(logging.INFO):
        stages = ", ".join(f"{n} {t:.1f}" for n, t in r["stages"])
        logger.info("compiled %s of %s for %s (%s, key %s) in %.0f ms%s", what, spec_summary(spec), arch, emit,
                    key[:16], ms, f" (stages, ms: {stages})" if stages else "")
    return kernel


RECORD_ENV = "ATTN_RECORD_MISSES"
RECORD_FORMAT = 1
_recorded = set()  # (path, key): one line per miss and process


def _jsonable(v):
    """Tuples (nested) become lists; everything else a spec holds is a JSON scalar."""
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    return v


def _tupled(v):
    """Lists (nested) become tuples again: a spec's sequences are tuples."""
    if isinstance(v, list):
        return tuple(_tupled(x) for x in v)
    return v


def spec_to_json(spec):
    """``{"class": name, "fields": {...}}``: enough to rebuild ``spec`` exactly
    (:func:`spec_from_json`). An AttentionSpec's dataclass fields, a row
    kernel's namedtuple fields; tuples are written as lists.

    >>> from attn.variants import AttentionSpec
    >>> d = spec_to_json(AttentionSpec(64, 4, 4, variants=("causal",)))
    >>> d["class"], d["fields"]["variants"]
    ('AttentionSpec', ['causal'])
    """
    if dataclasses.is_dataclass(spec):
        fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
    elif hasattr(spec, "_fields"):  # the row kernels' specs (rows.py)
        fields = dict(zip(spec._fields, spec))
    else:
        raise TypeError(f"attn: cannot describe a {type(spec).__name__} as a kernel spec")
    return {"class": type(spec).__name__, "fields": {k: _jsonable(v) for k, v in fields.items()}}


def _spec_classes():
    from .rows import AppendKVSpec, CopyByTableSpec, CopyIndicesSpec, MergeStatesSpec
    from .variants import AttentionSpec
    return {c.__name__: c for c in (AttentionSpec, MergeStatesSpec, AppendKVSpec, CopyIndicesSpec,
                                    CopyByTableSpec)}


def spec_from_json(d):
    """The spec :func:`spec_to_json` wrote (equal to the original, hashing
    alike); ValueError/TypeError for anything else (an unknown class, missing
    or unknown fields, or values the spec's own checks refuse)."""
    if not isinstance(d, dict) or not isinstance(d.get("class"), str) or not isinstance(d.get("fields"), dict):
        raise ValueError('attn: a kernel spec must be {"class": name, "fields": {...}}')
    classes = _spec_classes()
    cls = classes.get(d["class"])
    if cls is None:
        raise ValueError(f"attn: unknown kernel spec class {d['class']!r:.40}; known: {', '.join(classes)}")
    names = ([f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else list(cls._fields))
    fields = d["fields"]
    unknown = sorted(set(fields) - set(names))
    if unknown:
        raise ValueError(f"attn: {d['class']} has no fields {unknown}")
    kwargs = {k: _tupled(v) for k, v in fields.items()}
    if not dataclasses.is_dataclass(cls):  # a namedtuple: every field is required
        missing = [n for n in names if n not in kwargs]
        if missing:
            raise ValueError(f"attn: {d['class']} lacks fields {missing}")
    return cls(**kwargs)


def record_miss(spec, arch, emit, candidate, key, directory):
    """Appends what a runtime-only build missed to ``$ATTN_RECORD_MISSES``
    (when set): one JSON line ``{"attn_miss": 1, "spec": spec_to_json(spec),
    "arch", "emit", "candidate", "key", "cache_dir", "time"}`` written with
    one ``write`` to a file opened ``O_APPEND``, so lines of concurrent
    processes do not interleave. Once per key and process. Never raises: a
    record that cannot be written is a warning, and the caller's
    KernelNotFoundError follows as it would without it."""
    path = os.environ.get(RECORD_ENV)
    if not path or (path, key) in _recorded:
        return
    try:
        line = json.dumps({"attn_miss": RECORD_FORMAT, "spec": spec_to_json(spec), "arch": arch, "emit": emit,
                           "candidate": candidate, "key": key, "kv_tma": kv_tma_for(spec),
                           "cache_dir": str(directory),
                           "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                          sort_keys=True, separators=(",", ":")) + "\n"
        data = line.encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            written = os.write(fd, data)
        finally:
            os.close(fd)
        if written != len(data):
            raise OSError(f"short write ({written} of {len(data)} bytes)")
        _recorded.add((path, key))
    except Exception as e:  # noqa: BLE001 - the miss itself must still be raised
        logger.warning("cannot record the missed kernel (key %s) in %s=%s: %s", key[:16], RECORD_ENV, path, e)


def describe(spec, arch, cache=None):
    """The launch contracts of ``spec``'s kernels for ``arch``: a CachedKernel
    with the manifest of every tile candidate and no image.

    >>> from attn.variants import AttentionSpec
    >>> d = describe(AttentionSpec(128, 32, 8, query_rows=None), "sm_90")  # doctest: +SKIP
    >>> len(d.image)                                                        # doctest: +SKIP
    0
    """
    return _lookup_or_compile(spec, arch, cache, "manifest", None)


def get_kernel(spec, arch, cache=None, emit_cubin=True, candidate=None):
    """The compiled kernels of ``spec`` for ``arch`` (a CachedKernel): those
    of tile candidate ``candidate`` (an index into :func:`describe`'s
    attention kernels) and its merge kernel, or of every candidate (None).

    >>> from attn.variants import AttentionSpec
    >>> k = get_kernel(AttentionSpec(128, 32, 8), "sm_90", candidate=0)  # doctest: +SKIP
    >>> k.source in ("memory", "disk", "compiled")                        # doctest: +SKIP
    True
    """
    return _lookup_or_compile(spec, arch, cache, "cubin" if emit_cubin else "ptx", candidate)


def get_all_kernels(spec, arch, cache=None):
    """The launch contracts of ``spec`` and every tile candidate's kernels,
    each its own cache entry (what a runtime-only machine needs to find):
    ``(contracts, [kernels of candidate 0, 1, ...])``."""
    import json
    contracts = describe(spec, arch, cache)
    n = sum(1 for k in json.loads(contracts.manifest)["kernels"] if k.get("role") == "attention")
    return contracts, [get_kernel(spec, arch, cache, candidate=i) for i in range(n)]
