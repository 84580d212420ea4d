#!/usr/bin/env bash
# Precompiles, where the attn compiler is, every kernel examples/serve.py runs
# (bf16, NHD, 16-token pages; decode and causal paged prefill) into OUTDIR, a
# kernel cache to carry to the GPU machine and name there with ATTN_CACHE_DIR:
#
#   examples/serve_precompile.sh out/serve-kernels            # from the repository root
#   # GPU machine:
#   ATTN_BUILD_DIR=build ATTN_CACHE_DIR=out/serve-kernels python3 examples/serve.py --all
#
# ATTN_BUILD_DIR (default build) is the build tree whose python/ has attn with
# the compiler; ARCHS (default sm_90a, what an H200 runs) may list more chips.
set -euo pipefail
out=${1:?usage: examples/serve_precompile.sh OUTDIR}
build=${ATTN_BUILD_DIR:-build}
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH} CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
archs=${ARCHS:-sm_90a}
pc() { for a in $archs; do /usr/bin/python3 -m attn.precompile --out "$out" --arch "$a" --kinds decode,prefill,append \
                                   --page-size 16 --dtype bf16 --layout NHD "$@"; done; }
pc --heads 8/2 --head-dim 128                                        # llama3: GQA group 4
pc --heads 14/2 --head-dim 64                                        # qwen2: GQA group 7
pc --heads 4/2 --head-dim 256 --logits-soft-cap 50                   # gemma2, full-attention layers
pc --heads 4/2 --head-dim 256 --logits-soft-cap 50 --window-left 19  # gemma2, sliding layers (window 20)
