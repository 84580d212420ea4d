#!/usr/bin/env python3
"""Summarize pytest junit XML files: one row per file, then the failures
grouped by their exception line.

    python3 bench/harness/junit_summary.py DIR_OR_XML... [--md OUT.md]

A row per XML: tests, passed, failed, errors, skipped, seconds. Then, per
file, the failures and errors grouped by the first line of their message
(``NotImplementedError: ...``, ``AssertionError: Tensor-likes are not
close!``), long hex strings (cache keys) and addresses folded so that equal
causes group, with counts and a class: ``refused`` (NotImplementedError,
ValueError, TypeError: a clear refusal), ``missing-kernel``
(KernelNotFoundError), ``mismatch`` (AssertionError: a wrong number, or a
test's own check; one whose traceback shows a subprocess dying of attn's
refusal counts as that refusal) and ``other``. Standard library only.
"""

import argparse
import collections
import os
import re
import sys
import xml.etree.ElementTree as ET

REFUSED = ("NotImplementedError", "ValueError", "TypeError")
# A test that runs its case in a subprocess asserts on the child's output; when
# the child died of attn's refusal, its traceback ends in that line.
CHILD_REFUSAL = re.compile(r"^[E\s]*((?:NotImplementedError|ValueError|TypeError): (?:attn|fi-shim)\b.*)$",
                           re.MULTILINE)


def xml_files(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".xml"))
        else:
            out.append(p)
    return out


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def fold(msg):
    msg = re.sub(r"0x[0-9a-fA-F]+", "0x…", msg)
    msg = re.sub(r"\b[0-9a-f]{16,}\b", "<hex>", msg)
    return msg[:220]


def classify(msg):
    kind = msg.split(":", 1)[0].strip().split(".")[-1]
    if "KernelNotFoundError" in kind:
        return "missing-kernel"
    if kind in REFUSED:
        return "refused"
    if kind == "AssertionError" or msg.startswith("assert "):
        return "mismatch"
    return "other"


def summarize(path):
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    row = collections.Counter()
    groups = collections.Counter()
    for suite in suites:
        for case in suite.iter("testcase"):
            row["tests"] += 1
            row["seconds"] += float(case.get("time") or 0)
            outcome = "passed"
            for tag in ("failure", "error", "skipped"):
                el = case.find(tag)
                if el is not None:
                    outcome = {"failure": "failed", "error": "errors", "skipped": "skipped"}[tag]
                    if tag != "skipped":
                        msg = fold(first_line(el.get("message")) or first_line(el.text))
                        kind = classify(msg)
                        child = CHILD_REFUSAL.search(el.text or "") if kind == "mismatch" else None
                        if child:
                            kind, msg = "refused", fold(child.group(1)) + " (in a subprocess)"
                        groups[(tag, kind, msg)] += 1
                    break
            row[outcome] += 1
    return row, groups


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--md", help="also write the report to this file")
    a = ap.parse_args(argv)
    lines = ["| file | tests | passed | failed | errors | skipped | s |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    detail, total, classes = [], collections.Counter(), collections.Counter()
    for path in xml_files(a.paths):
        name = os.path.basename(path)[: -len(".xml")] if path.endswith(".xml") else os.path.basename(path)
        try:
            row, groups = summarize(path)
        except (ET.ParseError, OSError) as e:
            lines.append(f"| {name} | unreadable: {e} | | | | | |")
            continue
        total.update(row)
        lines.append(f"| {name} | {row['tests']} | {row['passed']} | {row['failed']} | {row['errors']} | "
                     f"{row['skipped']} | {row['seconds']:.1f} |")
        if groups:
            detail.append(f"\n{name}:")
            for (tag, cls, msg), n in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])):
                classes[cls] += n
                detail.append(f"  {n:4d} x {tag:7s} [{cls}] {msg}")
    lines.append(f"| **total** | {total['tests']} | {total['passed']} | {total['failed']} | {total['errors']} | "
                 f"{total['skipped']} | {total['seconds']:.1f} |")
    text = "\n".join(lines + detail)
    if classes:
        text += "\n\nfailures by class: " + ", ".join(f"{k} {v}" for k, v in sorted(classes.items()))
    print(text)
    if a.md:
        with open(a.md, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
