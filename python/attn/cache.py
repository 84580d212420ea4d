"""The on-disk kernel cache: compile once, load in milliseconds afterwards.

An entry is a directory ``<cache>/<key>/`` holding ``kernel.cubin`` (or
``kernel.ptx``), ``kernel.json`` (the manifest, docs/Manifest.md) and
``meta.json``, written last, with the key's inputs, the compiler version and
the SHA-256 of the other files. ``key`` hashes the attn IR (variants, dtypes,
head configuration, page size, layout; the tile candidates follow from these
in the compiler), the arch, what was emitted and the tile candidate. A module
has one entry per candidate (``candidate=i``: that tile's kernels, compiled
when a plan first picks it) and one manifest-only entry (``emit="manifest"``,
no image: every candidate's launch contract, what plan() chooses from). The compiler version is checked on
lookup: an entry from another compiler version is a miss when a compiler is
at hand (it recompiles), and is used as is on a runtime-only machine, which
cannot compile anyway.

Where: ``$ATTN_CACHE_DIR``, else ``~/.cache/attn``.

- corrupt entry (unreadable meta, a hash mismatch, a missing file): a
  ``RuntimeWarning`` naming the entry, then recompile and overwrite;
- unwritable cache directory: a ``RuntimeWarning``, then the kernel is
  compiled and kept in memory for this process only.

>>> import tempfile
>>> c = KernelCache(tempfile.mkdtemp())
>>> c.lookup("0" * 64) is None
True
"""

import hashlib
import json
import os
import tempfile
import time
import warnings

CACHE_FORMAT = 2


def default_cache_dir():
    """``$ATTN_CACHE_DIR`` or ``~/.cache/attn``."""
    return os.environ.get("ATTN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "attn")


def cache_key(ir, arch, emit="cubin", candidate=None):
    """The entry name for attn IR compiled for ``arch``.

    ``emit``: "cubin", "ptx" or "manifest" (the launch contracts only);
    ``candidate``: a tile candidate's index, or None for all of them.
    """
    h = hashlib.sha256()
    h.update(json.dumps({"format": CACHE_FORMAT, "ir": ir, "arch": arch, "emit": emit,
                         "candidate": candidate}, sort_keys=True).encode())
    return h.hexdigest()


class CachedKernel:
    """A compiled module: image bytes (empty for a manifest-only entry),
    manifest JSON text, and where it came from."""

    def __init__(self, image, manifest, compiler_version, source, path=None, stages=None):
        self.image = image
        self.manifest = manifest
        self.compiler_version = compiler_version
        self.source = source  # "memory", "disk" or "compiled"
        self.path = path
        self.stages = stages or []

    def __repr__(self):
        return f"CachedKernel(source={self.source!r}, path={self.path!r}, {len(self.image)} bytes)"


def _sha(data):
    return hashlib.sha256(data).hexdigest()


class KernelCache:
    """Disk cache of compiled kernels, with a per-process memory layer.

    ``stats`` counts ``hits`` (memory or disk), ``misses``, ``corrupt`` and
    ``stale`` lookups.
    """

    def __init__(self, directory=None):
        self.directory = directory or default_cache_dir()
        self.memory = {}
        self.stats = {"hits": 0, "misses": 0, "corrupt": 0, "stale": 0}
        self._warned_unwritable = False

    def entry_dir(self, key):
        return os.path.join(self.directory, key)

    def lookup(self, key, compiler_version=None):
        """The cached kernel for ``key``, or None (a miss).

        ``compiler_version``: when given, an entry written by another version
        is a miss (stale). A corrupt entry warns and is a miss.
        """
        if key in self.memory:
            self.stats["hits"] += 1
            return self.memory[key]
        d = self.entry_dir(key)
        meta_path = os.path.join(d, "meta.json")
        if not os.path.exists(meta_path):
            self.stats["misses"] += 1
            return None
        try:
            with open(meta_path, "rb") as f:
                meta = json.loads(f.read().decode())
            if meta.get("format") != CACHE_FORMAT or meta.get("key") != key:
                raise ValueError("meta.json does not describe this key")
            files = meta["files"]
            image = b""
            if "image" in files:
                with open(os.path.join(d, files["image"]["name"]), "rb") as f:
                    image = f.read()
                if _sha(image) != files["image"]["sha256"]:
                    raise ValueError(f"{files['image']['name']} does not match its checksum")
            with open(os.path.join(d, files["manifest"]["name"]), "rb") as f:
                manifest = f.read()
            if _sha(manifest) != files["manifest"]["sha256"]:
                raise ValueError(f"{files['manifest']['name']} does not match its checksum")
            json.loads(manifest.decode())
        except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            self.stats["corrupt"] += 1
            warnings.warn(f"attn: kernel cache entry {d} is corrupt ({e}); recompiling it",
                          RuntimeWarning, stacklevel=3)
            return None
        if compiler_version is not None and meta.get("compiler_version") != compiler_version:
            self.stats["stale"] += 1
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        k = CachedKernel(image, manifest.decode(), meta.get("compiler_version"), "disk", d)
        self.memory[key] = k
        return k

    def store(self, key, kernel, inputs=None):
        """Writes ``kernel`` under ``key`` (atomically per file, meta last).

        Always keeps it in memory; returns the entry directory, or None when
        the cache directory is not writable (after one RuntimeWarning).
        """
        self.memory[key] = kernel
        d = self.entry_dir(key)
        image_name = "kernel.cubin" if not kernel.image.lstrip().startswith(b"//") else "kernel.ptx"
        manifest = kernel.manifest.encode()
        files = {"manifest": {"name": "kernel.json", "sha256": _sha(manifest)}}
        outputs = [("kernel.json", manifest)]
        if kernel.image:
            files["image"] = {"name": image_name, "sha256": _sha(kernel.image)}
            outputs.insert(0, (image_name, kernel.image))
        meta = {
            "format": CACHE_FORMAT,
            "key": key,
            "compiler_version": kernel.compiler_version,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "inputs": inputs or {},
            "files": files,
        }
        try:
            os.makedirs(d, exist_ok=True)
            for name, data in outputs + [("meta.json", json.dumps(meta, indent=1, sort_keys=True).encode())]:
                fd, tmp = tempfile.mkstemp(dir=d, prefix="." + name)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, os.path.join(d, name))
        except OSError as e:
            if not self._warned_unwritable:
                warnings.warn(f"attn: kernel cache directory {self.directory} is not writable ({e}); "
                              "compiled kernels are kept in memory for this process only "
                              "(set ATTN_CACHE_DIR to a writable directory)", RuntimeWarning, stacklevel=3)
                self._warned_unwritable = True
            return None
        kernel.path = d
        return d


_default = None


def default_cache():
    """The process-wide cache at :func:`default_cache_dir` (re-read if it changes)."""
    global _default
    if _default is None or _default.directory != default_cache_dir():
        _default = KernelCache()
    return _default
