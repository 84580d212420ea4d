#!/usr/bin/env bash
# Precompiles, where the attn compiler is, the kernels FlashInfer's test files
# (bench/flashinfer-tests/tests) need on the configurations attn supports, into one kernel
# pack for the GPU machine (ATTN_CACHE_DIR there, then bench/flashinfer-tests/run.sh).
#   bench/flashinfer-tests/precompile.sh [build] [out]     (defaults: build, out/fi-kernels)
#   DRY=1 bench/flashinfer-tests/precompile.sh             (print the invocations only)
#   ARCHS="sm_90a sm_90" ...                   (default sm_90a: an H100/H200)
# Derived by hand from the files' parametrize decorators and the calls their
# bodies make (the wrappers and their references: single_decode_with_kv_cache
# is a paged decode with 16-token pages, NHD; single_prefill_with_kv_cache and
# the ragged wrapper are "ragged" (one spec serves NHD and HND); decode with
# q_len_per_req > 1 is the paged "prefill" spec; causal is off unless a test
# sets it). Kernels depend on the exact head counts, head dim, dtype, page size,
# layout, variants and causal, so each pair of heads is its own line. Left out,
# since attn refuses them before looking a kernel up: fp8 KV, NVFP4, head dims
# > 256 (448, 512), multi-item scoring. Anything this misses: run.sh records it
# in $OUT/fi-misses.jsonl; `python -m attn.precompile --from-record` builds it.
set -euo pipefail
build=${1:-build}
out=${2:-out/fi-kernels}
export PYTHONPATH=$build/python CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
archs=${ARCHS:-sm_90a}
n=0
pc() {
  # Ragged K/V that is not dense NHD (HND, fused-QKV slices) runs the strided build.
  case " $* " in *ragged*) set -- "$@" --strided-kv ;; esac
  for a in $archs; do
    n=$((n + 1))
    if [ -n "${DRY:-}" ]; then echo "python3 -m attn.precompile --out $out --arch $a --dtype ${dt:-f16} $*"; continue; fi
    /usr/bin/python3 -m attn.precompile --out "$out" --arch "$a" --dtype "${dt:-f16}" "$@"
  done
}
dt=f16   # FlashInfer's tests are float16 unless a dtype parameter says otherwise

# test_alibi.py: single_decode (ALiBi), single_prefill (ALiBi, causal and not); heads H/H.
for h in 4 8 32; do for d in 128 256; do
  pc --heads $h/$h --head-dim $d --kinds decode,ragged --pos-encoding-mode ALIBI
  pc --heads $h/$h --head-dim $d --kinds ragged --pos-encoding-mode ALIBI --non-causal
done; done

# test_logits_cap.py: single_decode / single_prefill (non-causal) with soft cap 1, 30, 50 (one kernel).
for h in 4 8 32; do for d in 128 256; do
  pc --heads $h/$h --head-dim $d --kinds decode,ragged --logits-soft-cap 30 --non-causal
done; done

# test_single_prefill.py: single prefill 4/1, 7/1 x d 64/128/256, causal and not;
# extreme negative logits (16/1, f16 and bf16, non-causal); masked key (4/1, causal, f16 and bf16).
for h in 4/1 7/1; do for d in 64 128 256; do
  pc --heads $h --head-dim $d --kinds ragged
  pc --heads $h --head-dim $d --kinds ragged --non-causal
done; done
dt=f16,bf16 pc --heads 16/1 --head-dim 128 --kinds ragged --non-causal
dt=f16,bf16 pc --heads 4/1 --head-dim 128 --kinds ragged

# test_non_contiguous_decode.py: decode pages 1, 5 (and 16: single_decode) x heads {4,8}/{1,4,8} x d 64/128/256.
# test_non_contiguous_prefill.py: single prefill (heads {4,8,32}/{1,4,8}), ragged and paged (pages 1, 5;
# heads {4,8}/{1,4,8}) prefill, causal and not.
for h in 4/1 4/4 8/1 8/4 8/8; do for d in 64 128 256; do
  pc --heads $h --head-dim $d --kinds decode --page-size 1,5,16
  pc --heads $h --head-dim $d --kinds prefill,ragged --page-size 1,5
  pc --heads $h --head-dim $d --kinds prefill,ragged --page-size 1,5 --non-causal
done; done
for h in 32/1 32/4 32/8; do for d in 64 128 256; do
  pc --heads $h --head-dim $d --kinds ragged
  pc --heads $h --head-dim $d --kinds ragged --non-causal
done; done

# test_shared_prefix_kernels.py: cascade (paged prefill per level, non-causal), shared-prefix decode and
# prefill (decode / paged prefill + single prefill non-causal, merged), pages 1 and 16, heads H/H;
# merges (also test_merge_state_in_place_with_mask: 32 heads, d 128, masked and not).
for h in 8 16; do for d in 128 256; do
  pc --heads $h/$h --head-dim $d --kinds decode,prefill,ragged,merge,append --page-size 1,16 --non-causal
