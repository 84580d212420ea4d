#!/usr/bin/env bash
# The main job on the default example: compile a real model's attention to
# PTX and cubin, show what attn chose and what ptxas made of each kernel,
# and, on a machine with a GPU and PyTorch, run it and check it.
set -euo pipefail
build=${1:-build}
example=${2:-examples/llama3-8b.mlir}
chip=${3:-sm_90}
out=out/demo
python=${PYTHON:-/usr/bin/python3}
mkdir -p "$out"
[ -n "${CUDA_HOME:-}" ] || [ ! -d /usr/local/cuda ] || export CUDA_HOME=/usr/local/cuda

echo "== attn-compile $example (chip $chip) =="
"$build/bin/attn-compile" "$example" --chip="$chip" --output-dir="$out" -o "$out/prepared.mlir"
echo "   prepared IR (variants expanded, cascade decomposed, tiles chosen): $out/prepared.mlir"
echo

if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 &&
   "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "== running it on $(nvidia-smi -L | head -1) =="
  PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" "$python" examples/check_llama3.py
else
  echo "== no GPU with PyTorch here: the kernels were generated and assembled by ptxas, not run =="
  echo "   (bench/gpu_run.sh runs them on a GPU machine; results in bench/results/)"
fi
