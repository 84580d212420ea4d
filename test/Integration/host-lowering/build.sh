#!/usr/bin/env bash
# Puts the host-lowering integration program into out/host-lowering/
# (ignored), for a GPU machine: the out-of-tree consumer's host-attention
# (test/Consumer: examples/host-attention.mlir lowered by the installed
# attn-opt, kernels for CHIP embedded, linked with the installed runtime),
# a copy of libattn_runtime.so beside it (its RUNPATH has $ORIGIN) and
# run.sh. Builds the consumer with test/Consumer/check.sh first (that needs
# the compiler build and ptxas, no GPU) unless --reuse says the consumer of
# <BUILD_DIR>/install-check was just built for CHIP (make check does that).
#
#   test/Integration/host-lowering/build.sh [--reuse] [BUILD_DIR=build] [CHIP=sm_90a]
set -euo pipefail
reuse=
[ "${1:-}" = "--reuse" ] && { reuse=1; shift; }
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
chip=${2:-sm_90a}
scratch=$build/install-check
out=$src/out/host-lowering

if [ -z "$reuse" ]; then
  ATTN_CONSUMER_CHIP=$chip "$src/test/Consumer/check.sh" "$build" "$scratch"
fi
program=$scratch/consumer/host-attention
if [ ! -x "$program" ] ||
   ! grep -qx "ATTN_CONSUMER_CHIP:STRING=$chip" "$scratch/consumer/CMakeCache.txt"; then
  echo "build.sh: no host-attention for $chip in $scratch/consumer" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out"
cp "$program" "$out/"
cp -P "$scratch"/prefix/lib/libattn_runtime.so* "$out/"
cp "$here/run.sh" "$out/run.sh"
chmod +x "$out/run.sh"
echo "copied host-attention ($chip) to $out; on a GPU machine: $out/run.sh"
