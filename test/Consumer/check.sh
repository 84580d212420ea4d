#!/usr/bin/env bash
# Installs a built attn into a scratch prefix and builds and runs the
# out-of-tree consumer (test/Consumer) against it, the way a project that
# embeds attn would (docs/Embedding.md):
#
#   test/Consumer/check.sh <build> [<scratch>]
#   test/Consumer/check.sh --runtime-only <dir>
#
# <scratch> (default <build>/install-check) is wiped first; it gets prefix/
# (the install) and consumer/ (the consumer's build). It is a fixed path so
# that ccache hits on the next run. A full build gets every program; a
# runtime-only one (-DATTN_ENABLE_COMPILER=OFF) plan-batch alone.
# ATTN_CONSUMER_CHIP picks host-attention's chip (default sm_90a).
# --runtime-only first configures and builds such a build in <dir> (runtime
# library only: no compiler, Python, tests or benchmarks; seconds with ccache).
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = "--runtime-only" ]; then
  build=${2:?usage: test/Consumer/check.sh --runtime-only <dir>}
  mkdir -p "$build"
  build=$(cd "$build" && pwd)
  echo "-- configuring and building a runtime-only attn in $build"
  cmake -G Ninja -S "$src/../.." -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_PYTHON=OFF \
    -DATTN_ENABLE_TESTS=OFF -DATTN_ENABLE_BENCHMARKS=OFF > /dev/null
  ninja -C "$build" > /dev/null
  scratch=$build/install-check
else
  build=${1:?usage: test/Consumer/check.sh <build> [<scratch>]}
  build=$(cd "$build" && pwd)
  scratch=${2:-$build/install-check}
fi

rm -rf "$scratch"
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
prefix=$scratch/prefix
echo "-- installing $build into $prefix"
cmake --install "$build" --prefix "$prefix" > "$scratch/install.log"

# The consumer: the generator, compiler, launcher and linker of the build,
# so it is as fast as the build itself; nothing else is passed on.
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
args=(-G Ninja -S "$src" -B "$scratch/consumer" -DCMAKE_BUILD_TYPE=Release
      -Dattn_DIR="$prefix/lib/cmake/attn" -DATTN_CONSUMER_CHIP="${ATTN_CONSUMER_CHIP:-sm_90a}")
for var in CMAKE_C_COMPILER CMAKE_CXX_COMPILER; do
  value=$(cache $var)
  [ -z "$value" ] || args+=("-D$var=$value")
done
launcher=$(cache ATTN_CCACHE)
if [ -n "$launcher" ] && [ -x "$launcher" ]; then
  args+=(-DCMAKE_C_COMPILER_LAUNCHER="$launcher" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
fi
lld=$(cache ATTN_LLD)
if [ -n "$lld" ] && [ -x "$lld" ]; then
  args+=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld)
fi
# The compiler finds libdevice through CUDA_HOME (building host-attention and
# running the others; no GPU).
[ -n "${CUDA_HOME:-}" ] || [ ! -d /usr/local/cuda ] || export CUDA_HOME=/usr/local/cuda
cmake "${args[@]}" > "$scratch/configure.log" || { cat "$scratch/configure.log"; exit 1; }
grep "attn-consumer:" "$scratch/configure.log" || true
ninja -C "$scratch/consumer" > "$scratch/build.log" || { cat "$scratch/build.log"; exit 1; }
set +e
ctest --test-dir "$scratch/consumer" --output-on-failure -V > "$scratch/ctest.log" 2>&1
rc=$?
# What each program checked, and the summary.
grep -E "^[0-9]+: ([a-z-]+|SKIPPED): |tests passed|tests failed|\(Skipped\)" "$scratch/ctest.log"
[ $rc -eq 0 ] || echo "-- the consumer failed; the whole log is $scratch/ctest.log"
exit $rc
