#!/usr/bin/env bash
# Final check of the session: the prefill/decode graph and memo tests at HEAD,
# then Nsight Compute of P2's and P4's prefill kernels (issue #12's next step).
set -uo pipefail
L=/tmp/logs; mkdir -p "$L"; FINAL=${OUT:-/tmp/out}
trap 'tar czf "$FINAL/logs.tgz" -C "$L" .; cp "$L/summary.txt" "$FINAL/" 2>/dev/null' EXIT
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L/summary.txt"; }
build=/tmp/attn-build
cmake -G Ninja -S . -B $build -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_BENCHMARKS=OFF -DPython3_EXECUTABLE="$(command -v python3)" > "$L/cmake.log" 2>&1
ninja -C $build > "$L/ninja.log" 2>&1 || { tail -30 "$L/ninja.log"; exit 1; }
export PYTHONPATH=$build/python ATTN_BUILD_DIR=$build ATTN_CACHE_DIR=$PWD/out/kernels PYTHONUNBUFFERED=1
stamp built
timeout 150 python3 -m pytest -q -rs python/tests/test_gpu_prefill.py python/tests/test_cuda_graph_decode.py \
  python/tests/test_strided_inputs.py python/tests/test_plan_fast.py python/tests/test_gpu_decode.py \
  python/tests/test_gpu_mask_graph.py > "$L/pytest.log" 2>&1
stamp "pytest rc=$?: $(tail -1 "$L/pytest.log")"
grep -E "^FAILED|^ERROR" "$L/pytest.log" | head -20 | tee -a "$L/summary.txt"
timeout 60 python3 bench/harness/plan_overhead.py --breakdown > "$L/plan-overhead.log" 2>&1
stamp "plan_overhead rc=$?"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for wl in P2 P4; do
  timeout 150 "$ncu" --clock-control none --target-processes all -k regex:attn_prefill --launch-skip 2 \
    --launch-count 1 --set full -o "$L/ncu-$wl" python3 bench/harness/profile_workload.py $wl > "$L/ncu-$wl.log" 2>&1
  stamp "ncu $wl rc=$?"
  "$ncu" --import "$L/ncu-$wl.ncu-rep" --page details > "$L/ncu-$wl-details.txt" 2>&1
done
stamp done
