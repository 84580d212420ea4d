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
  python3-venv python3-pip
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

# scikit-build-core, the build backend of pyproject.toml: python/tests/
# test_pip_install.py installs attn into a fresh venv (--system-site-packages,
# --no-build-isolation) with it, offline. Into the user's site-packages of
# $PYTHON (the one make check runs pytest with), never the system's.
python=${PYTHON:-/usr/bin/python3}
if ! "$python" -c "import scikit_build_core" 2>/dev/null; then
  echo "install-deps: installing scikit-build-core (pip --user)"
  PIP_BREAK_SYSTEM_PACKAGES=1 "$python" -m pip install -q --user --no-warn-script-location \
    'scikit-build-core>=0.10'
fi

if [ ! -x /usr/local/cuda/bin/ptxas ] && ! command -v ptxas >/dev/null; then
  echo "install-deps: note: no CUDA toolkit found (ptxas); kernel assembly tests will be unsupported"
fi
echo "install-deps: all present"
