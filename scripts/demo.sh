#!/usr/bin/env bash
# The main job on the default example: compile a real model's attention and
# show what attn chose for it.
set -euo pipefail
build=${1:-build}
example=${2:-examples/llama3-8b.mlir}
chip=${3:-sm_90}
out=out/demo
mkdir -p "$out"

echo "== attn-compile $example (chip $chip) =="
"$build/bin/attn-compile" "$example" --chip="$chip" -o "$out/prepared.mlir"
echo
echo "prepared IR (variants expanded, cascade decomposed, tiles chosen): $out/prepared.mlir"
