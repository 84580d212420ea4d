#!/usr/bin/env bash
#===-- bench/rig/run_gpu.sh - Runtime checks on the GPU machine ----------===#
#
# Builds the runtime without MLIR, runs its unit tests (device tests now run
# instead of skipping), builds the nvcc test rig and runs it (plan, upload,
# run, LSE merge, CUDA-graph capture and replay after new plans, refusals), and
# the plan benchmark. Logs go to $OUT (or /tmp/attn-rig-out).
#
# Usage (repository root): bench/rig/run_gpu.sh
#
#===----------------------------------------------------------------------===#
set -u
OUT=${OUT:-/tmp/attn-rig-out}
B=${B:-/tmp/attn-rt-build}
mkdir -p "$OUT"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -2
  cmake --version | head -1
} > "$OUT/env.log" 2>&1
cat "$OUT/env.log"

cmake -G Ninja -S . -B "$B" -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_PYTHON=OFF \
  > "$OUT/build.log" 2>&1 && ninja -C "$B" -j16 >> "$OUT/build.log" 2>&1
echo "runtime build rc=$?"
grep -E "attn:|GoogleTest|Benchmark" "$OUT/build.log" | head

if [ -f "$B/CTestTestfile.cmake" ] && grep -q unittests "$B/CTestTestfile.cmake" 2>/dev/null; then
  ctest --test-dir "$B" -j8 > "$OUT/ctest.log" 2>&1
  echo "ctest rc=$?"
  grep -E "tests passed|Skipped|Failed|SKIP" "$OUT/ctest.log" | head -20
else
  echo "ctest: GoogleTest not available here, unit tests not built" | tee "$OUT/ctest.log"
fi

nvcc -cubin -arch=sm_90 -O3 -Iinclude -Xptxas -v bench/rig/rig_kernels.cu \
  -o "$B/rig.cubin" > "$OUT/rig-build.log" 2>&1 &&
nvcc -std=c++17 -O2 -Iinclude bench/rig/rig_main.cpp "$B/lib/libAttnRuntime.a" -ldl \
  -o "$B/attn-rig" >> "$OUT/rig-build.log" 2>&1
echo "rig build rc=$?"
"$B/attn-rig" "$B/rig.cubin" bench/rig/rig_manifest.json 2>&1 | tee "$OUT/rig.log"
echo "rig rc=${PIPESTATUS[0]}"

if [ -x "$B/bin/attn-plan-bench" ]; then
  "$B/bin/attn-plan-bench" --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true > "$OUT/plan-bench.log" 2>&1
  grep -E "median" "$OUT/plan-bench.log"
else
  echo "plan benchmark: Google Benchmark not available here"
fi
