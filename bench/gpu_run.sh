#!/usr/bin/env bash
# The GPU run, on the H200 machine (CUDA, PyTorch, no MLIR): builds the
# runtime and the Python binding runtime-only, runs the GPU test suites on
# kernels precompiled elsewhere (bench/harness/precompile.sh -> out/kernels),
# then the benchmark. Everything it prints and writes lands in $OUT.
#   bench/gpu_run.sh [workload ids, e.g. D1,D2]  (empty: tests + all workloads)
#   SKIP_TESTS=1 bench/gpu_run.sh P1,P2          (benchmark only)
#   SKIP_BENCH=1 ...                             (tests only)
set -uo pipefail
only=${1:-}
OUT=${OUT:-/tmp/attn-out}
mkdir -p "$OUT"
build=/tmp/attn-build
cmake -G Ninja -S . -B $build -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_BENCHMARKS=OFF \
  -DPython3_EXECUTABLE="$(command -v python3)" > "$OUT/cmake.log" 2>&1 || { tail -20 "$OUT/cmake.log"; exit 1; }
ninja -C $build > "$OUT/ninja.log" 2>&1 || { tail -20 "$OUT/ninja.log"; exit 1; }
export PYTHONPATH=$build/python ATTN_BUILD_DIR=$build ATTN_CACHE_DIR=${ATTN_CACHE_DIR:-$PWD/out/kernels} PYTHONUNBUFFERED=1
if [ -z "${SKIP_TESTS:-}" ]; then
  echo "=== GoogleTest on the GPU ==="
  ctest --test-dir $build 2>&1 | tail -4 | tee "$OUT/ctest.log"
  echo "=== pytest on the GPU ==="
  python3 -m pytest -q -rs python/tests 2>&1 | tee "$OUT/pytest.log" | tail -15
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
  else
    echo "compute-sanitizer not found: memcheck not run"
  fi
fi
[ -n "${SKIP_BENCH:-}" ] && exit 0
echo "=== benchmark ==="
python3 bench/harness/run_bench.py --out "$OUT" ${only:+--only "$only"} 2>&1 | tee "$OUT/bench.log" | grep -v "^|" | tail -45
