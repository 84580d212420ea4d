#!/usr/bin/env bash
# The GPU run, on the H200 machine (CUDA, PyTorch, no MLIR): builds the
# runtime and the Python binding runtime-only, runs the GPU test suites on
# kernels precompiled elsewhere (bench/harness/precompile.sh -> out/kernels),
# then the plan benchmark and the benchmark.
#   bench/gpu_run.sh [workload ids, e.g. D1,D2]  (empty: tests + all workloads)
#   SKIP_TESTS=1 bench/gpu_run.sh P1,P2          (benchmark only)
#   SKIP_BENCH=1 ...                             (tests only)
#   SKIP_PLAN_BENCH=1 ...                        (no attn-plan-bench)
#   TEST_ARCHS="default sm_90" ...               (pytest per chip; ATTN_ARCH)
#   PYTEST_ARGS="python/tests/test_gpu_x.py" ... (a subset of the tests)
#   BENCH_ARGS="--sweep decode-skew" ...         (more run_bench.py options)
#   PLAN_BENCH_FILTER=Decode ...                 (attn-plan-bench --benchmark_filter)
#   SERVE=1 ...                                  (also examples/serve.py --all)
#   SANITIZE_SUITE=1 ...                         (only: the whole suite under
#       compute-sanitizer memcheck and racecheck over every GPU, SANITIZE_ARGS
#       for bench/harness/sanitize_suite.py; lands in $OUT/sanitize)
# Everything lands in $OUT/gpu-run.tgz (the device tool brings back 8 files);
# results.md, pytest.log and bench.log are also copied to $OUT itself.
set -uo pipefail
only=${1:-}
FINAL_OUT=${OUT:-/tmp/attn-out}
OUT=$(mktemp -d /tmp/attn-run.XXXX)
mkdir -p "$FINAL_OUT"
pack() {
  for f in results.md sanitize.log sanitize/summary.md sanitize/summary.json pytest.log pytest-sm_90.log bench.log plan-bench.txt serve.log; do
    [ -f "$OUT/$f" ] && cp "$OUT/$f" "$FINAL_OUT/"
  done
  tar czf "$FINAL_OUT/gpu-run.tgz" -C "$OUT" .
}
trap pack EXIT
build=${ATTN_GPU_BUILD:-/tmp/attn-build}
cmake -G Ninja -S . -B $build -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_BENCHMARKS=OFF \
  -DPython3_EXECUTABLE="$(command -v python3)" > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
ninja -C $build > "$OUT/ninja.log" 2>&1 || { tail -20 "$OUT/ninja.log"; exit 1; }
export PYTHONPATH=$build/python ATTN_BUILD_DIR=$build ATTN_CACHE_DIR=${ATTN_CACHE_DIR:-$PWD/out/kernels} PYTHONUNBUFFERED=1
if [ -n "${SANITIZE_SUITE:-}" ]; then
  echo "=== the GPU suite under compute-sanitizer (bench/harness/sanitize_suite.py) ==="
  python3 bench/harness/sanitize_suite.py --out "$OUT/sanitize" ${SANITIZE_ARGS:-} 2>&1 \
    | tee "$OUT/sanitize.log" | tail -40
  exit 0
fi
if [ -z "${SKIP_TESTS:-}" ]; then
  echo "=== GoogleTest on the GPU ==="
  ctest --test-dir $build > "$OUT/ctest.log" 2>&1
  grep -E "tests passed|tests failed|\(Failed\)|Skipped" "$OUT/ctest.log"
  # Every chip the GPU runs kernels of: on an H200 the default sm_90a
  # (wgmma prefill) and sm_90 (the mma.sync kernels, its fallback).
  for arch in ${TEST_ARCHS:-default}; do
    echo "=== pytest on the GPU ($arch kernels) ==="
    log=$OUT/pytest.log; [ "$arch" = default ] || log=$OUT/pytest-$arch.log
    if [ "$arch" = default ]; then
      python3 -m pytest -q -rs ${PYTEST_ARGS:-python/tests} 2>&1 | tee "$log" | tail -15
    else
      ATTN_ARCH=$arch python3 -m pytest -q -rs ${PYTEST_ARGS:-python/tests} 2>&1 | tee "$log" | tail -15
    fi
  done
