"""Precompile a model's attention kernels into a directory (ahead of time).

The GPU machine has no MLIR: compile here, carry the directory, and point
``ATTN_CACHE_DIR`` at it there. The directory is an ordinary kernel cache
(attn/cache.py), so the wrappers find the kernels by the same key::

    python -m attn.precompile --model llama3-8b --out out/py-kernels --arch sm_90
    # on the GPU machine:
    ATTN_CACHE_DIR=out/py-kernels python3 my_server.py

Options: ``--model`` (see ``--list``) or explicit ``--heads HQ/HKV --head-dim D``;
``--tp 1,2`` divides the heads by tensor-parallel degrees; ``--page-size``,
``--dtype``, ``--layout`` (comma lists allowed); ``--kinds
decode,prefill,ragged,merge,append`` (the last two are the row kernels of
``merge_state``/``merge_states`` and ``append_paged_kv_cache``: they depend
on the head dim, dtype and, for merges, ``--merge-states`` (the state
counts, default 2; each count also with a mask), for appends the page size);
``--arch`` (comma list); ``--custom-mask`` makes the prefill kinds read a
custom mask instead of causal (token-tree verification); ``--strided-kv``
adds, for the ragged kind, the kernels that read K/V at strides given at
launch (what the ragged wrapper runs for a fused QKV projection's slices or
HND K/V). Variants:
``--window-left``, ``--logits-soft-cap``, ``--pos-encoding-mode`` (``ROPE_LLAMA``,
``ROPE_LLAMA31``, ``ALIBI``), ``--logits-scale`` and ``--sinks`` (the kernels
take a per-head table; its values are given at plan time, not here). A
parameter's value is never part of the kernel, so any value precompiles the
kernel for all. Kernels the compiler cannot build yet are reported and
skipped; the exit status is 1 when nothing was compiled.

The directory becomes a kernel pack: ``attn-pack.json`` at its root lists the
SHA-256 of every file of every entry; the runtime loads only entries that
match it, and ``python -m attn verify-pack DIR`` checks a carried pack (keep
a copy of the list apart from the pack and name it with ``--digests`` or
``ATTN_PACK_DIGESTS``: a list inside the pack can be changed with it).
Precompiling into a pack again adds to its list; entries changed or added
there since are left out of it.

``--from-record FILE`` precompiles what a runtime-only machine missed:
FILE holds the JSON lines that ``ATTN_RECORD_MISSES=FILE`` made it write
(attn/compiler.py, ``record_miss``). Every recorded spec is compiled for its
recorded arch as the other modes compile theirs (an attention spec: its
launch contracts and every tile candidate; a row kernel: its one kernel),
once however often it was recorded; lines that cannot be read are reported
with their number and skipped. ``--out`` defaults to ``attn-kernels``.
"""

import argparse
import dataclasses
import json
import os
import sys
import time

from . import compiler as _compiler
from .cache import KernelCache, _Refused
from .compiler import get_all_kernels
from .errors import CompileError
from .paged import make_spec
from .rows import PLAN_COPIES, PLAN_TABLE_COPIES, AppendKVSpec, CopyByTableSpec, CopyIndicesSpec, MergeStatesSpec

# name: (num_qo_heads, num_kv_heads, head_dim, FlashInfer-style variant keywords)
MODELS = {
    "llama3-8b": (32, 8, 128, {"pos_encoding_mode": "NONE"}),
    "llama3-70b": (64, 8, 128, {"pos_encoding_mode": "NONE"}),
    "llama2-7b": (32, 32, 128, {}),
    "mistral-7b": (32, 8, 128, {}),
    "qwen2-7b": (28, 4, 128, {}),
    "gemma2-9b": (16, 8, 256, {"logits_soft_cap": 50.0}),
}


# Stands for the sinks table, which only plan() has (kernels do not depend on it).
SINKS_AT_PLAN_TIME = "sinks table given at plan time"


def _list(s, conv=str):
    return [conv(x) for x in str(s).split(",") if x]


def _positive_ints(text):
    """A comma list of positive integers (an argparse type)."""
    try:
        values = _list(text, int)
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected a comma list of positive integers, got {text!r}")
    return values


