#!/usr/bin/env bash
# Copies FlashInfer's own test files (the 11 files the rig runs and the helpers
# they import) from a FlashInfer git checkout into bench/flashinfer-tests/tests/
# (git-ignored: they are FlashInfer's code, run here and never committed).
#   bench/flashinfer-tests/get-tests.sh GIT_DIR [COMMIT]
# GIT_DIR: a FlashInfer clone's .git (or a bare mirror); COMMIT defaults to the
# snapshot the recorded results used.
set -euo pipefail
git_dir=${1:?usage: get-tests.sh FLASHINFER_GIT_DIR [COMMIT]}
commit=${2:-fb28d7242b3506a2348265962041acc1fb56cca4}
here=$(cd "$(dirname "$0")" && pwd)
dst=$here/tests
mkdir -p "$dst/test_helpers"
show() { git --git-dir="$git_dir" show "$commit:$1" > "$2"; }
for f in test_batch_decode_kernels test_tensor_cores_decode test_non_contiguous_decode test_non_contiguous_prefill \
         test_batch_prefill_kernels test_single_prefill test_logits_cap test_sliding_window test_alibi \
         test_shared_prefix_kernels test_page conftest; do
  show "tests/attention/$f.py" "$dst/$f.py"
done
show tests/__init__.py "$dst/__init__.py"
for f in __init__ alibi_reference jit_utils test_helpers utils_fp4; do
  show "tests/test_helpers/$f.py" "$dst/test_helpers/$f.py"
done
echo "FlashInfer $commit: $(ls "$dst"/*.py | wc -l) files and $(ls "$dst"/test_helpers/*.py | wc -l) helpers in $dst"