fi
if [ -z "${SKIP_TESTS:-}" ]; then
  echo "=== make demo's GPU check (examples/check_llama3.py) ==="
  python3 examples/check_llama3.py 2>&1 | tee "$OUT/demo-check.log"
  echo "=== compute-sanitizer memcheck: the demo check's kernels ==="
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [ -x "$sanitizer" ]; then
    "$sanitizer" --tool memcheck --error-exitcode 3 python3 examples/check_llama3.py \
      > "$OUT/memcheck.log" 2>&1
    echo "memcheck exit status $? ($(grep -c "Invalid" "$OUT/memcheck.log") invalid accesses reported)"
    tail -3 "$OUT/memcheck.log"
    echo "=== compute-sanitizer racecheck: the demo check's kernels (shared-memory hazards) ==="
    # Instrumenting every shared-memory access is slow: bounded, and said so.
    timeout ${RACECHECK_TIMEOUT:-180} "$sanitizer" --tool racecheck --racecheck-report hazard --error-exitcode 3 \
      python3 examples/check_llama3.py > "$OUT/racecheck.log" 2>&1
    rc=$?; [ $rc -eq 124 ] && echo "racecheck stopped after ${RACECHECK_TIMEOUT:-180} s (not finished)"
    echo "racecheck exit status $rc ($(grep -c "Race reported\|Error: Race" "$OUT/racecheck.log") hazards reported)"
    tail -3 "$OUT/racecheck.log"
  else
    echo "compute-sanitizer not found: memcheck and racecheck not run"
  fi
  if [ -x out/host-lowering/run.sh ]; then
    # Built on the compiler machine (test/Integration/host-lowering/build.sh)
    # and carried: the consumer's host-lowered decode and prefill.
    echo "=== host-lowered program (out/host-lowering) ==="
    out/host-lowering/run.sh 2>&1 | tee "$OUT/host-lowering.log"
    if [ -x "$sanitizer" ]; then
      "$sanitizer" --tool memcheck --error-exitcode 3 out/host-lowering/run.sh \
        > "$OUT/host-lowering-memcheck.log" 2>&1
      # The program hands one output in host memory on purpose: the runtime's
      # device-pointer query of it is an API error, not a bad access.
      echo "memcheck exit status $? ($(grep -c "Invalid __global__\|Invalid __shared__\|Invalid __local__" "$OUT/host-lowering-memcheck.log") invalid kernel accesses, $(grep -c "Program hit" "$OUT/host-lowering-memcheck.log") API errors reported)"
    fi
  else
    echo "out/host-lowering not carried: the host-lowered program was not run"
  fi
  echo "=== Python plan() against the C++ planner (bench/harness/plan_overhead.py) ==="
  python3 bench/harness/plan_overhead.py --breakdown --profile 2>&1 | tee "$OUT/plan-overhead.log" | tail -90
fi
if [ -n "${SERVE:-}" ]; then
  echo "=== examples/serve.py --all (kernels from ${SERVE_CACHE_DIR:-$ATTN_CACHE_DIR}) ==="
  ATTN_CACHE_DIR=${SERVE_CACHE_DIR:-$ATTN_CACHE_DIR} python3 examples/serve.py --all 2>&1 \
    | tee "$OUT/serve.log" | tail -40
fi
if [ -z "${SKIP_PLAN_BENCH:-}" ]; then
  echo "=== attn-plan-bench on this host ==="
  if cmake -G Ninja -S . -B /tmp/attn-plan-build -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_PYTHON=OFF \
       -DATTN_ENABLE_TESTS=OFF -DATTN_ENABLE_BENCHMARKS=ON > "$OUT/plan-cmake.log" 2>&1 &&
     ninja -C /tmp/attn-plan-build attn-plan-bench >> "$OUT/plan-cmake.log" 2>&1; then
    /tmp/attn-plan-build/bin/attn-plan-bench --benchmark_repetitions=5 \
      ${PLAN_BENCH_FILTER:+--benchmark_filter="$PLAN_BENCH_FILTER"} \
      --benchmark_report_aggregates_only=true > "$OUT/plan-bench.txt" 2>&1
    grep -E "_median" "$OUT/plan-bench.txt"
  else
    echo "attn-plan-bench not built (Google Benchmark missing?):"; tail -3 "$OUT/plan-cmake.log"
  fi
fi
[ -n "${SKIP_BENCH:-}" ] && exit 0
echo "=== benchmark ==="
python3 bench/harness/run_bench.py --out "$OUT" ${only:+--only "$only"} ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | grep -v "^|" | tail -45