done; done

# test_sliding_window.py: heads {4,8}/{1,4} (and 8/8 for paged prefill) x d 64/128/256 (512: refused):
# windowed single and batch decode (pages 1, 16), windowed causal single/paged/ragged prefill;
# references: plain single_decode, single_prefill with a custom mask (non-causal).
for h in 4/1 4/4 8/1 8/4 8/8; do for d in 64 128 256; do
  pc --heads $h --head-dim $d --kinds decode,prefill,ragged --page-size 1,16 --window-left 33
done; done
for h in 4/1 4/4 8/1 8/4; do for d in 64 128 256; do
  pc --heads $h --head-dim $d --kinds decode,ragged --custom-mask   # decode: plain (no mask); ragged: masked
done; done

# test_tensor_cores_decode.py: single_decode (HND copied to NHD pages of 16) heads {4,8}x{1,4,8} groups,
# d 64/128/256; batch / CUDA-graph / fast-plan decode heads {4,16,32}/4, d 128/256, pages 1/8/16, NHD and HND;
# RoPE or none.
for pos in NONE ROPE_LLAMA; do
  for h in 4/4 16/4 32/4; do for d in 128 256; do
    pc --heads $h --head-dim $d --kinds decode --page-size 1,8,16 --layout NHD,HND --pos-encoding-mode $pos
  done; done
  for h in 4/4 16/4 32/4; do pc --heads $h --head-dim 64 --kinds decode --pos-encoding-mode $pos; done
  for h in 8/8 32/8 64/8; do for d in 64 128 256; do
    pc --heads $h --head-dim $d --kinds decode --pos-encoding-mode $pos
  done; done
done

# test_batch_decode_kernels.py: batch / tuple / fast-plan / CUDA-graph decode, heads {4,32}/4, d 128/256
# (512: refused), pages 1/8/16, RoPE or none: the test_tensor_cores_decode lines above (4/4, 32/4) hold them.
# Multi-token (q_len_per_req 2, 3) CUDA-graph decode and its causal paged prefill reference: heads
# {8,16}/2, {32,64}/8, d 128, pages of 16, bf16; mismatched q_len: 8/2 bf16 (plain decode too).
for h in 8/2 16/2 32/8 64/8; do
  dt=bf16 pc --heads $h --head-dim 128 --kinds decode,prefill
done
dt=f16,bf16 pc --heads 32/4 --head-dim 128 --kinds decode --page-size 1   # extreme negative logits
# (torch.compile single decode, 8/8 d 128: the test_non_contiguous_decode line holds it.)

# test_batch_prefill_kernels.py: paged (pages 1/5/16, CUDA graph or not, tuple KV) and ragged prefill,
# heads {4,32}/4, d 64/128/256, causal and not, RoPE or none, with single_prefill references;
# custom masks: paged (pages 1/16) and ragged, d 128/256; ragged masks also with ALiBi and soft cap 30.
for pos in NONE ROPE_LLAMA; do
  for h in 4/4 32/4; do for d in 64 128 256; do
    pc --heads $h --head-dim $d --kinds prefill,ragged --page-size 1,5,16 --pos-encoding-mode $pos
    pc --heads $h --head-dim $d --kinds prefill,ragged --page-size 1,5,16 --pos-encoding-mode $pos --non-causal
  done; done
done
for h in 4/4 32/4; do for d in 128 256; do
  for pos in NONE ROPE_LLAMA ALIBI; do
    [ $pos = ALIBI ] || pc --heads $h --head-dim $d --kinds prefill,ragged --page-size 1,16 --custom-mask --pos-encoding-mode $pos
    pc --heads $h --head-dim $d --kinds ragged --custom-mask --pos-encoding-mode $pos --logits-soft-cap 30
    pc --heads $h --head-dim $d --kinds ragged --pos-encoding-mode $pos --logits-soft-cap 30  # its causal reference
  done
  pc --heads $h --head-dim $d --kinds ragged --pos-encoding-mode ALIBI                       # likewise
  pc --heads $h --head-dim $d --kinds ragged --custom-mask --pos-encoding-mode ALIBI
done; done
# one valid key (ragged 32/8, causal), fully masked rows (paged 32/8, page 1, causal), split-KV empty
# chunk (paged 8/2, page 16, causal): f16 and bf16; torch.compile single prefill (8/8, causal, f16).
dt=f16,bf16 pc --heads 32/8 --head-dim 128 --kinds prefill,ragged --page-size 1
dt=f16,bf16 pc --heads 8/2 --head-dim 128 --kinds prefill --page-size 16
pc --heads 8/8 --head-dim 128 --kinds ragged

# test_page.py: append_paged_kv_cache (32 KV heads, d 128, pages of 16, f16; NVFP4: refused).
pc --heads 32/32 --head-dim 128 --kinds append --page-size 16

echo "fi precompile: $n invocations${DRY:+ (dry run)}"
