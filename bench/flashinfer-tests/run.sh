#!/usr/bin/env bash
# FlashInfer's own test files on attn (`flashinfer` is the shim in
# bench/flashinfer-tests/shim: a view of attn). Run on the GPU machine from the repo root
# after the runtime-only build, with PYTHONPATH (the build's python/),
# ATTN_BUILD_DIR and ATTN_CACHE_DIR (the kernel pack, e.g. from
# bench/flashinfer-tests/precompile.sh) exported, as bench/gpu_run.sh does.
#
#   bench/flashinfer-tests/run.sh                      # every file, the selection of conftest.py
#   FI_FILES="test_page.py test_alibi.py" bench/flashinfer-tests/run.sh
#   FI_SELECT=all bench/flashinfer-tests/run.sh        # every case (36203: hours)
#   FI_CASES_PER_CONFIG=2 ...              # more cases per configuration
#   FI_FILE_TIMEOUT=300 ...                # seconds per file (SIGINT: the partial XML is kept)
#
# Writes to $OUT (default /tmp/fi-out): fi-junit/<file>.xml, fi-<file>.log,
# fi-summary.md (by-file table and failures classified by
# bench/harness/junit_summary.py: refused = NotImplementedError/ValueError/
# TypeError, mismatch = an assertion on numbers, missing-kernel =
# KernelNotFoundError, other), fi-selection.txt (the node ids run) and
# fi-misses.jsonl (ATTN_RECORD_MISSES: every kernel the pack lacked; compile
# them with `python -m attn.precompile --from-record fi-misses.jsonl --out DIR`
# where the compiler is).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${OUT:-/tmp/fi-out}
mkdir -p "$out/fi-junit"
: "${PYTHONPATH:?export PYTHONPATH (the python/ folder of the runtime-only build) first}"
: "${ATTN_CACHE_DIR:?export ATTN_CACHE_DIR (the kernel pack) first}"
# The shim first, so the tests' subprocesses (`python -c "from flashinfer import ..."`) get it too.
export PYTHONPATH="$here/shim:$PYTHONPATH" PYTHONUNBUFFERED=1
export ATTN_RECORD_MISSES="$out/fi-misses.jsonl"
python=${PYTHON:-python3}
files=${FI_FILES:-"test_page.py test_alibi.py test_logits_cap.py test_single_prefill.py test_non_contiguous_decode.py
  test_non_contiguous_prefill.py test_shared_prefix_kernels.py test_sliding_window.py test_tensor_cores_decode.py
  test_batch_decode_kernels.py test_batch_prefill_kernels.py"}
: > "$out/fi-selection.txt"
"$python" -c "import torch, attn; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
  'attn', attn.__version__, 'compiler', attn.has_compiler(), 'cache', attn.default_cache_dir())"
for f in $files; do
  name=${f%.py}
  echo "=== $f ==="
  FI_SELECTION_OUT="$out/fi-selection.$name.txt" timeout -s INT -k 30 "${FI_FILE_TIMEOUT:-600}" \
    "$python" -m pytest -q -rs -p no:cacheprovider --junitxml="$out/fi-junit/$name.xml" "$here/tests/$f" \
    > "$out/fi-$name.log" 2>&1
  rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 130 ] && echo "$f: stopped after ${FI_FILE_TIMEOUT:-600} s (partial)"
  tail -1 "$out/fi-$name.log"
  cat "$out/fi-selection.$name.txt" >> "$out/fi-selection.txt" 2>/dev/null && rm -f "$out/fi-selection.$name.txt"
done
echo "=== summary (bench/harness/junit_summary.py) ==="
"$python" "$repo/bench/harness/junit_summary.py" "$out/fi-junit" --md "$out/fi-summary.md"
# Failures on a FlashInfer name attn does not have at all (the shim's AttributeError or
# NotImplementedError "fi-shim: attn has no ..."), counted apart from attn's own refusals.
echo
echo "names attn lacks (fi-shim), by failures:"
grep -oh 'fi-shim: attn has no [A-Za-z0-9_.]*' "$out"/fi-junit/*.xml 2>/dev/null | sort | uniq -c | sort -rn \
  | sed 's/^/  /' | tee -a "$out/fi-summary.md"
if [ -s "$ATTN_RECORD_MISSES" ]; then
  echo "missed kernels recorded: $(wc -l < "$ATTN_RECORD_MISSES") lines in $ATTN_RECORD_MISSES" \
    "($("$python" -c "import json,sys; print(len({json.dumps([d['spec'], d['arch']], sort_keys=True) for d in map(json.loads, open(sys.argv[1]))}))" "$ATTN_RECORD_MISSES") kernel modules;" \
    "precompile them with: python -m attn.precompile --from-record fi-misses.jsonl --out DIR)"
else
  echo "missed kernels recorded: none"
fi
