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

The cache loads only what this user could have written: the cache directory,
an entry and its files must be owned by the current user and not group- or
world-writable; symbolic links are not followed; ``meta.json`` must have the
shape :meth:`KernelCache.store` writes, and the files it names must be plain
names inside the entry. New directories are created ``0o700``, files
``0o600``. Compilers of one key take a lock (``<cache>/<key>.lock``,
``flock``): one compiles, the others wait and then read its entry.

- corrupt entry (malformed meta of any shape, a hash mismatch, a missing
  file) or one refused by the rules above: a ``RuntimeWarning`` naming the
  entry, then recompile and overwrite (a refused entry of another user is
  left alone and the kernel kept in memory);
- unwritable or refused cache directory: a ``RuntimeWarning``, then the
  kernel is compiled and kept in memory for this process only.

A kernel pack is a cache directory with a digest list (``attn-pack.json``,
written by ``python -m attn.precompile``): the SHA-256 of every file of
every entry. meta.json's own checksums sit beside the files they cover, so
they catch corruption, not tampering; the list can come out of band
(``$ATTN_PACK_DIGESTS``), so changing an entry and the pack's list is not
enough. A cache with a list (in the directory, or named by
``$ATTN_PACK_DIGESTS``) loads only entries that match it exactly: any other
is a ``RuntimeWarning`` naming the entry and a miss, and what is compiled
there stays in memory (a pack changes only through precompile). A list that
cannot be read refuses every entry. :func:`verify_pack` (``python -m attn
verify-pack``) checks a whole pack: missing, extra and changed files.

>>> import tempfile
>>> c = KernelCache(tempfile.mkdtemp())
>>> c.lookup("0" * 64) is None
True
"""

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
import tempfile
import time
import warnings

# Part of every key: raised when the kernels' launch contract changes, so that
# an older entry (or pack) is never launched with arguments it does not take.
# 3: paged attention kernels take num_pages and index_error.
# 4: paged attention kernels take page_stride.
# 5: attention kernels take plan and run its head-group copies (plan ABI 3).
CACHE_FORMAT = 5
PACK_FILE = "attn-pack.json"  # a kernel pack's digest list, at the cache directory's root
PACK_FORMAT = 1
# A list entry is ~300 bytes: this holds hundreds of thousands of entries.
MAX_PACK_BYTES = 64 << 20
# A meta.json is a few KB; anything much larger is not one this cache wrote.
MAX_META_BYTES = 1 << 20
_SHA256_RE = re.compile(r"[0-9a-f]{64}")


def default_cache_dir():
    """``$ATTN_CACHE_DIR`` or ``~/.cache/attn``."""
    return os.environ.get("ATTN_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "attn")


def pack_digests_env():
    """``$ATTN_PACK_DIGESTS``: a digest list that overrides a pack's own, or None."""
    return os.environ.get("ATTN_PACK_DIGESTS") or None


def cache_key(ir, arch, emit="cubin", candidate=None, kv_tma=False):
    """The entry name for attn IR compiled for ``arch``.

    ``emit``: "cubin", "ptx" or "manifest" (the launch contracts only);
    ``candidate``: a tile candidate's index, or None for all of them;
    ``kv_tma``: compiled with K/V tiles by TMA (``ATTN_KV_TMA``; a key
    of its own, and without it the keys of before it existed).
    """
    fields = {"format": CACHE_FORMAT, "ir": ir, "arch": arch, "emit": emit, "candidate": candidate}
    if kv_tma:
        fields["kv_tma"] = True
    h = hashlib.sha256()
    h.update(json.dumps(fields, sort_keys=True).encode())
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


class _Refused(Exception):
    """An entry, file or directory the cache must not trust (the message says why)."""


class _PackMismatch(_Refused):
    """An entry that differs from the kernel pack's digest list (the message says how)."""


