#!/usr/bin/env bash
set -uo pipefail
L=/tmp/logs; mkdir -p "$L"; FINAL=${OUT:-/tmp/out}
trap 'tar czf "$FINAL/logs.tgz" -C "$L" .; cp "$L/summary.txt" "$FINAL/" 2>/dev/null' EXIT
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv > "$L/gpu.txt" 2>&1
build=/tmp/attn-build
cmake -G Ninja -S . -B $build -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_BENCHMARKS=OFF -DATTN_ENABLE_TESTS=OFF -DPython3_EXECUTABLE="$(command -v python3)" > "$L/cmake.log" 2>&1
ninja -C $build > "$L/ninja.log" 2>&1 || { tail -30 "$L/ninja.log"; exit 1; }
export PYTHONPATH=$build/python ATTN_BUILD_DIR=$build ATTN_CACHE_DIR=$PWD/out/kernels PYTHONUNBUFFERED=1
stamp built
timeout 100 python3 -m pytest -q -rs python/tests/test_plan_fast.py python/tests/test_cuda_graph_decode.py \
  python/tests/test_gpu_decode.py python/tests/test_gpu_prefill.py python/tests/test_binding.py > "$L/pytest.log" 2>&1
stamp "pytest rc=$?: $(tail -1 "$L/pytest.log")"
grep -E "^FAILED|^ERROR" "$L/pytest.log" | head -20 | tee -a "$L/summary.txt"
timeout 30 python3 bench/harness/plan_overhead.py > "$L/plan-overhead.log" 2>&1
stamp "plan_overhead rc=$?"
