#!/usr/bin/env bash
#===-- bench/rig_decode/run_gpu.sh - Split-decode kernels on the GPU -----===#
#
# On the GPU machine (no MLIR there): builds the runtime's shared library with
# CMake (-DATTN_ENABLE_COMPILER=OFF), then runs decode_rig.py over the cubins
# + manifests that gen_kernels.sh wrote on the compiler machine (out/decode,
# carried over). Logs go to $OUT (or /tmp/attn-decode-out).
#
# Usage (repository root): bench/rig_decode/run_gpu.sh
#
#===----------------------------------------------------------------------===#
set -u
OUT=${OUT:-/tmp/attn-decode-out}
B=${B:-/tmp/attn-rt-build}
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } \
  > "$OUT/env.log" 2>&1
cat "$OUT/env.log"
cmake -G Ninja -S . -B "$B" -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_PYTHON=OFF \
  -DATTN_ENABLE_BENCHMARKS=OFF > /tmp/attn-rt-build.log 2>&1 &&
  ninja -C "$B" attn_runtime >> /tmp/attn-rt-build.log 2>&1
echo "runtime build rc=$?"
LIB=$(find "$B" -name 'libattn_runtime.so' | head -1)
echo "lib: $LIB"
# One process per kernel: a kernel fault cannot take the others down with it.
: > "$OUT/rig.log"
for tag in base $(ls out/decode/*/attn_kernels.cubin | xargs -n1 dirname | xargs -n1 basename | grep -v '^base$'); do
  python3 bench/rig_decode/decode_rig.py --dir out/decode --lib "$LIB" --only "$tag" \
    >> "$OUT/rig.log" 2>&1
  echo "$tag rc=$?" | tee -a "$OUT/rig.log"
done
grep -h '"ok": false\|error\|Traceback' "$OUT/rig.log" | head -40
grep -h '"timing"\|copy_GBps\|cuda_graph' "$OUT/rig.log"
grep -h '^PASS' "$OUT/rig.log" | awk '{p+=$2; f+=$4} END {print "TOTAL PASS", p, "FAIL", f}'
# Only rig.log and env.log come back: the device tool returns few files.
