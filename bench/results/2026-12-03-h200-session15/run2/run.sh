#!/usr/bin/env bash
# One GPU call: build the runtime, ctest, the whole pytest suite (sm_90a),
# the sm_90 kernels on the prefill/decode/tile tests, the host-lowered
# program, plan() breakdowns and the benchmark. Every step bounded; logs
# come back as one tarball (the device tool returns at most 8 files).
set -uo pipefail
L=/tmp/logs; mkdir -p "$L"
FINAL=${OUT:-/tmp/out}
pack() { tar czf "$FINAL/logs.tgz" -C "$L" . ; cp "$L"/results.md "$FINAL/" 2>/dev/null; cp "$L"/summary.txt "$FINAL/" 2>/dev/null; }
trap pack EXIT
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$L/gpu.txt" 2>&1
build=/tmp/attn-build
cmake -G Ninja -S . -B $build -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_BENCHMARKS=OFF \
  -DPython3_EXECUTABLE="$(command -v python3)" > "$L/cmake.log" 2>&1
ninja -C $build > "$L/ninja.log" 2>&1 || { tail -30 "$L/ninja.log"; exit 1; }
export PYTHONPATH=$build/python ATTN_BUILD_DIR=$build ATTN_CACHE_DIR=$PWD/out/kernels PYTHONUNBUFFERED=1
stamp "built"
if [ -z "${SKIP_TESTS:-}" ]; then
  ctest --test-dir $build -j8 > "$L/ctest.log" 2>&1
  stamp "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
  grep "(Failed)" "$L/ctest.log" | tee -a "$L/summary.txt"
  timeout ${PYTEST_TIMEOUT:-240} python3 -m pytest -q -rs ${PYTEST_ARGS:-python/tests} > "$L/pytest.log" 2>&1
  stamp "pytest rc=$?: $(tail -1 "$L/pytest.log")"
  grep -E "^FAILED|^ERROR" "$L/pytest.log" | head -30 | tee -a "$L/summary.txt"
  ATTN_ARCH=sm_90 timeout 120 python3 -m pytest -q -rs python/tests/test_gpu_prefill.py \
    python/tests/test_gpu_tiles.py python/tests/test_gpu_page_index_checks.py > "$L/pytest-sm_90.log" 2>&1
  stamp "pytest sm_90 rc=$?: $(tail -1 "$L/pytest-sm_90.log")"
  grep -E "^FAILED|^ERROR" "$L/pytest-sm_90.log" | head -20 | tee -a "$L/summary.txt"
  if [ -x out/host-lowering/run.sh ]; then
    timeout 60 out/host-lowering/run.sh > "$L/host-lowering.log" 2>&1
    stamp "host-lowering rc=$?: $(grep -c PASS "$L/host-lowering.log") PASS, $(grep -c FAIL "$L/host-lowering.log") FAIL"
  fi
fi
if [ -z "${SKIP_PLAN:-}" ]; then
  timeout 90 python3 bench/harness/plan_overhead.py --breakdown > "$L/plan-overhead.log" 2>&1
  stamp "plan_overhead rc=$?"
  timeout 60 python3 bench/harness/prefill_plan_steps.py P1 P2 P5 P3-d64 > "$L/prefill-plan-steps.log" 2>&1
  stamp "prefill_plan_steps rc=$?"
fi
timeout 120 python3 bench/harness/paging_cost.py > "$L/paging-cost.log" 2>&1
stamp "paging_cost rc=$?"; cat "$L/paging-cost.log" | tee -a "$L/summary.txt"
if [ -n "${NCU_P5:-}" ]; then
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  PROFILE_ONLY=1 timeout 120 "$ncu" --clock-control none --target-processes all -k regex:attn_prefill --launch-skip 1 \
    --launch-count 1 --set full -o "$L/ncu-P5-paged" python3 bench/harness/paging_cost.py P5 paged > "$L/ncu-P5-paged.log" 2>&1
  stamp "ncu P5 paged rc=$?"
  "$ncu" --import "$L/ncu-P5-paged.ncu-rep" --page details > "$L/ncu-P5-paged-details.txt" 2>&1
  "$ncu" --import "$L/ncu-P5-paged.ncu-rep" --page raw --csv > "$L/ncu-P5-paged-raw.csv" 2>&1
  rm -f "$L/ncu-P5-paged.ncu-rep"
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  timeout ${BENCH_TIMEOUT:-170} python3 bench/harness/run_bench.py --out "$L" --no-sweeps ${BENCH_ARGS:-} > "$L/bench.log" 2>&1
  stamp "bench rc=$?"
fi
stamp "done"
