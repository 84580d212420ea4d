#!/usr/bin/env python3
"""Run the whole GPU test suite under compute-sanitizer, spread over the GPUs.

    python3 bench/harness/sanitize_suite.py --out DIR [--tools memcheck,racecheck[,synccheck]]
        [--archs default,sm_90] [--chunk 10] [--deadline 520] [--extra]
        [--workers-per-gpu N] [--tests PATH_OR_NODE...] [-k EXPR]
        [--skip-done EARLIER/summary.json...]

Every pytest node of python/tests (and, with --extra, ctest and the demo
check) runs under each tool, in chunks of --chunk nodes, one sanitizer
process per chunk; a pool of workers, --workers-per-gpu on each visible GPU,
takes the chunks in order (chip-major, then tool: the default kernels finish
first when time is short). The sanitizers' host-side work, not the GPU, bounds
a chunk (racecheck above all), so several processes share one GPU: the
default is one worker per two CPU cores.
Only attn's kernels (names starting ``attn_``) are instrumented: the
framework's own kernels run unchecked, which keeps the run in minutes.
Under memcheck, PyTorch's caching allocator is turned off so that every
tensor is its own allocation and a read past a tensor's end is caught
rather than landing in a neighbour of the same pool; tests that capture CUDA
graphs (GRAPH_TESTS: node ids naming graph or reduce_overhead, and the
serving example) run in chunks of their own with the allocator on, because
capture must allocate from the graph's pool.

Writes DIR/<tool>-<arch>-<n>.log per chunk, DIR/summary.json and
DIR/summary.md: per tool and chip the chunks run, timed out and not started,
the pytest counts (from each chunk's junit XML) and the sanitizer's counts:
kernel errors (bad accesses, faults), API errors (a driver call that
returned an error, which tests of bad input provoke on purpose; listed by
chunk) and hazards. A chunk that was not run or did not finish is listed by
its first node, never counted as clean.
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNEL_FILTER = ["--kernel-name", "kns=attn_"]
TOOL_ARGS = {
    "memcheck": ["--tool", "memcheck"],
    "racecheck": ["--tool", "racecheck", "--racecheck-report", "hazard"],
    # Barriers: named-barrier counts and ids, bar.sync under divergence.
    "synccheck": ["--tool", "synccheck"],
}


def sanitizer_path():
    return shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"


def gpu_count():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    except OSError:
        return 1
    return max(1, sum(1 for line in out.splitlines() if line.startswith("GPU ")))


def collect(tests, keyword):
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider"] + tests + (["-k", keyword] if keyword else []),
                         capture_output=True, text=True, cwd=ROOT).stdout
    return [line.strip() for line in out.splitlines() if "::" in line]


# Node ids of tests that capture CUDA graphs: named so, torch.compile's
# reduce-overhead mode (CUDA-graph trees) and the serving example (its decode
# step is a graph).
GRAPH_TESTS = re.compile(r"graph|reduce_overhead|test_serve_example")


def captures_graphs(node):
    return bool(GRAPH_TESTS.search(node))


def chunks(nodes, size):
    """Chunks of at most `size` nodes of one file, CUDA-graph tests apart."""
    by_file = collections.OrderedDict()
    for n in nodes:
        by_file.setdefault((n.split("::")[0], captures_graphs(n)), []).append(n)
    for group in by_file.values():
        for i in range(0, len(group), size):
            yield group[i:i + size]


def sanitizer_counts(text):
    """(kernel errors, API errors, hazards) the sanitizer reported, summed
    over processes. An API error ("Program hit CUDA_ERROR_...") is a driver
    call that returned an error, which tests of bad input provoke on
    purpose; a kernel error is a bad access or fault on the device."""
    errors = sum(int(m) for m in re.findall(r"ERROR SUMMARY: (\d+) error", text))
    # Not anchored: pytest's progress dots may share the sanitizer's line.
    api = len(re.findall(r"========= Program hit ", text))
    hazards = sum(int(m) for m in re.findall(r"RACECHECK SUMMARY: (\d+) hazard", text))
    return max(0, errors - api), api, hazards


def junit_counts(path):
    counts = collections.Counter()
    failed = []
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None, []
    for case in root.iter("testcase"):
        name = case.get("classname", "") + "::" + case.get("name", "")
        kinds = {child.tag for child in case}
        if "failure" in kinds or "error" in kinds:
            counts["failed"] += 1
            failed.append(name)
        elif "skipped" in kinds:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts, failed


class Job:
    def __init__(self, tool, arch, index, kind, nodes):
        self.tool, self.arch, self.index, self.kind, self.nodes = tool, arch, index, kind, nodes
        self.state = "not started"
        self.seconds = 0.0
        self.errors = self.api_errors = self.hazards = 0
        # CUDA-graph captures allocate from the graph's pool, which needs
        # PyTorch's caching allocator.
        self.caching = any(captures_graphs(n) for n in nodes)
        self.tests = None
        self.failed = []
        self.rc = None

    @property
    def name(self):
        return f"{self.tool}-{self.arch}-{self.index:03d}"

    def command(self, junit):
        if self.kind == "pytest":
            return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    f"--junitxml={junit}"] + self.nodes
        if self.kind == "ctest":
            return ["ctest", "--test-dir", os.environ.get("ATTN_BUILD_DIR", "build")]
        return [sys.executable] + self.nodes  # a script and its arguments


def run_job(job, gpu, worker, args, deadline):
    remaining = deadline - time.time()
    if remaining < 20:
        return
    junit = os.path.join(args.out, job.name + ".xml")
    log = os.path.join(args.out, job.name + ".log")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu),
               ATTN_CACHE_DIR=os.path.join(args.cache_copies, str(worker)))
    if job.arch != "default":
        env["ATTN_ARCH"] = job.arch
    if job.tool == "memcheck" and not job.caching:
        env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    cmd = ([sanitizer_path()] + TOOL_ARGS[job.tool] + KERNEL_FILTER +
           ["--target-processes", "all", "--print-limit", "50"] + job.command(junit))
    start = time.time()
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        try:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                                  timeout=min(args.job_timeout, remaining))
            job.rc = proc.returncode
            job.state = "finished"
        except subprocess.TimeoutExpired:
            job.state = "timed out"
    job.seconds = time.time() - start
    with open(log, errors="replace") as f:
        text = f.read()
    job.errors, job.api_errors, job.hazards = sanitizer_counts(text)
    if job.kind == "pytest":
        job.tests, job.failed = junit_counts(junit)
    else:
        job.tests = collections.Counter(passed=1 if job.rc == 0 else 0,
                                        failed=0 if job.rc == 0 else 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--tests", nargs="+", default=["python/tests"])
    p.add_argument("-k", dest="keyword", help="pytest -k expression for the nodes")
    p.add_argument("--tools", default="memcheck,racecheck")
    p.add_argument("--archs", default="default")
    p.add_argument("--chunk", type=int, default=10)
    p.add_argument("--deadline", type=float, default=520, help="seconds for the whole run")
    p.add_argument("--job-timeout", type=float, default=300)
    p.add_argument("--extra", action="store_true", help="also ctest and the demo check")
    p.add_argument("--workers-per-gpu", type=int, default=0,
                   help="sanitizer processes per GPU (default: one per two CPU cores)")
    p.add_argument("--skip-done", nargs="*", default=[], metavar="SUMMARY_JSON",
                   help="leave out the nodes earlier runs' summaries list as done, per tool and chip "
                        "(a run spread over several sessions)")
    args = p.parse_args()
    t0 = time.time()
    deadline = t0 + args.deadline
    os.makedirs(args.out, exist_ok=True)

    helptext = subprocess.run([sanitizer_path(), "--help"], capture_output=True, text=True)
    if "--kernel-name" not in helptext.stdout + helptext.stderr:  # an older sanitizer
        print("compute-sanitizer has no --kernel-name; every kernel is checked", flush=True)
        KERNEL_FILTER.clear()
    gpus = gpu_count()
    per_gpu = args.workers_per_gpu or max(1, (os.cpu_count() or 2) // (2 * gpus))
    workers = gpus * per_gpu
    cache = os.environ.get("ATTN_CACHE_DIR", os.path.join(ROOT, "out", "kernels"))
    args.cache_copies = os.path.join("/tmp", "attn-sanitize-caches")
    for w in range(workers):  # one cache per worker: no lock traffic between them
        dst = os.path.join(args.cache_copies, str(w))
        if not os.path.isdir(dst):
            shutil.copytree(cache, dst, symlinks=False)

    nodes = collect(args.tests, args.keyword)
    done = done_nodes(args.skip_done)
    jobs = []
    for arch in args.archs.split(","):
        for tool in args.tools.split(","):
            todo = [n for n in nodes if n not in done.get((tool, arch), ())]
            group = [list(c) for c in chunks(todo, args.chunk)]
            if args.extra and arch == "default":
                jobs.append(Job(tool, arch, 0, "ctest", []))
                jobs.append(Job(tool, arch, 1, "script", ["examples/check_llama3.py"]))
            base = len([j for j in jobs if (j.tool, j.arch) == (tool, arch)])
            jobs += [Job(tool, arch, base + i, "pytest", c) for i, c in enumerate(group)]
    print(f"{len(nodes)} pytest nodes, {len(jobs)} sanitizer runs, {workers} workers "
          f"over {gpus} GPUs", flush=True)

    queue = list(jobs)
    lock = threading.Lock()

    def worker(w):
        while True:
            with lock:
                if not queue:
                    return
                job = queue.pop(0)
            run_job(job, w % gpus, w, args, deadline)
            if job.state != "not started":
                t = job.tests or {}
                print(f"[gpu{w % gpus}.{w // gpus} {time.time() - t0:5.0f}s] {job.name} {job.state} "
                      f"{job.seconds:.0f}s passed {t.get('passed', 0)} failed {t.get('failed', 0)} "
                      f"errors {job.errors} api {job.api_errors} hazards {job.hazards}",
                      flush=True)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    write_summary(args, jobs, gpus, workers, time.time() - t0)


def done_nodes(paths):
    """{(tool, chip): nodes} finished in the runs whose summary.json files are given."""
    done = collections.defaultdict(set)
    for path in paths:
        with open(path) as f:
            for g in json.load(f).get("groups", []):
                done[(g["tool"], g["arch"])].update(g.get("done_nodes", []))
    return done


def write_summary(args, jobs, gpus, workers, seconds):
    groups = collections.OrderedDict()
    for j in jobs:
        groups.setdefault((j.tool, j.arch), []).append(j)
    rows, data = [], {"gpus": gpus, "workers": workers, "seconds": round(seconds), "groups": []}
    for (tool, arch), js in groups.items():
        c = collections.Counter()
        for j in js:
            c[j.state] += 1
            for k, v in (j.tests or {}).items():
                c["test_" + k] += v
        g = {
            "tool": tool, "arch": arch, "runs": len(js),
            "finished": c["finished"], "timed_out": c["timed out"], "not_started": c["not started"],
            "passed": c["test_passed"], "failed": c["test_failed"], "skipped": c["test_skipped"],
            "kernel_errors": sum(j.errors for j in js),
            "api_errors": sum(j.api_errors for j in js),
            "hazards": sum(j.hazards for j in js),
            "unfinished": [j.name + " " + (j.nodes[0] if j.nodes else j.kind)
                           for j in js if j.state != "finished"],
            "failed_tests": [f for j in js for f in j.failed],
            "dirty": [j.name for j in js if j.errors or j.hazards],
            "api_error_runs": [j.name for j in js if j.api_errors],
            # What --skip-done leaves out next time: nodes of finished chunks.
            "done_nodes": [n for j in js if j.state == "finished" and j.kind == "pytest"
                           for n in j.nodes],
        }
        data["groups"].append(g)
        rows.append(f"| {tool} | {arch} | {g['finished']}/{g['runs']} | {g['timed_out']} | "
                    f"{g['not_started']} | {g['passed']} | {g['failed']} | {g['skipped']} | "
                    f"{g['kernel_errors']} | {g['api_errors']} | {g['hazards']} |")
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(data, f, indent=1)
    md = ["| tool | kernels | runs finished | timed out | not started | passed | failed | "
          "skipped | kernel errors | API errors | hazards |", "| --- " * 11 + "|"] + rows
    for g in data["groups"]:
        for key in ("unfinished", "failed_tests", "dirty", "api_error_runs"):
            if g[key]:
                md.append(f"\n{g['tool']} {g['arch']} {key.replace('_', ' ')}: " + ", ".join(g[key]))
    text = "\n".join(md) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
