#!/usr/bin/env bash
#===-- bench/rig_decode/gen_kernels.sh - Kernels for the split-decode rig --===#
#
# Generates, on the compiler machine, one cubin + manifest per kernel the GPU
# rig (decode_rig.py) checks: the D1-D4 kernel and a variant / GQA / head-dim
# / page-size / layout / dtype matrix. Each cubin holds the persistent decode
# kernel and the LSE merge kernel.
#
# Usage (repository root): bench/rig_decode/gen_kernels.sh [build-dir] [out-dir]
#
#===----------------------------------------------------------------------===#
set -eu
B=${1:-build-kg}
O=${2:-out/decode}
G="$B/bin/attn-gen-kernel"
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$O"
rm -f "$O"/*.cubin "$O"/*.json "$O"/*.log
gen() { # name, flags...
  local name=$1; shift
  "$G" --chip=sm_90 --emit=cubin --timing -o "$O/$name.cubin" "$@" 2> "$O/$name.log"
}
gen base                                                     # D1-D4 shape
gen causal          --variants=causal
gen window          --variants=causal,sliding_window
gen softcap         --variants=soft_cap
gen alibi           --variants=alibi,causal
gen rope            --variants=rope,causal
gen sinks           --variants=causal,sinks
gen gqa1            --qo-heads=8 --kv-heads=8 --variants=causal
gen gqa8_d64_p1     --head-dim=64 --qo-heads=32 --kv-heads=4 --page-size=1 --variants=causal
gen gqa8_pack2      --qo-heads=32 --kv-heads=4 --gqa-pack=2 --variants=causal
gen f16_d256_p64_hnd --dtype=f16 --head-dim=256 --qo-heads=16 --kv-heads=4 --page-size=64 --layout=HND --warps=2 --min-ctas-per-sm=2 --variants=soft_cap
gen f16_hnd         --dtype=f16 --layout=HND --variants=causal
gen ragged          --ragged --variants=causal
grep -h "registers" "$O"/*.log