def _heads(text):
    """HQ/HKV (an argparse type): both positive, HQ a multiple of HKV."""
    try:
        hq, hkv = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HQ/HKV, e.g. 32/8, got {text!r}") from None
    if hq < 1 or hkv < 1 or hq % hkv:
        raise argparse.ArgumentTypeError(f"HQ and HKV must be positive and HQ a multiple of HKV, got {text!r}")
    return hq, hkv


ROW_KINDS = ("merge", "append")


def row_specs_for(d, kinds, page_sizes, dtypes, merge_states):
    """The row kernels' specs to precompile, with a label (heads, layout and
    tensor parallelism do not change them). Attention kinds bring the copy
    kernels plan() and graph mode's run() launch."""
    out = []
    if set(kinds) & {"decode", "prefill", "ragged"}:
        out.append((PLAN_COPIES.summary(), PLAN_COPIES))
        out.append((PLAN_TABLE_COPIES.summary(), PLAN_TABLE_COPIES))
    for dt in dtypes:
        if "merge" in kinds:
            for n in merge_states:
                for masked in (False, True):
                    spec = MergeStatesSpec(dt, d, n, masked)
                    out.append((spec.summary(), spec))
        if "append" in kinds and dt != "f32":
            for ps in page_sizes:
                spec = AppendKVSpec(dt, d, ps)
                out.append((spec.summary(), spec))
    return out


def specs_for(hq, hkv, d, kinds, page_sizes, dtypes, layouts, tps, variant_kwargs):
    """Every AttentionSpec to precompile, with a label."""
    out = []
    kinds = [k for k in kinds if k not in ROW_KINDS]
    for tp in tps:
        if hq % tp or hkv % tp and tp % hkv:
            raise SystemExit(f"attn.precompile: heads {hq}/{hkv} do not split over tp={tp}")
        q_heads, kv_heads = hq // tp, max(1, hkv // tp)
        for kind in kinds:
            for ps in page_sizes:
                for dt in dtypes:
                    for lay in layouts:
                        kw = dict(variant_kwargs)
                        masked = kw.pop("custom_mask", False)
                        non_causal = kw.pop("non_causal", False)
                        strided = kw.pop("strided_kv", False)
                        if kind in ("prefill", "ragged"):
                            # A custom mask replaces causal (token-tree verification).
                            kw["causal"] = not (non_causal or masked)
                            kw["custom_mask"] = masked
                        if kind == "ragged":  # BatchPrefillWithRaggedKVCacheWrapper
                            kw["indexing"] = "ragged"
                        spec, _ = make_spec(num_qo_heads=q_heads, num_kv_heads=kv_heads, head_dim=d,
                                            page_size=ps, dtype=dt, kv_layout=lay,
                                            query_rows=1 if kind == "decode" else None, **kw)
                        label = f"{kind}{'+mask' if spec.custom_mask else ''}"
                        out.append((f"{label} tp={tp} heads={q_heads}/{kv_heads} d={d} page={ps} {dt} {lay}", spec))
                        if strided and kind == "ragged":
                            out.append((f"{label} tp={tp} heads={q_heads}/{kv_heads} d={d} {dt} strided K/V",
                                        dataclasses.replace(spec, strided_kv=True)))
    return out


def read_record(path, out=None):
    """The (label, spec, arch, emits) to precompile from an ATTN_RECORD_MISSES
    file, deduplicated by (spec, arch) in the order first recorded; ``emits``
    holds the non-cubin emit kinds recorded ("ptx"). Bad lines are reported on
    ``out`` (default stdout) with their number and skipped."""
    out = out or sys.stdout
    found = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
                if not isinstance(doc, dict) or doc.get("attn_miss") != _compiler.RECORD_FORMAT:
                    raise ValueError(f"not an attn miss record of format {_compiler.RECORD_FORMAT}")
                arch, emit = doc.get("arch"), doc.get("emit")
                if not isinstance(arch, str) or not arch.replace("_", "").isalnum():
                    raise ValueError(f"bad arch {arch!r:.40}")
                if emit not in ("manifest", "cubin", "ptx"):
                    raise ValueError(f"bad emit kind {emit!r:.40}")
                spec = _compiler.spec_from_json(doc.get("spec"))
                if bool(doc.get("kv_tma", False)) != _compiler.kv_tma_for(spec):
                    raise ValueError(f"recorded with {_compiler.KV_TMA_ENV}={int(bool(doc.get('kv_tma')))}; "
                                     "set it alike here, or the kernels compiled will have other keys")
            except (ValueError, TypeError) as e:
                print(f"{path}:{n}: skipped: {e}", file=out)
                continue
            entry = found.setdefault((spec, arch), set())
            if emit == "ptx":
                entry.add("ptx")
    return [(f"recorded {_compiler.spec_summary(spec)}", spec, arch, emits) for (spec, arch), emits in found.items()]


