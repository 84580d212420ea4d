#!/usr/bin/env bash
# Compiles, on a machine with the attn compiler, every kernel the GPU run
# needs (the benchmark's workloads and the Python GPU tests) into one kernel
# cache directory that travels to the GPU machine (ATTN_CACHE_DIR there).
set -euo pipefail
build=${1:-build}
out=${2:-out/kernels}
export PYTHONPATH=$build/python CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# Every kernel for sm_90a (what an H200 runs by default: wgmma prefill) and,
# with ARCHS, other chips too (sm_90: the mma.sync kernels, ATTN_ARCH=sm_90).
archs=${ARCHS:-sm_90a}
pc() { for a in $archs; do /usr/bin/python3 -m attn.precompile --out "$out" --arch "$a" "$@"; done; }
pc --model llama3-8b --kinds decode,prefill,ragged,merge,append # D1-D5, P1, P2, P4, P5, M1, A1
pc --heads 8/8 --head-dim 128 --kinds merge --merge-states 3,5,9 --dtype bf16,f16  # merge_states tests
pc --heads 8/8 --head-dim 128 --kinds merge,append --dtype f16 --page-size 1,3,16,48
pc --heads 8/8 --head-dim 128 --kinds append --dtype bf16 --page-size 1,3,48
for d in 64 96 256; do pc --heads 8/8 --head-dim $d --kinds merge,append --dtype bf16,f16 --page-size 1,3,16,48; done
pc --heads 8/8 --head-dim 64 --kinds merge --merge-states 3 --dtype f32          # f32 states
pc --heads 32/8 --head-dim 64 --kinds ragged                      # P3
pc --heads 32/8 --head-dim 256 --kinds ragged                     # P3
pc --heads 32/8 --head-dim 256 --kinds ragged --non-causal        # tests: head dim 256
pc --heads 32/8 --head-dim 256 --kinds prefill --page-size 1,16   # tests: head dim 256
pc --heads 32/8 --head-dim 128 --kinds decode --logits-soft-cap 30 # tests
pc --heads 32/8 --head-dim 128 --kinds decode --window-left 100   # tests
for h in 32/4 8/8 64/8; do pc --heads $h --head-dim 128 --kinds decode; done
pc --model llama3-8b --kinds prefill,ragged --non-causal          # cascade levels, split attention
pc --heads 32/8 --head-dim 128 --kinds prefill --custom-mask --page-size 1,16  # token trees
pc --heads 32/8 --head-dim 128 --kinds decode --page-size 1                    # token trees
for v in "--window-left 64" "--logits-soft-cap 30" "--pos-encoding-mode ALIBI" "--pos-encoding-mode ROPE_LLAMA"; do
  pc --heads 32/8 --head-dim 128 --kinds ragged $v                # prefill variants
done
pc --heads 32/1 --head-dim 128 --kinds decode                     # MQA
for v in "--sinks" "--pos-encoding-mode ROPE_LLAMA31" "--logits-scale 0.5"; do
  pc --heads 32/8 --head-dim 128 --kinds decode,prefill,ragged $v  # sinks, Llama-3.1 RoPE, logits scale
done
pc --heads 32/8 --head-dim 128 --kinds ragged --custom-mask                    # masks in CUDA graphs
for d in 64 80 96; do pc --heads 32/8 --head-dim $d --kinds decode,prefill,ragged; done  # general head dims (64: three warpgroups)
pc --heads 32/8 --head-dim 128 --kinds decode,prefill --page-size 3,48,544     # general page sizes
pc --heads 32/8 --head-dim 128 --kinds decode --layout HND                     # strided views (HND)
pc --heads 32/8 --head-dim 128 --kinds ragged --strided-kv                     # fused-QKV / HND ragged K/V
pc --heads 32/8 --head-dim 128 --kinds ragged --strided-kv --non-causal
pc --heads 32/8 --head-dim 128 --kinds prefill --page-size 1                   # SGLang's 3-D buffers
pc --heads 8/4 --head-dim 128 --kinds prefill --page-size 1,16 --dtype f16,bf16 --window-left 33  # paged window
pc --heads 8/4 --head-dim 128 --kinds prefill --page-size 64,128 --dtype f16 --window-left 33
/usr/bin/python3 python/tests/test_gpu_output_transform.py --precompile "$out"  # a custom output transform
ATTN_BUILD_DIR=$build ARCHS="$archs" "$(dirname "$0")/../../examples/serve_precompile.sh" "$out"  # examples/serve.py
