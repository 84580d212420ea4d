#!/usr/bin/env bash
# Session 15's last call (lean: the device budget): the prefill, cascade and
# mask test files at HEAD, paging_cost.py for P5 and P5-full (the unmasked
# planner change), then A1 (row_variants.py) with append kernels taking 2, 4
# and 8 rows a thread per step (caches out/kernels, -a4, -a8).
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
timeout 100 python3 -m pytest -q -rs python/tests/test_gpu_prefill.py python/tests/test_gpu_cascade.py \
  python/tests/test_gpu_tiles.py python/tests/test_gpu_paged_window.py python/tests/test_gpu_mask_graph.py \
  python/tests/test_gpu_prefill_variants.py > "$L/pytest.log" 2>&1
stamp "pytest rc=$?: $(tail -1 "$L/pytest.log")"
grep -E "^FAILED|^ERROR" "$L/pytest.log" | head -20 | tee -a "$L/summary.txt"
for c in P5 P5-full; do timeout 60 python3 bench/harness/paging_cost.py $c >> "$L/paging-cost.log" 2>&1; done
stamp "paging_cost rc=$?"; cat "$L/paging-cost.log" | tee -a "$L/summary.txt"
for U in "" 4 8; do
  ATTN_CACHE_DIR=$PWD/out/kernels${U:+-a$U} timeout 60 python3 bench/harness/row_variants.py A1 > "$L/a1-rows$U.log" 2>&1
  stamp "A1 rows/thread ${U:-2} rc=$?"; cat "$L/a1-rows$U.log" | tee -a "$L/summary.txt"
done
stamp done