def _check_owner(st, what):
    """Refuses what another user owns or may write: it could hold a planted kernel."""
    if st.st_uid != os.geteuid():
        raise _Refused(f"{what} is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})")
    if st.st_mode & 0o022:
        raise _Refused(f"{what} is group- or world-writable (mode {stat.S_IMODE(st.st_mode):o}; chmod go-w it)")


def _open_dir(path):
    """A file descriptor of directory ``path``, which must not be a symbolic link."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.lexists(path):
            raise _Refused(f"{path} is a symbolic link or not a directory") from None
        raise


def _read(dfd, name, limit=None):
    """The bytes of regular file ``name`` in the directory ``dfd``: no symbolic
    link, no FIFO or device (opened non-blocking, then checked), owned by this user."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _Refused(f"{name} is a symbolic link") from None
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Refused(f"{name} is not a regular file")
        _check_owner(st, name)
        if limit is not None and st.st_size > limit:
            raise ValueError(f"{name} has {st.st_size} bytes, more than {limit}")
        return f.read()


def _plain_name(name):
    return isinstance(name, str) and name not in ("", ".", "..") and not any(c in name for c in "/\\\0")


def _file_entry(files, role):
    """(name, sha256) of ``files[role]``, a plain name inside the entry."""
    f = files.get(role)
    if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not isinstance(f.get("sha256"), str):
        raise ValueError(f"meta.json's files.{role} is not {{'name': str, 'sha256': str}}")
    name = f["name"]
    if not _plain_name(name):
        raise _Refused(f"meta.json names {name!r:.80} for its {role}: not a file name inside the entry")
    if not _SHA256_RE.fullmatch(f["sha256"]):
        raise ValueError(f"meta.json's files.{role}.sha256 is not a SHA-256")
    return name, f["sha256"]


def _parse_meta(data, key):
    """The files meta.json lists and the compiler version, checked to be the
    shape store() writes: any other JSON value is a ValueError, not a crash."""
    try:
        meta = json.loads(data.decode())
    except RecursionError:  # nested deeper than the parser's stack
        raise ValueError("meta.json is nested too deeply") from None
    if not isinstance(meta, dict):
        raise ValueError(f"meta.json holds a JSON {type(meta).__name__}, not an object")
    if meta.get("format") != CACHE_FORMAT or meta.get("key") != key:
        raise ValueError("meta.json does not describe this key")
    version = meta.get("compiler_version")
    if version is not None and not isinstance(version, str):
        raise ValueError("meta.json's compiler_version is not a string")
    files = meta.get("files")
    if not isinstance(files, dict):
        raise ValueError("meta.json has no files object")
    listed = {"manifest": _file_entry(files, "manifest")}
    if "image" in files:
        listed["image"] = _file_entry(files, "image")
    return listed, version


