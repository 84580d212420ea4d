"""``python -m attn``: what this attn installation is, and its kernel cache.

    python -m attn show-config [--json]   versions, compiler, arch, cache and its entries, env
    python -m attn clear-cache [--dry-run]  removes the kernel cache's entries
    python -m attn verify-pack DIR [--digests FILE]  checks a kernel pack against its digest list

show-config and clear-cache take ``--cache-dir DIR`` (default:
``$ATTN_CACHE_DIR``, else ``~/.cache/attn``). verify-pack checks against
``--digests FILE``, else ``$ATTN_PACK_DIGESTS``, else ``DIR/attn-pack.json``.
Exit status: 0, 1 when the cache directory is not trusted (clear-cache), an
entry was kept, or a pack does not match its list (verify-pack), 2 for a
usage error (an unknown command). Needs neither a GPU nor PyTorch.
"""

import argparse
import json
import os
import re
import sys

# Every environment variable attn reads, and what it does.
ENV_VARS = {
    "ATTN_CACHE_DIR": "the kernel cache directory (default ~/.cache/attn)",
    "ATTN_PACK_DIGESTS": "a kernel pack's digest list obtained out of band, overriding the pack's attn-pack.json",
    "ATTN_ARCH": "the chip to compile for, overriding the device's (e.g. sm_90 on Hopper: mma.sync kernels)",
    "ATTN_LOGLEVEL": "DEBUG, INFO, WARNING (default) or ERROR: the 'attn' logger's level",
    "ATTN_CHECK_INDICES": "1: every paged run() synchronizes and raises attn.PageIndexError at once for a bad page index",
    "ATTN_KV_TMA": "1: attention loads whole K/V tiles by TMA where the tile and pages can (sm_90a; kernels keyed apart)",
    "ATTN_UPLOAD_FROM_HOST": "0: plan()'s copy kernel does not read the plan from pinned host memory (the driver copies it)",
    "ATTN_DEFER_PLAN_COPIES": "0: graph-mode plan() queues its copies itself instead of leaving them to run()'s copy_by_table",
    "ATTN_RECORD_MISSES": "a file a runtime-only build appends every kernel it lacks to "
                          "(python -m attn.precompile --from-record FILE compiles them)",
    "CUDA_HOME": "the CUDA toolkit the compiler assembles cubins with (ptxas)",
    "HOME": "where ~/.cache/attn is",
}


def _human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _age(s):
    if s is None:
        return "?"
    for unit, div in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= div:
            return f"{s / div:.1f} {unit}"
    return f"{s:.0f} s"


_FIELD = re.compile(r"(head_dim|num_qo_heads|num_kv_heads|page_size|dtype|layout|indexing|query_rows|"
                    r"variants|custom_mask)=('[^']*'|\([^)]*\)|[^,)]+)")


def _spec_brief(text):
    """``decode heads 32/8 d=128 page=16 bf16 NHD [causal]`` from the repr of an
    AttentionSpec that meta.json records (no code is evaluated)."""
    f = {k: v.strip("'") for k, v in _FIELD.findall(text or "")}
    if "head_dim" not in f:
        return ""
    kind = "decode" if f.get("query_rows") == "1" else "ragged prefill" if f.get("indexing") == "ragged" else \
        "prefill" if f.get("query_rows") == "None" else f"{f.get('query_rows')}-row"
    variants = [v.strip(" '") for v in f.get("variants", "()").strip("()").split(",") if v.strip(" '")]
    if f.get("custom_mask") == "True":
        variants.append("custom_mask")
    page = f" page={f['page_size']}" if f.get("indexing") != "ragged" and "page_size" in f else ""
    return (f"{kind} heads {f.get('num_qo_heads')}/{f.get('num_kv_heads')} d={f['head_dim']}{page} "
            f"{f.get('dtype', '')} {f.get('layout', '')}" + (f" [{', '.join(variants)}]" if variants else ""))


