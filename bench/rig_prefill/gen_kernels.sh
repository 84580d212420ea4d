#!/usr/bin/env bash
#===-- bench/rig_prefill/gen_kernels.sh - Kernels for the prefill rig ----===#
#
# Generates, on the compiler machine, the correctness matrix prefill_rig.py
# checks (c1-c8: ragged and paged, NHD and HND, d64/128/256, bf16 and f16,
# GQA 1/4/8, gqa_pack 1/2/4, query tiles 64/128, causal or not). Kernel names
# in the manifests say the configuration; README.md has the results' format.
#
# Usage (repository root): bench/rig_prefill/gen_kernels.sh [build-dir] [out-dir]
#
#===----------------------------------------------------------------------===#
set -eu
B=${1:-build}
O=${2:-out/prefill}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$O"
rm -f "$O"/*.cubin "$O"/*.json
gen() { # name, flags...
  local name=$1; shift
  "$B/bin/attn-gen-kernel" --kind=prefill --chip=sm_90 --emit=cubin -o "$O/$name.cubin" "$@"
}
gen c1_rag_d128_causal          --ragged --variants=causal --tile-q=128 --kv-tile=64 --stages=2
gen c2_rag_d128                 --ragged --tile-q=128 --kv-tile=64 --stages=2
gen c3_pg_d128_causal           --variants=causal --tile-q=128 --kv-tile=64 --stages=2
gen c4_pg_hnd_d64_f16_causal    --layout=HND --head-dim=64 --dtype=f16 --qo-heads=8 --kv-heads=8 \
                                --variants=causal --tile-q=64 --kv-tile=64 --stages=3
gen c5_pg_d256_g8_causal        --head-dim=256 --kv-heads=4 --variants=causal --tile-q=128 \
                                --kv-tile=32 --stages=2
gen c6_rag_d64_f16_pack4        --ragged --head-dim=64 --dtype=f16 --gqa-pack=4 --tile-q=64 \
                                --kv-tile=64 --stages=2
gen c7_pg_d128_g8_pack2_causal  --kv-heads=4 --gqa-pack=2 --variants=causal --tile-q=128 \
                                --kv-tile=64 --stages=2
gen c8_rag_d256_q64             --ragged --head-dim=256 --qo-heads=8 --kv-heads=8 --tile-q=64 \
                                --kv-tile=32 --stages=2
ls "$O"
