#!/usr/bin/env bash
# Session 15 run 1: what paging costs P2 and P5 (paged vs contiguous K/V,
# same kernels family), Nsight Compute of P5's paged and ragged kernels, and
# the SASS of P2's paged kernel (instruction counts of the producer).
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
timeout 150 python3 bench/harness/paging_cost.py > "$L/paging-cost.log" 2>&1
stamp "paging_cost rc=$?"; cat "$L/paging-cost.log" | tee -a "$L/summary.txt"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for lay in paged ragged; do
  PROFILE_ONLY=1 timeout 120 "$ncu" --clock-control none --target-processes all -k regex:attn_prefill --launch-skip 1 \
    --launch-count 1 --set full -o "$L/ncu-P5-$lay" python3 bench/harness/paging_cost.py P5 $lay > "$L/ncu-P5-$lay.log" 2>&1
  stamp "ncu P5 $lay rc=$?"
  "$ncu" --import "$L/ncu-P5-$lay.ncu-rep" --page details > "$L/ncu-P5-$lay-details.txt" 2>&1
  "$ncu" --import "$L/ncu-P5-$lay.ncu-rep" --page raw --csv > "$L/ncu-P5-$lay-raw.csv" 2>&1
  rm -f "$L/ncu-P5-$lay.ncu-rep"
done
cuobj=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
for f in $(grep -l "attn_prefill_bf16_d128_h32x8_p16_nhd_q128_kv128_s3_k4_c1_causal\"" out/kernels/*/kernel.json ) \
         $(grep -l "attn_prefill_bf16_d128_h32x8_ragged_nhd_q128_kv128_s3_k4_c1_causal\"" out/kernels/*/kernel.json ); do
  d=$(dirname $f); "$cuobj" -sass $d/kernel.cubin > "$L/sass-$(basename $d | cut -c1-8).txt" 2>&1
done
stamp done
