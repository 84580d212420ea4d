#!/usr/bin/env bash
# The whole GPU suite at HEAD (no benchmark): build, ctest, pytest, the sm_90 kernels.
set -uo pipefail
L=/tmp/logs; mkdir -p "$L"; FINAL=${OUT:-/tmp/out}
trap 'tar czf "$FINAL/logs.tgz" -C "$L" .; cp "$L/summary.txt" "$FINAL/" 2>/dev/null' EXIT
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$L/gpu.txt" 2>&1
build=/tmp/attn-build
cmake -G Ninja -S . -B $build -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_BENCHMARKS=OFF -DPython3_EXECUTABLE="$(command -v python3)" > "$L/cmake.log" 2>&1
ninja -C $build > "$L/ninja.log" 2>&1 || { tail -30 "$L/ninja.log"; exit 1; }
export PYTHONPATH=$build/python ATTN_BUILD_DIR=$build ATTN_CACHE_DIR=$PWD/out/kernels PYTHONUNBUFFERED=1
stamp built
ctest --test-dir $build -j8 > "$L/ctest.log" 2>&1
stamp "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
timeout 150 python3 -m pytest -q -rs python/tests > "$L/pytest.log" 2>&1
stamp "pytest rc=$?: $(tail -1 "$L/pytest.log")"
grep -E "^FAILED|^ERROR" "$L/pytest.log" | head -20 | tee -a "$L/summary.txt"
ATTN_ARCH=sm_90 timeout 40 python3 -m pytest -q python/tests/test_gpu_prefill.py python/tests/test_gpu_tiles.py \
  python/tests/test_gpu_page_index_checks.py > "$L/pytest-sm_90.log" 2>&1
stamp "pytest sm_90 rc=$?: $(tail -1 "$L/pytest-sm_90.log")"
