#!/usr/bin/env bash
# Builds the host-lowering integration test into out/host-lowering/ (ignored):
# examples/host-attention.mlir through attn-to-llvm-pipeline (kernels compiled
# for CHIP and embedded), mlir-translate and llc to attention.o, linked with
# main.cpp against libattn_runtime.so (RUNPATH $ORIGIN, copied beside it) and
# the runtime's static C++ library for the CPU reference. Needs the compiler
# build and ptxas, no GPU; copy the folder to a GPU machine and run run.sh.
#
#   test/Integration/host-lowering/build.sh [BUILD_DIR=build] [CHIP=sm_90a]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
chip=${2:-sm_90a}
llvm=${LLVM_TOOLS:-/usr/lib/llvm-22/bin}
out=$src/out/host-lowering
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$CUDA_HOME/bin:$PATH

rm -rf "$out"
mkdir -p "$out"
"$build/bin/attn-opt" "$src/examples/host-attention.mlir" \
    --attn-to-llvm-pipeline="chip=$chip" -o "$out/attention.llvm.mlir"
"$llvm/mlir-translate" --mlir-to-llvmir "$out/attention.llvm.mlir" -o "$out/attention.ll"
"$llvm/llc" -O2 -filetype=obj -relocation-model=pic "$out/attention.ll" -o "$out/attention.o"
${CXX:-g++} -std=c++17 -O2 -I"$src/include" "$here/main.cpp" "$out/attention.o" \
    "$build/lib/libAttnRuntime.a" -L"$build/lib" -lattn_runtime -ldl \
    -Wl,-rpath,'$ORIGIN' -o "$out/host-attention"
cp -P "$build"/lib/libattn_runtime.so* "$out/"
cp "$here/run.sh" "$out/run.sh"
chmod +x "$out/run.sh"
echo "built $out/host-attention ($chip); on a GPU machine: $out/run.sh"