def _torch_info():
    """(torch version or None, CUDA available, device name or None, the arch attn
    compiles for or None, why not)."""
    try:
        import torch
    except ImportError:
        return None, False, None, os.environ.get("ATTN_ARCH") or None, "PyTorch is not installed"
    try:
        available = bool(torch.cuda.is_available())
    except Exception as e:  # a broken driver must not stop show-config
        return torch.__version__, False, None, os.environ.get("ATTN_ARCH") or None, f"torch.cuda: {e}"
    if not available:
        return torch.__version__, False, None, os.environ.get("ATTN_ARCH") or None, "no CUDA device"
    from .core import device_arch
    device = torch.device("cuda", torch.cuda.current_device())
    return torch.__version__, True, torch.cuda.get_device_name(device), device_arch(device), None


def collect(cache_dir=None):
    """show-config's facts as a dict (what ``--json`` prints)."""
    import attn
    from . import _native
    from .cache import KernelCache, _Refused
    cfg = {"attn_version": attn.__version__, "attn_path": os.path.dirname(os.path.abspath(attn.__file__)),
           "python": sys.version.split()[0]}
    torch_version, cuda, device, arch, why = _torch_info()
    cfg["torch_version"] = torch_version
    native = {"present": False, "path": None, "has_compiler": False, "compiler_version": None, "error": None}
    try:
        mod = _native.native()
        native.update(present=True, path=getattr(mod, "__file__", None),
                      has_compiler=bool(getattr(mod, "has_compiler", False)))
        if native["has_compiler"]:
            from .compiler import compiler_version
            native["compiler_version"] = compiler_version()
    except ImportError as e:
        native["error"] = str(e)
    cfg["native"] = native
    cfg["cuda"] = {"available": cuda, "device": device, "arch": arch, "why_not": why,
                   "arch_source": "ATTN_ARCH" if os.environ.get("ATTN_ARCH") else ("device" if cuda else None)}
    cache = KernelCache(cache_dir)
    c = {"dir": os.path.abspath(cache.directory), "exists": os.path.isdir(cache.directory), "status": "ok",
         "entries": [], "count": 0, "bytes": 0}
    try:
        c["entries"] = cache.entries()
    except FileNotFoundError:
        c["status"] = "absent (created on the first compile)"
    except _Refused as e:
        c["status"] = f"not trusted: {e}"
    except OSError as e:
        c["status"] = f"unreadable: {e}"
    current = native["compiler_version"]
    for e in c["entries"]:
        # A lookup with this compiler treats another version's entry as a miss (it recompiles).
        e["stale"] = bool(current and e["status"] == "ok" and e.get("compiler_version") != current)
    c["pack_digests"] = cache.pack_path()  # None: not a kernel pack
    c["count"] = len(c["entries"])
    c["bytes"] = sum(e["bytes"] for e in c["entries"])
    cfg["cache"] = c
    cfg["env"] = {name: os.environ.get(name) for name in ENV_VARS}
    return cfg


def show_config(cache_dir=None, as_json=False, out=None):
    out = out or sys.stdout
    cfg = collect(cache_dir)
    if as_json:
        json.dump(cfg, out, indent=1, sort_keys=True)
        out.write("\n")
        return 0
    n, cu, c = cfg["native"], cfg["cuda"], cfg["cache"]
    lines = [f"attn {cfg['attn_version']} ({cfg['attn_path']}), Python {cfg['python']}",
             f"torch: {cfg['torch_version'] or 'not installed'}"]
    if n["present"]:
        lines.append(f"native module: {n['path']}")
        lines.append(f"compiler: {'yes, ' + str(n['compiler_version']) if n['has_compiler'] else 'no (runtime-only: kernels come from the cache)'}")
    else:
        lines.append(f"native module: not found ({n['error']})")
        lines.append("compiler: no")
    if cu["available"]:
        lines.append(f"CUDA: available, {cu['device']}; attn compiles for {cu['arch']}"
                     f"{' (ATTN_ARCH)' if cu['arch_source'] == 'ATTN_ARCH' else ''}")
    else:
        lines.append(f"CUDA: not available ({cu['why_not']}); arch: "
                     f"{cu['arch'] + ' (ATTN_ARCH)' if cu['arch'] else 'that of the device at run time'}")
    lines.append(f"kernel cache: {c['dir']} ({c['status']}): {c['count']} entries, {_human(c['bytes'])}")
    if c.get("pack_digests"):
        lines.append(f"kernel pack: entries are loaded only when they match {c['pack_digests']}")
    for e in c["entries"]:
        status = " [stale: another compiler build wrote it]" if e.get("stale") else \
            "" if e["status"] == "ok" else f" [{e['status']}{': ' + e['reason'] if e.get('reason') else ''}]"
        brief = " ".join(x for x in (e["what"], _spec_brief(e.get("spec"))) if x)
        lines.append(f"  {e['key'][:16]}  {_human(e['bytes']):>10}  {_age(e['age_s']):>8} old  {brief}{status}")
    lines.append("environment:")
    for name, value in cfg["env"].items():
        lines.append(f"  {name}={value if value is not None else '(unset)'}  # {ENV_VARS[name]}")
    out.write("\n".join(lines) + "\n")
    return 0