def _parse_pack(data, path):
    """The entries of a digest list, ``{key: {file name: sha256}}``, checked
    to be the shape :meth:`KernelCache.write_pack` writes."""
    try:
        doc = json.loads(data.decode())
    except RecursionError:
        raise ValueError(f"{path} is nested too deeply") from None
    except ValueError as e:  # not UTF-8, not JSON
        raise ValueError(f"{path} is not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("attn_pack") != PACK_FORMAT:
        raise ValueError(f"{path} is not an attn kernel pack digest list (attn_pack: {PACK_FORMAT})")
    entries = doc.get("entries")
    if not isinstance(entries, dict):
        raise ValueError(f"{path} has no entries object")
    for key, files in entries.items():
        if not _SHA256_RE.fullmatch(key):
            raise ValueError(f"{path}: entry {key!r:.80} is not a cache key")
        if not isinstance(files, dict) or "meta.json" not in files:
            raise ValueError(f"{path}: entry {key} is not {{file name: sha256}} with meta.json")
        for name, digest in files.items():
            if not _plain_name(name) or not isinstance(digest, str) or not _SHA256_RE.fullmatch(digest):
                raise ValueError(f"{path}: entry {key} lists {name!r:.80}: not a file name with a SHA-256")
    return entries


def _read_pack(path):
    """The entries of the digest list at ``path``, read as entry files are
    (a regular file of this user's, not a symbolic link)."""
    parent = os.path.dirname(path) or "."
    dfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _parse_pack(_read(dfd, os.path.basename(path), MAX_PACK_BYTES), path)
    finally:
        os.close(dfd)


def _pack_diff(expected, got):
    """How an entry's files (``{name: sha256}``) differ from its digest-list
    line, or None when they are the same."""
    diffs = [f"{n} is missing" for n in sorted(set(expected) - set(got))]
    diffs += [f"{n} is not in the list" for n in sorted(set(got) - set(expected))]
    diffs += [f"{n} has changed" for n in sorted(set(got) & set(expected)) if got[n] != expected[n]]
    return "; ".join(diffs) or None


_UNSET = object()


class KernelCache:
    """Disk cache of compiled kernels, with a per-process memory layer.

    ``stats`` counts ``hits`` (memory or disk), ``misses``, ``corrupt`` (or
    refused) and ``stale`` lookups.
    """

    def __init__(self, directory=None, digests=None, writes_pack=False):
        """``digests``: the digest list to verify entries against (default:
        ``$ATTN_PACK_DIGESTS``, else the directory's ``attn-pack.json`` when
        there is one, else none: not a pack). ``writes_pack`` (precompile):
        verify against the directory's own list only, and store to disk, the
        list being rewritten afterwards (:meth:`write_pack`)."""
        self.directory = directory or default_cache_dir()
        self.digests = digests
        self.writes_pack = writes_pack
        self.digests_env = pack_digests_env()  # default_cache() makes a new cache when it changes
        self.memory = {}
        self.stats = {"hits": 0, "misses": 0, "corrupt": 0, "stale": 0}
        self._warned_unwritable = False
        self._warned_pack = False
        self._pack = _UNSET

    def entry_dir(self, key):
        return os.path.join(self.directory, key)

    def pack_path(self):
        """The digest list this cache verifies against, or None (not a pack)."""
        if self.writes_pack:
            own = os.path.join(self.directory, PACK_FILE)
            return own if os.path.lexists(own) else None
        explicit = self.digests or self.digests_env
        if explicit:
            return explicit
        own = os.path.join(self.directory, PACK_FILE)
        return own if os.path.lexists(own) else None

    def pack(self):
        """``(path, {key: {file: sha256}})`` of the digest list, read once, or
        None when the cache is not a pack. Raises _Refused, naming the list,
        when there is one that cannot be used (every entry is refused then:
        a pack whose list is broken must not load as a plain cache)."""
        if self._pack is _UNSET:
            path = self.pack_path()
            try:
                self._pack = None if path is None else (path, _read_pack(path))
            except (OSError, ValueError, _Refused) as e:
                self._pack = _Refused(f"the kernel pack digest list {path} cannot be used: {e}")
        if isinstance(self._pack, _Refused):
            raise self._pack
        return self._pack

    def lookup(self, key, compiler_version=None):
        """The cached kernel for ``key``, or None (a miss).

        ``compiler_version``: when given, an entry written by another version
        is a miss (stale). A corrupt or refused entry warns and is a miss.
        """
        if key in self.memory:
            self.stats["hits"] += 1
            return self.memory[key]
        d = self.entry_dir(key)
        try:
            pack = self.pack()
            found = self._read_entry(key, d, pack)
        except _PackMismatch as e:
            self.stats["corrupt"] += 1
            warnings.warn(f"attn: kernel cache entry {d} does not match the kernel pack's digest list "
                          f"{pack[0]} ({e}); not loading it", RuntimeWarning, stacklevel=3)
            return None
        except (_Refused, OSError, ValueError) as e:
            self.stats["corrupt"] += 1
            what = "is not trusted" if isinstance(e, _Refused) else "is corrupt"
            warnings.warn(f"attn: kernel cache entry {d} {what} ({e}); recompiling it",
                          RuntimeWarning, stacklevel=3)
            return None
        if found is None:
            self.stats["misses"] += 1
            return None
        image, manifest, version, _ = found
        if compiler_version is not None and version != compiler_version:
            self.stats["stale"] += 1
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        k = CachedKernel(image, manifest.decode(), version, "disk", d)
        self.memory[key] = k
        return k

    def _read_entry(self, key, d, pack=None):
        """(image, manifest, compiler version, {file: sha256}) of entry ``d``,
        or None when it is absent or, outside a pack, not complete yet (no
        meta.json); raises _Refused, OSError or ValueError for an entry that
        must not be used, _PackMismatch for one that differs from ``pack``
        (``(path, entries)``: the digest list)."""
        try:
            _check_owner(os.stat(self.directory), f"the cache directory {self.directory}")
            dfd = _open_dir(d)
        except (FileNotFoundError, NotADirectoryError):
            return None
        expected = None
        if pack is not None:
            expected = pack[1].get(key)
            if expected is None:
                raise _PackMismatch("the entry is not in the list")
        try:
            _check_owner(os.fstat(dfd), "the entry directory")
            try:
                meta = _read(dfd, "meta.json", MAX_META_BYTES)
            except FileNotFoundError:
                if expected is not None:
                    raise _PackMismatch("meta.json is missing") from None
                return None
            digests = {"meta.json": _sha(meta)}
            # Hash meta.json before parsing it: in a pack, only listed bytes are parsed.
            if expected is not None and digests["meta.json"] != expected["meta.json"]:
                raise _PackMismatch("meta.json has changed")
            files, version = _parse_meta(meta, key)
            if expected is not None:
                listed = {"meta.json"} | {name for name, _ in files.values()}
                if listed != set(expected):
                    raise _PackMismatch(_pack_diff(expected, {n: expected.get(n, "") for n in listed}))
            image = b""
            if "image" in files:
                image = _read(dfd, files["image"][0])
                digests[files["image"][0]] = _sha(image)
                if digests[files["image"][0]] != files["image"][1]:
                    if expected is not None:
                        raise _PackMismatch(f"{files['image'][0]} has changed")
                    raise ValueError(f"{files['image'][0]} does not match its checksum")
            manifest = _read(dfd, files["manifest"][0])
            digests[files["manifest"][0]] = _sha(manifest)
            if digests[files["manifest"][0]] != files["manifest"][1]:
                if expected is not None:
                    raise _PackMismatch(f"{files['manifest'][0]} has changed")
                raise ValueError(f"{files['manifest'][0]} does not match its checksum")
            if expected is not None and _pack_diff(expected, digests):
                raise _PackMismatch(_pack_diff(expected, digests))
            try:
                if not isinstance(json.loads(manifest.decode()), dict):
                    raise ValueError(f"{files['manifest'][0]} is not a JSON object")
            except RecursionError:
                raise ValueError(f"{files['manifest'][0]} is nested too deeply") from None
            return image, manifest, version, digests
        finally:
            os.close(dfd)

    def _writable_root(self):
        """Creates the cache directory (``0o700``) if needed; raises _Refused
        when it is not this user's alone, OSError when it cannot be made."""
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        _check_owner(os.stat(self.directory), f"the cache directory {self.directory}")

    def _writable_entry(self, d):
        """Makes ``d`` a directory of this user's alone (``0o700``) to write into.

        A symbolic link or a file there is replaced (the cache directory is
        this user's, so this user put it there); another user's directory is
        refused.
        """
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            os.mkdir(d, 0o700)
            return
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(d)
            os.mkdir(d, 0o700)
        elif st.st_uid != os.geteuid():
            raise _Refused(f"it is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})")
        elif stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(d, 0o700)

    @contextlib.contextmanager
    def locked(self, key):
        """Holds an exclusive lock on ``key`` (``flock`` of ``<cache>/<key>.lock``)
        while compiling it, so that other processes compiling the same key wait
        and then find the entry instead of compiling it again. Where the cache
        directory cannot hold the lock (unwritable, refused) it holds none: the
        kernels then stay in memory anyway."""
        fd = None
        try:
            self._writable_root()
            fd = os.open(os.path.join(self.directory, key + ".lock"),
                         os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except (OSError, _Refused):
            pass
        try:
            yield
        finally:
            if fd is not None:
                os.close(fd)  # releases the lock

    def store(self, key, kernel, inputs=None):
        """Writes ``kernel`` under ``key`` (atomically per file, meta last).

        Always keeps it in memory; returns the entry directory, or None when
        the cache directory is not writable or not trusted (after one
        RuntimeWarning), or the entry is another user's (a warning each time),
        or the cache is a kernel pack (one warning): an entry written into a
        pack would not be in its digest list.
        """
        self.memory[key] = kernel
        if not self.writes_pack:
            pack = self.pack_path()
            if pack is not None:
                if not self._warned_pack:
                    warnings.warn(f"attn: kernel cache {self.directory} is a kernel pack (digest list {pack}); "
                                  "kernels compiled here are kept in memory for this process only (a pack "
                                  "changes only through python -m attn.precompile)", RuntimeWarning, stacklevel=3)
                    self._warned_pack = True
                return None
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
            self._writable_root()
        except (OSError, _Refused) as e:
            if not self._warned_unwritable:
                why = "is not writable" if isinstance(e, OSError) else "is not trusted"
                warnings.warn(f"attn: kernel cache directory {self.directory} {why} ({e}); "
                              "compiled kernels are kept in memory for this process only "
                              "(set ATTN_CACHE_DIR to a writable directory of this user's)", RuntimeWarning,
                              stacklevel=3)
                self._warned_unwritable = True
            return None
        try:
            self._writable_entry(d)
            for name, data in outputs + [("meta.json", json.dumps(meta, indent=1, sort_keys=True).encode())]:
                fd, tmp = tempfile.mkstemp(dir=d, prefix="." + name)  # mode 0o600
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, os.path.join(d, name))
        except (OSError, _Refused) as e:
            warnings.warn(f"attn: cannot write kernel cache entry {d} ({e}); the kernel is kept in memory "
                          "for this process only", RuntimeWarning, stacklevel=3)
            return None
        kernel.path = d
        return d


    # -- kernel packs (python -m attn.precompile / verify-pack) --

    def write_pack(self, produced=(), compiler_version=None):
        """Writes the directory's digest list (``attn-pack.json``, atomically):
        for every entry, the SHA-256 of each of its files, meta.json included.

        The entries: ``produced`` (keys this run compiled or checked) and,
        where the directory already has a list, its entries that still match
        it, else every complete entry in the directory. An entry changed since
        the old list was written, or added beside it, is left out (it would
        be blessed otherwise). Returns ``{"path", "entries", "skipped":
        [(key, why)]}``; raises OSError or _Refused when the list cannot be
        written.
        """
        self._writable_root()
        own = os.path.join(self.directory, PACK_FILE)
        old = None
        if os.path.lexists(own):
            try:
                old = _read_pack(own)
            except (OSError, ValueError, _Refused) as e:
                warnings.warn(f"attn: the old digest list {own} cannot be used ({e}); only the entries "
                              "this run produced go into the new one", RuntimeWarning, stacklevel=2)
                old = {}
        produced = set(produced)
        if old is not None:
            keys = produced | set(old)
        else:
            keys = produced | {n for n in os.listdir(self.directory) if _SHA256_RE.fullmatch(n)}
        entries, skipped = {}, []
        for key in sorted(keys):
            try:
                found = self._read_entry(key, self.entry_dir(key))
            except (_Refused, OSError, ValueError) as e:
                skipped.append((key, str(e)))
                continue
            if found is None:
                skipped.append((key, "absent or incomplete (no meta.json)"))
                continue
            digests = found[3]
            if old and key in old and key not in produced and _pack_diff(old[key], digests):
                skipped.append((key, f"differs from the old list ({_pack_diff(old[key], digests)})"))
                continue
            entries[key] = digests
        doc = {"attn_pack": PACK_FORMAT, "cache_format": CACHE_FORMAT,
               "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "compiler_version": compiler_version, "entries": entries}
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix="." + PACK_FILE)  # mode 0o600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(json.dumps(doc, indent=1, sort_keys=True).encode())
            os.replace(tmp, own)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._pack = _UNSET
        return {"path": own, "entries": len(entries), "skipped": skipped}

    # -- inspecting and clearing (python -m attn show-config / clear-cache) --

    def entries(self):
        """What the cache directory holds, for ``python -m attn show-config``:
        a list of dicts ``{"key", "bytes", "age_s", "status", "what"}``, one
        per entry directory (a 64-hex-digit name), sorted by key.

        ``status`` is ``"ok"`` (meta.json of the shape :meth:`store` writes),
        ``"incomplete"`` (no meta.json yet: being written, or a write that
        died), ``"corrupt"`` or ``"refused"`` (with ``"reason"``); ``what``
        summarises meta.json's inputs (arch, emit, candidate). Nothing is
        followed through a symbolic link. Raises _Refused when the cache
        directory itself is not trusted, FileNotFoundError when it does not
        exist.
        """
        root = self._open_root()
        out = []
        try:
            for name in sorted(os.listdir(root)):
                if not _SHA256_RE.fullmatch(name):
                    continue
                out.append(self._describe_entry(root, name))
        finally:
            os.close(root)
        return out

    def _open_root(self):
        """A descriptor of the cache directory, checked as lookups check it
        (this user's, not group- or world-writable). The directory itself may
        be reached through a symbolic link (lookups follow it too); nothing
        below it is."""
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            _check_owner(os.fstat(fd), f"the cache directory {self.directory}")
        except _Refused:
            os.close(fd)
            raise
        return fd

    def _describe_entry(self, root, name):
        e = {"key": name, "bytes": 0, "age_s": None, "status": "ok", "what": ""}
        try:
            st = os.stat(name, dir_fd=root, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                e.update(status="refused", reason="a symbolic link or not a directory")
                return e
            e["age_s"] = max(0.0, time.time() - st.st_mtime)
            _check_owner(st, "the entry directory")
            dfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root)
        except (_Refused, OSError) as err:
            e.update(status="refused", reason=str(err))
            return e
        try:
            for f in os.listdir(dfd):
                fst = os.stat(f, dir_fd=dfd, follow_symlinks=False)
                if stat.S_ISREG(fst.st_mode):
                    e["bytes"] += fst.st_size
            try:
                raw = _read(dfd, "meta.json", MAX_META_BYTES)
                _parse_meta(raw, name)
                meta = json.loads(raw.decode())
                e["age_s"] = max(0.0, time.time() - os.stat("meta.json", dir_fd=dfd, follow_symlinks=False).st_mtime)
                inputs = meta.get("inputs") if isinstance(meta.get("inputs"), dict) else {}
                parts = [str(inputs[k]) for k in ("arch", "emit") if isinstance(inputs.get(k), str)]
                if isinstance(inputs.get("candidate"), int):
                    parts.append(f"candidate {inputs['candidate']}")
                e["what"] = " ".join(parts)
                if isinstance(inputs.get("spec"), str):
                    e["spec"] = inputs["spec"][:2000]
                e["compiler_version"] = meta.get("compiler_version")
            except FileNotFoundError:
                e["status"] = "incomplete"
            except _Refused as err:
                e.update(status="refused", reason=str(err))
            except (OSError, ValueError, RecursionError) as err:
                e.update(status="corrupt", reason=str(err))
        finally:
            os.close(dfd)
        return e

    def clear(self, dry_run=False):
        """Removes the cache's entries and lock files; returns a report
        ``{"removed": [(key, bytes)], "kept": [(name, reason)], "bytes": n}``
        (with ``dry_run``, what would be removed, nothing removed).

        Only what this cache writes is removed, by the rules lookups trust:
        entry directories with a 64-hex-digit name owned by this user, and in
        them only the files :meth:`store` writes (``kernel.cubin``,
        ``kernel.ptx``, ``kernel.json``, ``meta.json`` and their temporary
        ``.<name>*`` files); an entry holding anything else keeps that and its
        directory. A kernel pack's digest list goes too when every entry did
        (``"digest_list"``: its path), so the directory is a plain cache again. Symbolic links are never followed (one at an entry's name
        is left alone). Each entry is removed holding its key's lock
        (:meth:`locked`, without waiting): an entry being compiled right now
        is kept. The lock file goes too, still held, so a process that
        opened it before is not locked out; one that opens it afterwards
        makes a new one, and at worst compiles the (absent) key again. Other
        files in the cache directory are left alone. Raises _Refused when
        the cache directory is not trusted; an absent directory is empty.
        """
        report = {"removed": [], "kept": [], "bytes": 0}
        try:
            root = self._open_root()
        except FileNotFoundError:
            return report
        try:
            names = sorted(os.listdir(root))
            keys = sorted({n for n in names if _SHA256_RE.fullmatch(n)} |
                          {n[:-5] for n in names if n.endswith(".lock") and _SHA256_RE.fullmatch(n[:-5])})
            for key in keys:
                self._clear_key(root, key, key in names, key + ".lock" in names, dry_run, report)
            if PACK_FILE in names and not report["kept"]:
                # Every entry went: the list would only keep the empty directory a pack
                # (not written to at run time). With entries kept, so is the list.
                st = os.stat(PACK_FILE, dir_fd=root, follow_symlinks=False)
                if (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)) and st.st_uid == os.geteuid():
                    if not dry_run:
                        os.unlink(PACK_FILE, dir_fd=root)
                    report["digest_list"] = os.path.join(self.directory, PACK_FILE)
        finally:
            os.close(root)
        for key, _ in report["removed"]:
            if not dry_run:
                self.memory.pop(key, None)
        return report

    _ENTRY_FILES = ("kernel.cubin", "kernel.ptx", "kernel.json", "meta.json")

    def _clear_key(self, root, key, has_entry, has_lock, dry_run, report):
        lock = None
        if has_lock:
            try:
                lock = os.open(key + ".lock", os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root)
                _check_owner(os.fstat(lock), "the lock file")
                if not stat.S_ISREG(os.fstat(lock).st_mode):
                    raise _Refused("the lock file is not a regular file")
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(lock)
                report["kept"].append((key, "being compiled now (its lock is held)"))
                return
            except (OSError, _Refused) as e:
                if lock is not None:
                    os.close(lock)
                why = "its lock file is a symbolic link" if isinstance(e, OSError) and e.errno == errno.ELOOP \
                    else f"its lock file is not trusted ({e})"
                report["kept"].append((key, why))
                return
        try:
            size, complete = 0, True
            if has_entry:
                size, complete = self._clear_entry(root, key, dry_run, report)
            if lock is not None and complete and not dry_run:
                os.unlink(key + ".lock", dir_fd=root)
            if complete:
                report["removed"].append((key, size))
                report["bytes"] += size
        finally:
            if lock is not None:
                os.close(lock)  # releases it

    def _clear_entry(self, root, key, dry_run, report):
        """(bytes removed, whether the whole entry went) for entry ``key``."""
        try:
            st = os.stat(key, dir_fd=root, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                raise _Refused("a symbolic link or not a directory: not an entry this cache wrote")
            _check_owner(st, "the entry directory")
            dfd = os.open(key, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root)
        except (OSError, _Refused) as e:
            report["kept"].append((key, str(e)))
            return 0, False
        size, foreign = 0, []
        try:
            for f in sorted(os.listdir(dfd)):
                ours = f in self._ENTRY_FILES or any(f.startswith("." + n) for n in self._ENTRY_FILES)
                fst = os.stat(f, dir_fd=dfd, follow_symlinks=False)
                if not ours or not (stat.S_ISREG(fst.st_mode) or stat.S_ISLNK(fst.st_mode)) or \
                        fst.st_uid != os.geteuid():
                    foreign.append(f)
                    continue
                size += fst.st_size if stat.S_ISREG(fst.st_mode) else 0
                if not dry_run:
                    os.unlink(f, dir_fd=dfd)  # a symbolic link goes itself, never its target
        finally:
            os.close(dfd)
        if foreign:
            report["kept"].append((key, f"holds files attn does not write ({', '.join(foreign[:3])}"
                                        f"{', ...' if len(foreign) > 3 else ''}): only attn's files go"))
            return size, False
        if not dry_run:
            os.rmdir(key, dir_fd=root)
        return size, True


def verify_pack(directory, digests=None):
    """Checks the kernel pack ``directory`` against a digest list: ``digests``,
    else ``$ATTN_PACK_DIGESTS``, else the pack's own ``attn-pack.json``.

    Returns ``{"digests": path, "entries": n, "files": n, "problems":
    [(kind, name, why)]}``, kind ``"missing"``, ``"extra"``, ``"changed"`` or
    ``"refused"`` (what a lookup would not trust: a symbolic link, not this
    user's, writable by others), name ``<key>/`` (an entry) or
    ``<key>/<file>``. Lock files and the pack's own list are not extra.
    Raises _Refused naming the list when it cannot be used, OSError when the
    directory cannot be read.
    """
    path = digests or pack_digests_env() or os.path.join(directory, PACK_FILE)
    try:
        entries = _read_pack(path)
    except (OSError, ValueError, _Refused) as e:
        raise _Refused(f"the digest list {path} cannot be used: {e}") from None
    problems, nfiles = [], 0
    root = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            _check_owner(os.fstat(root), f"the pack directory {directory}")
        except _Refused as e:
            problems.append(("refused", "./", str(e)))
        names = set(os.listdir(root))
        for key in sorted(entries):
            if key not in names:
                problems.append(("missing", key + "/", "the entry is missing"))
                continue
            try:
                st = os.stat(key, dir_fd=root, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    raise _Refused("a symbolic link or not a directory")
                _check_owner(st, "the entry directory")
                dfd = os.open(key, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root)
            except (OSError, _Refused) as e:
                problems.append(("refused", key + "/", str(e)))
                continue
            try:
                present = set(os.listdir(dfd))
                for name in sorted(entries[key]):
                    if name not in present:
                        problems.append(("missing", f"{key}/{name}", "listed, not in the pack"))
                        continue
                    try:
                        data = _read(dfd, name)
                    except (OSError, _Refused) as e:
                        problems.append(("refused", f"{key}/{name}", str(e)))
                        continue
                    nfiles += 1
                    if _sha(data) != entries[key][name]:
                        problems.append(("changed", f"{key}/{name}", "its SHA-256 differs from the list's"))
                for name in sorted(present - set(entries[key])):
                    problems.append(("extra", f"{key}/{name}", "in the entry, not in the list"))
            finally:
                os.close(dfd)
        for name in sorted(names - set(entries)):
            lock = name.endswith(".lock") and _SHA256_RE.fullmatch(name[:-5])
            if lock or name == PACK_FILE:
                continue
            is_dir = stat.S_ISDIR(os.stat(name, dir_fd=root, follow_symlinks=False).st_mode)
            problems.append(("extra", name + ("/" if is_dir else ""),
                             "an entry not in the list" if is_dir and _SHA256_RE.fullmatch(name)
                             else "not in the list"))
    finally:
        os.close(root)
    return {"digests": path, "entries": len(entries), "files": nfiles, "problems": problems}


_default = None


def default_cache():
    """The process-wide cache at :func:`default_cache_dir` (re-read if it, or
    ``$ATTN_PACK_DIGESTS``, changes)."""
    global _default
    if _default is None or _default.directory != default_cache_dir() or \
            _default.digests_env != pack_digests_env():
        _default = KernelCache()
    return _default
