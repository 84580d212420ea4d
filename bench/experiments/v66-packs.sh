#!/usr/bin/env bash
# Builds v66's packs (bench/NOTES.md "v66") beside main's: applies the
# pack-time switches, rebuilds the compiler, compiles out/kernels-p24 (every
# kernel, the producer on 24 registers) and out/kernels-nostore (the prefill
# workloads' kernels, the epilogue under a test no item passes), then takes
# the switches out again and rebuilds, so the tree and the compiler end as
# they began. Tarballs out/<pack>.txz for the device call. Main's pack
# (out/kernels) is bench/harness/precompile.sh's, built separately.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
patch=bench/experiments/v66-producer24-nostore.patch
git apply "$patch"
trap 'git apply -R "$patch"; ninja -C "$build" > /dev/null' EXIT
ninja -C "$build" > /dev/null
rm -rf out/kernels-p24 out/kernels-nostore
ATTN_PRODUCER_REGS=24 ARCHS=sm_90a bash bench/harness/precompile.sh "$build" out/kernels-p24
export PYTHONPATH=$build/python CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} ATTN_EXP_NOSTORE=1
pc() { /usr/bin/python3 -m attn.precompile --out out/kernels-nostore --arch sm_90a "$@"; }
pc --model llama3-8b --kinds prefill,ragged                 # P1, P2, P5
pc --heads 32/8 --head-dim 64 --kinds ragged                # P3-d64
pc --heads 32/8 --head-dim 256 --kinds ragged               # P3-d256
for p in kernels-p24 kernels-nostore; do tar cJf out/$p.txz -C out/$p .; done