def clear_cache(cache_dir=None, dry_run=False, out=None):
    out = out or sys.stdout
    from .cache import KernelCache, _Refused
    cache = KernelCache(cache_dir)
    try:
        r = cache.clear(dry_run=dry_run)
    except _Refused as e:
        out.write(f"attn clear-cache: refusing {cache.directory}: {e}\n")
        return 1
    verb = "would remove" if dry_run else "removed"
    for key, size in r["removed"]:
        out.write(f"{verb} {key} ({_human(size)})\n")
    for name, why in r["kept"]:
        out.write(f"kept {name}: {why}\n")
    if r.get("digest_list"):
        out.write(f"{verb} the kernel pack's digest list {r['digest_list']}\n")
    out.write(f"attn clear-cache: {verb} {len(r['removed'])} entries ({_human(r['bytes'])}) from "
              f"{cache.directory}{', kept ' + str(len(r['kept'])) if r['kept'] else ''}\n")
    return 1 if r["kept"] else 0


def verify_pack(directory, digests=None, out=None):
    out = out or sys.stdout
    from .cache import _Refused, verify_pack as check
    try:
        r = check(directory, digests)
    except (_Refused, OSError) as e:
        out.write(f"attn verify-pack: {directory}: {e}\n")
        return 1
    for kind, name, why in r["problems"]:
        out.write(f"{kind:8s} {name}: {why}\n")
    if r["problems"]:
        out.write(f"attn verify-pack: {directory} does NOT match {r['digests']}: "
                  f"{len(r['problems'])} problems\n")
        return 1
    out.write(f"attn verify-pack: {directory} matches {r['digests']}: {r['entries']} entries, "
              f"{r['files']} files\n")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m attn", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", metavar="{show-config,clear-cache,verify-pack}")
    p = sub.add_parser("show-config", help="versions, compiler, arch, kernel cache and environment")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--cache-dir", help="the kernel cache (default: $ATTN_CACHE_DIR or ~/.cache/attn)")
    p = sub.add_parser("clear-cache", help="remove the kernel cache's entries")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    p.add_argument("--cache-dir", help="the kernel cache (default: $ATTN_CACHE_DIR or ~/.cache/attn)")
    p = sub.add_parser("verify-pack", help="check a kernel pack against its digest list")
    p.add_argument("directory", help="the pack (a kernel cache directory written by attn.precompile)")
    p.add_argument("--digests", help="the digest list (default: $ATTN_PACK_DIGESTS, else DIR/attn-pack.json)")
    a = ap.parse_args(argv)
    if a.command == "verify-pack":
        return verify_pack(a.directory, a.digests)
    if a.command == "show-config":
        return show_config(a.cache_dir, a.json)
    if a.command == "clear-cache":
        return clear_cache(a.cache_dir, a.dry_run)
    ap.print_usage(sys.stderr)
    sys.stderr.write("python -m attn: error: a command is required: show-config, clear-cache or verify-pack\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
