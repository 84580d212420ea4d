#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test attn:
# LLVM/MLIR 22, Ninja, GoogleTest, Google Benchmark, pybind11, the Python test
# tools, and (because they pay on 2 cores) lld and ccache. Idempotent: when
# nothing is missing it only checks, in well under a second.
set -euo pipefail

packages=(
  cmake ninja-build
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libgtest-dev libbenchmark-dev
  pybind11-dev python3-pybind11 python3-numpy python3-pytest python3-dev
  lld-22 ccache
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x /usr/local/cuda/bin/ptxas ] && ! command -v ptxas >/dev/null; then
  echo "install-deps: note: no CUDA toolkit found (ptxas); kernel assembly tests will be unsupported"
fi
echo "install-deps: all present"
