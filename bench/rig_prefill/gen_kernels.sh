#!/usr/bin/env bash
#===-- bench/rig_prefill/gen_kernels.sh - Kernels for the prefill rig ----===#
#
# Generates, on the compiler machine, the correctness matrix prefill_rig.py
# checks (c1-c8: ragged and paged, NHD and HND, d64/128/256, bf16 and f16,
# GQA 1/4/8, gqa_pack 1/2/4, query tiles 64/128, causal or not; c9-c12 with
# three stages, on sm_90a the software-pipelined K/V loop). Each is the
# attn IR of one prefill attention with its tile (<out>/<name>.mlir, from
# bench/attn_ir.sh) compiled by attn-compile into
# <out>/<name>/attn_kernels.{ptx,cubin,json}; kernel names in the manifests
# say the configuration; README.md has the results' format. The GQA packing
# follows from the query rows per request (block_rows): a tile of q rows
# packs min(group, q / rows) heads.
#
# Usage (repository root): bench/rig_prefill/gen_kernels.sh [build-dir] [out-dir]
#   CHIP=sm_90a ...   the chip (default sm_90: mma.sync; sm_90a: wgmma tiles)
#   PERF=1 ...        also the timed perf_* kernels: P1 (d128) with 64- and
#                     128-key tiles, for the chip
#
#===----------------------------------------------------------------------===#
set -eu
B=${1:-build}
O=${2:-out/prefill}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$O"
rm -f "$O"/*.mlir "$O"/*.log

. "$(dirname "$0")/../attn_ir.sh"

gen() { # name, ir arguments...
  local name=$1; shift
  ir "$@" > "$O/$name.mlir"
  rm -rf "${O:?}/$name"
  "$B/bin/attn-compile" --chip="${CHIP:-sm_90}" --emit=cubin --output-dir="$O/$name" "$O/$name.mlir" \
    > "$O/$name.log" 2>&1
}
Q128="q = 128, kv = 64, warps = 8, stages = 2, gqa_pack = 1"
#   name                        dtype D   Hq Hkv page   layout rows variants tile
gen c1_rag_d128_causal          bf16 128 32 8  ragged NHD 2048 causal "$Q128"
gen c2_rag_d128                 bf16 128 32 8  ragged NHD 2048 -      "$Q128"
gen c3_pg_d128_causal           bf16 128 32 8  16     NHD 2048 causal "$Q128"
gen c4_pg_hnd_d64_f16_causal    f16  64  8  8  16     HND 2048 causal \
    "q = 64, kv = 64, warps = 4, stages = 3, gqa_pack = 1"
gen c5_pg_d256_g8_causal        bf16 256 32 4  16     NHD 2048 causal \
    "q = 128, kv = 32, warps = 8, stages = 2, gqa_pack = 1"
gen c6_rag_d64_f16_pack4        f16  64  32 8  ragged NHD 16   -      \
    "q = 64, kv = 64, warps = 4, stages = 2, gqa_pack = 1"
gen c7_pg_d128_g8_pack2_causal  bf16 128 32 4  16     NHD 64   causal "$Q128"
gen c8_rag_d256_q64             bf16 256 8  8  ragged NHD 2048 -      \
    "q = 64, kv = 32, warps = 4, stages = 2, gqa_pack = 1"
# Three stages: on sm_90a the software-pipelined K/V loop (isKVLoopPipelined).
S3="q = 128, kv = 128, warps = 8, stages = 3, gqa_pack = 1"
gen c9_rag_d128_causal_s3       bf16 128 32 8  ragged NHD 2048 causal "$S3"
gen c10_pg_d128_pack4_causal_s3 bf16 128 32 8  16     NHD 32   causal \
    "q = 128, kv = 128, warps = 8, stages = 3, gqa_pack = 4"
gen c11_pg_hnd_d128_f16_s3      f16  128 8  8  16     HND 2048 -      "$S3"
gen c12_rag_d64_kv256_causal_s3 bf16 64  32 8  ragged NHD 2048 causal \
    "q = 128, kv = 256, warps = 8, stages = 3, gqa_pack = 1"
# Three computing warpgroups (a 192-row tile; head dim 64 on sm_90a only).
Q192="q = 192, kv = 128, warps = 12, stages = 2, gqa_pack = 4"
if [ "${CHIP:-sm_90}" = sm_90a ]; then
  gen c13_rag_d64_q192_causal   bf16 64  32 8  ragged NHD 2048 causal "$Q192"
  gen c14_rag_d64_q192          bf16 64  32 8  ragged NHD 2048 -      "$Q192"
  gen c15_pg_d64_q192_causal    bf16 64  32 8  16     NHD 2048 causal "$Q192"
fi
if [ -n "${PERF:-}" ]; then
  gen perf_p1_kv64_causal       bf16 128 32 8  ragged NHD 8192 causal "$Q128"
  gen perf_p1_kv128_causal      bf16 128 32 8  ragged NHD 8192 causal \
      "q = 128, kv = 128, warps = 8, stages = 2, gqa_pack = 1"
  gen perf_p1_kv128_pack4_causal bf16 128 32 8  ragged NHD 32   causal \
      "q = 128, kv = 128, warps = 8, stages = 2, gqa_pack = 4"
  gen perf_p2_pg16_kv128_pack4_causal bf16 128 32 8 16 NHD 32 causal \
      "q = 128, kv = 128, warps = 8, stages = 2, gqa_pack = 4"
  gen perf_p1_kv128_pack4_s3_causal bf16 128 32 8 ragged NHD 32 causal \
      "q = 128, kv = 128, warps = 8, stages = 3, gqa_pack = 4"
  gen perf_p2_pg16_kv128_pack4_s3_causal bf16 128 32 8 16 NHD 32 causal \
      "q = 128, kv = 128, warps = 8, stages = 3, gqa_pack = 4"
  gen perf_p3_d64_kv128_s3_causal bf16 64  32 8  ragged NHD 8192 causal \
      "q = 128, kv = 128, warps = 8, stages = 3, gqa_pack = 1"
  gen perf_p3_d64_kv256_s3_causal bf16 64  32 8  ragged NHD 8192 causal \
      "q = 128, kv = 256, warps = 8, stages = 3, gqa_pack = 1"
  gen perf_p1_kv128_s3_causal   bf16 128 32 8  ragged NHD 8192 causal \
      "q = 128, kv = 128, warps = 8, stages = 3, gqa_pack = 1"
  gen perf_p3_d64_kv128_causal  bf16 64  32 8  ragged NHD 8192 causal \
      "q = 128, kv = 128, warps = 8, stages = 2, gqa_pack = 1"
  gen perf_p3_d64_kv256_causal  bf16 64  32 8  ragged NHD 8192 causal \
      "q = 128, kv = 256, warps = 8, stages = 2, gqa_pack = 1"
  gen perf_p3_d256_kv32_causal  bf16 256 32 8  ragged NHD 8192 causal \
      "q = 128, kv = 32, warps = 8, stages = 2, gqa_pack = 1"
  gen perf_p3_d256_kv64_causal  bf16 256 32 8  ragged NHD 8192 causal \
      "q = 128, kv = 64, warps = 8, stages = 2, gqa_pack = 1"
  if [ "${CHIP:-sm_90}" = sm_90a ]; then  # session 18: 474.5 TFLOP/s against 407.7 (kv256, pack 4)
    gen perf_p3_d64_kv256_pack4_causal bf16 64 32 8 ragged NHD 32 causal \
        "q = 128, kv = 256, warps = 8, stages = 2, gqa_pack = 4"
    gen perf_p3_d64_q192_kv128_causal bf16 64 32 8 ragged NHD 32 causal "$Q192"
  fi
fi
ls "$O"
grep -h "registers" "$O"/*.log
