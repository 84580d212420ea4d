#!/usr/bin/env bash
#===-- bench/rig_decode/gen_kernels.sh - Kernels for the split-decode rig --===#
#
# Generates, on the compiler machine, one cubin + manifest per kernel set the
# GPU rig (decode_rig.py) checks: the D1-D4 kernel and a variant / GQA /
# head-dim / page-size / layout / dtype matrix. Each set is the attn IR of
# one decode attention (<out>/<name>.mlir, from bench/attn_ir.sh) compiled by
# attn-compile into <out>/<name>/attn_kernels.{ptx,cubin,json}: the
# persistent decode kernel and its LSE merge kernel.
#
# Usage (repository root): bench/rig_decode/gen_kernels.sh [build-dir] [out-dir]
#
#===----------------------------------------------------------------------===#
set -eu
B=${1:-build}
O=${2:-out/decode}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$O"
rm -f "$O"/*.mlir "$O"/*.log

. "$(dirname "$0")/../attn_ir.sh"

gen() { # name, ir arguments...
  local name=$1; shift
  ir "$@" > "$O/$name.mlir"
  rm -rf "${O:?}/$name"
  "$B/bin/attn-compile" --chip=sm_90 --emit=cubin --output-dir="$O/$name" "$O/$name.mlir" \
    > "$O/$name.log" 2>&1
}
#   name              dtype D   Hq Hkv page   layout rows variants
gen base             bf16 128 32 8  16     NHD 1 -                       # D1-D4 shape
gen causal           bf16 128 32 8  16     NHD 1 causal
gen window           bf16 128 32 8  16     NHD 1 causal,sliding_window
gen softcap          bf16 128 32 8  16     NHD 1 soft_cap
gen alibi            bf16 128 32 8  16     NHD 1 alibi,causal
gen rope             bf16 128 32 8  16     NHD 1 rope,causal
gen sinks            bf16 128 32 8  16     NHD 1 causal,sinks
gen gqa1             bf16 128 8  8  16     NHD 1 causal
gen gqa8_d64_p1      bf16 64  32 4  1      NHD 1 causal
# 8 query rows per request leave room for 2 of the group's 8 heads per tile.
gen gqa8_pack2       bf16 128 32 4  16     NHD 8 causal \
    "q = 16, kv = 16, warps = 3, stages = 2, gqa_pack = 1, ctas_per_sm = 4"
gen f16_d256_p64_hnd f16  256 16 4  64     HND 1 soft_cap \
    "q = 16, kv = 16, warps = 2, stages = 2, gqa_pack = 1, ctas_per_sm = 2"
gen f16_hnd          f16  128 32 8  16     HND 1 causal
gen ragged           bf16 128 32 8  ragged NHD 1 causal
grep -h "registers" "$O"/*.log
