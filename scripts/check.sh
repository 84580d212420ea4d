#!/usr/bin/env bash
# Runs every test suite of attn against a build directory: lit (check-attn),
# GoogleTest (through ctest), the MLIR-free runtime's tests and fuzz driver
# again under ASan + UBSan (a runtime-only build in <build>/sanitize), the
# installed package (test/Consumer, built against `cmake --install` into a
# scratch prefix, for the full build and for a runtime-only one), the host
# lowering's integration program (test/Integration) and pytest. Each runner prints its own summary;
# every suite runs even when an earlier one fails, and the exit status is
# non-zero if any failed.
set -uo pipefail
build=${1:-build}
python=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
status=0

echo "=== lit (check-attn) ==="
ninja -C "$build" check-attn || status=1

echo "=== GoogleTest (ctest) ==="
ctest --test-dir "$build" --output-on-failure -j2 --progress || status=1

echo "=== runtime under ASan + UBSan (ctest in $build/sanitize) ==="
# Any report aborts its test (-fno-sanitize-recover), so a finding fails ctest.
san="$build/sanitize"
{ [ -f "$san/build.ninja" ] || cmake -G Ninja -S "$here/.." -B "$san" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_PYTHON=OFF -DATTN_ENABLE_BENCHMARKS=OFF \
    -DATTN_SANITIZE=address,undefined > "$san.configure.log"; } &&
  ninja -C "$san" && ctest --test-dir "$san" --output-on-failure -j2 || status=1

echo "=== installed package (test/Consumer) ==="
"$here/../test/Consumer/check.sh" "$build" || status=1

echo "=== runtime-only package (test/Consumer) ==="
"$here/../test/Consumer/check.sh" --runtime-only "$build/runtime-only" || status=1

echo "=== host lowering (test/Integration/host-lowering) ==="
# The consumer's host-attention (one module with attention in it, lowered to a
# program), run here: on a GPU it is compared with the CPU reference, without
# one it reports SKIPPED. Copied to out/host-lowering for a GPU machine.
"$here/../test/Integration/host-lowering/build.sh" --reuse "$build" sm_90a && \
  "$here/../out/host-lowering/run.sh" || status=1

echo "=== pytest ==="
# The compiler finds ptxas and libdevice through CUDA_HOME.
[ -n "${CUDA_HOME:-}" ] || [ ! -d /usr/local/cuda ] || export CUDA_HOME=/usr/local/cuda
ATTN_BUILD_DIR="$(cd "$build" && pwd)" "$python" -m pytest -q -rs python/tests
rc=$?
# Exit 5 means pytest collected nothing: that is a failure of the suite.
[ $rc -eq 0 ] || status=1

exit $status