def _precompile(jobs, cache, out=None):
    """Compiles each (arch, label, spec, emits) into ``cache``; returns
    (done, failed, the entry names produced)."""
    out = out or sys.stdout
    done = failed = 0
    produced = set()
    for arch, label, spec, emits in jobs:
        t0 = time.perf_counter()
        try:
            if isinstance(spec, (MergeStatesSpec, AppendKVSpec, CopyIndicesSpec, CopyByTableSpec)):
                contracts, kernels = _compiler.get_kernel(spec, arch, cache=cache), []
                what = "1 row kernel"
                if "ptx" in emits:
                    kernels.append(_compiler.get_kernel(spec, arch, cache=cache, emit_cubin=False))
            else:
                contracts, kernels = get_all_kernels(spec, arch, cache=cache)
                what = f"{len(kernels)} tile candidates"
                if "ptx" in emits:
                    kernels += [_compiler.get_kernel(spec, arch, cache=cache, emit_cubin=False, candidate=i)
                                for i in range(len(kernels))]
            if emits:
                what += f" (+ {', '.join(sorted(emits))})"
        except CompileError as e:
            failed += 1
            first = e.diagnostics.strip().splitlines()[0] if e.diagnostics.strip() else e.status
            print(f"skipped  {arch} {label}: {e.status}: {first}", file=out)
            continue
        done += 1
        produced |= {os.path.basename(k.path) for k in [contracts] + kernels if k.path}
        ms = (time.perf_counter() - t0) * 1e3
        sources = sorted({k.source for k in [contracts] + kernels})
        print(f"{'/'.join(sources):8s} {arch} {label}: {what}, {ms:.0f} ms -> {contracts.path}", file=out)
    return done, failed, produced


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m attn.precompile", description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="a model name (see --list)")
    ap.add_argument("--list", action="store_true", help="list the known models")
    ap.add_argument("--heads", type=_heads, help="HQ/HKV instead of --model")
    ap.add_argument("--head-dim", type=int)
    ap.add_argument("--out", required=False, help="output directory (a kernel cache)")
    ap.add_argument("--arch", default=None, help="comma list (default sm_90); with --from-record, each record's")
    ap.add_argument("--tp", type=_positive_ints, default=[1], help="tensor-parallel degrees (comma list)")
    ap.add_argument("--page-size", type=_positive_ints, default=[16], help="comma list")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--layout", default="NHD")
    ap.add_argument("--kinds", default="decode,prefill,ragged,merge,append",
                    help="decode (paged), prefill (paged, causal), ragged (ragged prefill, causal), "
                         "merge (merge_state(s)), append (append_paged_kv_cache)")
    ap.add_argument("--merge-states", type=_positive_ints, default=[2],
                    help="state counts of the merge kernels (comma list)")
    ap.add_argument("--non-causal", action="store_true",
                    help="prefill kernels without @causal (e.g. cascade levels over a shared prefix)")
    ap.add_argument("--window-left", type=int, default=-1)
    ap.add_argument("--logits-soft-cap", type=float)
    ap.add_argument("--pos-encoding-mode", default=None)
    ap.add_argument("--strided-kv", action="store_true",
                    help="also the ragged kernels that read K/V at strides given at launch (fused QKV slices, HND)")
    ap.add_argument("--custom-mask", action="store_true",
                    help="prefill/ragged kernels read a bit-packed custom mask instead of causal")
    ap.add_argument("--logits-scale", type=float,
                    help="the @logits_scale variant (any value: the scale is a kernel argument)")
    ap.add_argument("--sinks", action="store_true",
                    help="the @sinks variant (a per-head table, given at plan time)")
    ap.add_argument("--from-record", metavar="FILE",
                    help="precompile what ATTN_RECORD_MISSES=FILE recorded on a runtime-only machine "
                         "(each spec for its recorded arch); --out defaults to attn-kernels")
    a = ap.parse_args(argv)
    if a.list:
        for n, (hq, hkv, d, kw) in MODELS.items():
            print(f"{n:12s} heads {hq}/{hkv} head_dim {d} {kw or ''}")
        return 0
    if a.from_record:
        if a.model or a.heads or a.head_dim or a.arch:
            ap.error("--from-record takes the specs and archs from the record: "
                     "no --model, --heads, --head-dim or --arch")
        out = a.out or "attn-kernels"
        if _compiler.compiler_version() is None:
            print("attn.precompile: --from-record needs the compiler, and this build is runtime-only; "
                  "run it where attn was built with MLIR")
            return 1
        try:
            jobs = read_record(a.from_record)
        except OSError as e:
            print(f"attn.precompile: cannot read {a.from_record}: {e}")
            return 1
        print(f"attn.precompile: {len(jobs)} distinct kernel modules recorded in {a.from_record}")
        return _finish(KernelCache(out, writes_pack=True), out,
                       [(arch, label, spec, emits) for label, spec, arch, emits in jobs])
    if not a.out:
        ap.error("--out is required")
    if a.model:
        if a.model not in MODELS:
            ap.error(f"unknown model {a.model!r}; known: {', '.join(MODELS)}")
        hq, hkv, d, kw = MODELS[a.model]
        kw = dict(kw)
    elif a.heads and a.head_dim:
        (hq, hkv), d, kw = a.heads, a.head_dim, {}
    else:
        ap.error("give --model, or --heads and --head-dim")
    if a.non_causal:
        kw["non_causal"] = True
    if a.window_left >= 0:
        kw["window_left"] = a.window_left
    if a.logits_soft_cap:
        kw["logits_soft_cap"] = a.logits_soft_cap
    if a.pos_encoding_mode:
        kw["pos_encoding_mode"] = a.pos_encoding_mode
    if a.custom_mask:
        kw["custom_mask"] = True
    if a.strided_kv:
        kw["strided_kv"] = True
    if a.logits_scale is not None:
        kw["logits_scale"] = a.logits_scale
    if a.sinks:
        # Only the variant's presence selects the kernel; the table comes at plan time.
        kw["sinks"] = SINKS_AT_PLAN_TIME
    kinds = _list(a.kinds)
    unknown = set(kinds) - {"decode", "prefill", "ragged", *ROW_KINDS}
    if unknown:
        ap.error(f"unknown kinds {sorted(unknown)}; known: decode, prefill, ragged, merge, append")
    jobs = []
    for arch in _list(a.arch or "sm_90"):
        try:  # the spec checks (head dim, page size, dtype, variants) as command-line errors
            specs = specs_for(hq, hkv, d, kinds, a.page_size, _list(a.dtype), _list(a.layout), a.tp, kw)
            specs += row_specs_for(d, kinds, a.page_size, _list(a.dtype), a.merge_states)
        except ValueError as e:
            ap.error(str(e))
        jobs += [(arch, label, spec, ()) for label, spec in specs]
    return _finish(KernelCache(a.out, writes_pack=True), a.out, jobs)


def _finish(cache, out, jobs):
    """Precompiles ``jobs`` into ``cache`` and writes its digest list; the exit status."""
    done, failed, produced = _precompile(jobs, cache)
    print(f"attn.precompile: {done} kernel modules in {out}, {failed} skipped")
    if not done:
        return 1
    try:
        r = cache.write_pack(produced, _compiler.compiler_version())
    except (OSError, _Refused) as e:
        print(f"attn.precompile: cannot write the digest list in {out}: {e}")
        return 1
    for key, why in r["skipped"]:
        print(f"not in the digest list: {key}: {why}")
    print(f"attn.precompile: digest list {r['path']}: {r['entries']} entries "
          f"(check a copy with: python -m attn verify-pack {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
