#!/usr/bin/env bash
# One call of the device tool, run on the GPU machine from the repo root
# (session 17 on; earlier sessions kept a copy of it in their results
# folder): build the runtime, unpack the kernel packs carried as tarballs
# (out/*.tgz or, xz-compressed, out/*.txz: out/kernels.tgz, out/fi-kernels.txz, ...),
# then the steps named in STEPS
# (default: tests), each bounded:
#   tests  ctest, the whole pytest suite (sm_90a kernels), the sm_90 kernels
#          on the prefill/tile/page-index/strided tests, the host-lowered program
#   fi     FlashInfer's own test files (bench/flashinfer-tests; their files
#          copied by its get-tests.sh into the ignored tests/ and carried)
#   plan   plan() breakdowns (bench/harness/plan_overhead.py)
#   ab     plan() of an older package (out/old-src: `git archive <commit>` of
#          it, carried) and this one, built side by side, timed alternately
#          (AB_ROUNDS rounds, default 2)
#   defer  plan() with graph mode's copies deferred to run() (the default) and
#          kept in plan() (ATTN_DEFER_PLAN_COPIES=0), one build, timed
#          alternately (AB_ROUNDS rounds, default 2)
#   graphcopy  what graph mode's deferred copy costs a replay, by form
#          (bench/harness/graph_copy_cost.py)
#   copy   the host cost of one async copy of each kind (bench/harness/copy_cost.py)
#   item   what a prefill work item costs beside its K/V tiles (bench/harness/item_cost.py)
#   variant  a prefill plain and with each variant (bench/harness/variant_cost.py)
#          with each kernel pack of VARIANT_PACKS, twice alternating
#   bench  the benchmark without the sweeps (BENCH_ARGS for a subset)
#   OLD_SRC  the older package's folder (default out/old-src), built in
#          OLD_BUILD (default /tmp/attn-old-build); LOGS the log folder (default /tmp/logs)
#   OLD_PACKS  packs (of kab, variant) run with the build of out/old-src:
#          kernels of an older plan ABI against their own runtime
#   kab    kernels before and after a change on one GPU: the benchmark's
#          KAB_ONLY workloads without peers (default the prefill ones) with
#          each kernel pack of KAB_PACKS (folders under out/, carried as
#          out/<pack>.tgz; default kernels-base and kernels), in KAB_ROUNDS
#          rounds (default 2) alternating; then once with the peers (SDPA, Flex) on out/kernels
#          (KAB_NO_PEERS skips it)
#   kabp   kernel packs timed in turns in one process (bench/harness/kab_paired.py):
#          the KABP_ONLY workloads (default the prefill ones) on each pack of
#          KABP_PACKS (folders under out/, the first the base), KABP_ROUNDS
#          rounds (default 8); judged by the paired ratio to the base
#   suite  the pytest suite (or SUITE_TESTS) on each kernel pack of SUITE_PACKS
#          (default kernels-tma; "pack:test,test" runs those tests on it);
#          a pack named *-tma (precompile.sh run with
#          ATTN_KV_TMA=1: K/V tiles by TMA) runs with ATTN_KV_TMA=1, here and in
#          kab, which skips a pack whose suite timed out
#   sanitize  compute-sanitizer (memcheck, racecheck) over SANITIZE_TESTS
#          (default the prefill, tile, variant, custom-mask, page-index and
#          fixed-buffer test files) through bench/harness/sanitize_suite.py, on the
#          default kernels and on SANITIZE_ARCHS (default "default,sm_90"),
#          within SANITIZE_DEADLINE seconds (default 420); SANITIZE_ARGS
#          for sanitize_suite.py's other options (--chunk, --tools, -k)
#   ncu    Nsight Compute on the workloads in NCU_WORKLOADS (default P1; items-L<n>: item_cost.py's batches), with
#          each pack of NCU_PACKS (default kernels): the
#          full set of the attention kernel's launch, its details page and its
#          SASS with per-instruction stall samples (CSV)
# COMMIT names the tree in the logs (the device carries no .git). Logs come
# back as one tarball (the device tool returns at most 8 files); the caller
# commits a summary under bench/results/.
set -uo pipefail
L=${LOGS:-/tmp/logs}; mkdir -p "$L"
FINAL=${OUT:-/tmp/out}
pack() { tar czf "$FINAL/logs.tgz" -C "$L" . ; cp "$L"/summary.txt "$L"/results.md "$L"/fi-summary.md "$FINAL/" 2>/dev/null; }
trap pack EXIT
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L/summary.txt"; }
steps=" ${STEPS:-tests} "
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$L/gpu.txt" 2>&1
echo "${COMMIT:-unknown (no .git on the device: the caller names it)}" > "$L/commit.txt"
build=/tmp/attn-build
cmake -G Ninja -S . -B $build -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_BENCHMARKS=OFF \
  -DPython3_EXECUTABLE="$(command -v python3)" > "$L/cmake.log" 2>&1
ninja -C $build > "$L/ninja.log" 2>&1 || { tail -30 "$L/ninja.log"; exit 1; }
# Every pack tarball under out/, unpacked beside it into a fresh folder, so a
# folder is exactly its tarball. A warm machine keeps ignored files between
# calls: a tarball an earlier call carried is still there and unpacked again
# (remove it first where a call builds out/<pack> itself).
for t in out/*.tgz out/*.txz; do
  [ -f "$t" ] || continue
  pack=out/$(basename "${t%.*}")
  rm -rf "$pack" && mkdir -p "$pack" && tar --no-same-owner -C "$pack" -xaf "$t" && chmod -R go-w "$pack"
done
export PYTHONPATH=$build/python ATTN_BUILD_DIR=$build ATTN_CACHE_DIR=$PWD/out/kernels PYTHONUNBUFFERED=1
stamp "built; packs: $(ls out)"
if [[ $steps == *" tests "* ]]; then
  ctest --test-dir $build -j8 > "$L/ctest.log" 2>&1
  stamp "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.log")"
  grep "(Failed)" "$L/ctest.log" | tee -a "$L/summary.txt"
  timeout ${PYTEST_TIMEOUT:-330} python3 -m pytest -q -rs -p no:cacheprovider ${PYTEST_ARGS:-python/tests} > "$L/pytest.log" 2>&1
  stamp "pytest rc=$?: $(tail -1 "$L/pytest.log")"
  grep -E "^FAILED|^ERROR" "$L/pytest.log" | head -30 | tee -a "$L/summary.txt"
  ATTN_ARCH=sm_90 timeout 120 python3 -m pytest -q -rs -p no:cacheprovider python/tests/test_gpu_prefill.py \
    python/tests/test_gpu_tiles.py python/tests/test_gpu_page_index_checks.py python/tests/test_strided_inputs.py \
    > "$L/pytest-sm_90.log" 2>&1
  stamp "pytest sm_90 rc=$?: $(tail -1 "$L/pytest-sm_90.log")"
  grep -E "^FAILED|^ERROR" "$L/pytest-sm_90.log" | head -20 | tee -a "$L/summary.txt"
  if [ -x out/host-lowering/run.sh ]; then
    timeout 60 out/host-lowering/run.sh > "$L/host-lowering.log" 2>&1
    stamp "host-lowering rc=$?: $(grep -c PASS "$L/host-lowering.log") PASS, $(grep -c FAIL "$L/host-lowering.log") FAIL"
  fi
fi
if [[ $steps == *" sanitize "* ]]; then
  deadline=${SANITIZE_DEADLINE:-420}
  timeout $((deadline + 60)) python3 bench/harness/sanitize_suite.py --out "$L/sanitize" --deadline "$deadline" \
    --archs "${SANITIZE_ARCHS:-default,sm_90}" ${SANITIZE_ARGS:-} --tests ${SANITIZE_TESTS:-python/tests/test_gpu_prefill.py \
    python/tests/test_gpu_tiles.py python/tests/test_gpu_prefill_variants.py python/tests/test_custom_mask.py \
    python/tests/test_gpu_page_index_checks.py python/tests/test_gpu_fixed_buffers.py} > "$L/sanitize.log" 2>&1
  stamp "sanitize rc=$?: $(grep -E '^\|' "$L/sanitize/summary.md" 2>/dev/null | tail -4 | tr '\n' ' ')"
fi
if [[ $steps == *" fi "* ]]; then
  mkdir -p "$L/fi"
  OUT="$L/fi" ATTN_CACHE_DIR=$PWD/out/fi-kernels FI_FILE_TIMEOUT=${FI_FILE_TIMEOUT:-240} \
    timeout ${FI_TIMEOUT:-420} bench/flashinfer-tests/run.sh > "$L/fi.log" 2>&1
  stamp "fi rc=$?"
  grep -E "^test_|^\| \*\*total|stopped after" "$L/fi.log" | tee -a "$L/summary.txt"
  cp "$L/fi/fi-summary.md" "$L/" 2>/dev/null
fi
if [[ $steps == *" plan "* ]]; then
  timeout 90 python3 bench/harness/plan_overhead.py --breakdown > "$L/plan-overhead.log" 2>&1
  stamp "plan_overhead rc=$?"
  grep -E "^ +[0-9]+ |^ *batch" "$L/plan-overhead.log" >> "$L/summary.txt"
fi
if [[ $steps == *" defer "* ]]; then
  for round in $(seq ${AB_ROUNDS:-2}); do
    for defer in 0 1; do
      ATTN_DEFER_PLAN_COPIES=$defer timeout 60 python3 bench/harness/plan_overhead.py \
        --batches 1,256,1024 --calls 400 --breakdown > "$L/plan-defer$defer-$round.log" 2>&1
      stamp "plan defer=$defer round $round: $(grep -E '^ +256 ' "$L/plan-defer$defer-$round.log" | head -1)"
    done
  done
fi
if [[ $steps == *" graphcopy "* ]]; then
  timeout 150 python3 bench/harness/graph_copy_cost.py > "$L/graph-copy-cost.log" 2>&1
  stamp "graph_copy_cost rc=$?"
  cat "$L/graph-copy-cost.log" >> "$L/summary.txt"
fi
if [[ $steps == *" copy "* ]]; then
  timeout 120 python3 bench/harness/copy_cost.py > "$L/copy-cost.log" 2>&1
  stamp "copy_cost rc=$?"
  cat "$L/copy-cost.log" >> "$L/summary.txt"
fi
if [[ $steps == *" item "* ]]; then
  timeout 150 python3 bench/harness/item_cost.py > "$L/item-cost.log" 2>&1
  stamp "item_cost rc=$?"
  cat "$L/item-cost.log" >> "$L/summary.txt"
fi
# The old runtime and package (out/old-src: `git archive <commit>`, carried)
# built beside this one, once, for ab and for the packs of OLD_PACKS.
old=${OLD_BUILD:-/tmp/attn-old-build}
build_old() {
  [ -f $old/.built ] && return
  cmake -G Ninja -S ${OLD_SRC:-out/old-src} -B $old -DATTN_ENABLE_COMPILER=OFF -DATTN_ENABLE_BENCHMARKS=OFF \
    -DATTN_ENABLE_TESTS=OFF -DPython3_EXECUTABLE="$(command -v python3)" > "$L/old-cmake.log" 2>&1
  ninja -C $old > "$L/old-ninja.log" 2>&1 && touch $old/.built || tail -20 "$L/old-ninja.log"
}
# The environment a pack runs under: a pack of OLD_PACKS (kernels of an older
# plan ABI) with the old build, the others with this one.
pack_env() {
  if [[ " ${OLD_PACKS:-} " == *" $1 "* ]]; then build_old; echo "PYTHONPATH=$old/python ATTN_BUILD_DIR=$old"; fi
}
if [[ $steps == *" ab "* ]]; then
  # plan() before and after a change on one host: the same script timing
  # both builds, twice alternating (hosts differ more than most changes do).
  build_old
  for round in $(seq ${AB_ROUNDS:-2}); do
    for which in old new; do
      b=$build c=$PWD/out/kernels
      # The old build with its own kernels: the first of OLD_PACKS, if any.
      if [ $which = old ]; then b=$old; [ -n "${OLD_PACKS:-}" ] && c=$PWD/out/${OLD_PACKS%% *}; fi
      PYTHONPATH=$b/python ATTN_BUILD_DIR=$b ATTN_CACHE_DIR=$c timeout 60 python3 bench/harness/plan_overhead.py \
        --batches 1,256,1024 --calls 400 --breakdown > "$L/plan-ab-$which-$round.log" 2>&1
      stamp "plan ab $which round $round: $(grep -E '^ +256 ' "$L/plan-ab-$which-$round.log")"
    done
  done
fi
if [[ $steps == *" variant "* ]]; then
  # What a variant costs a prefill, with each pack of VARIANT_PACKS (default
  # kernels-base kernels), twice alternating; each output checked.
  for round in 1 2; do
    for pack in ${VARIANT_PACKS:-kernels-base kernels}; do
      env $(pack_env $pack) ATTN_CACHE_DIR=$PWD/out/$pack timeout 120 python3 bench/harness/variant_cost.py > "$L/variant-$pack-$round.log" 2>&1
      stamp "variant $pack round $round rc=$?"
      grep -E "^P2|Error" "$L/variant-$pack-$round.log" | sed "s/^/  $pack $round /" | tee -a "$L/summary.txt"
    done
  done
fi
if [[ $steps == *" bench "* ]]; then
  timeout ${BENCH_TIMEOUT:-200} python3 bench/harness/run_bench.py --out "$L" --no-sweeps ${BENCH_ARGS:-} > "$L/bench.log" 2>&1
  stamp "bench rc=$?"
fi
declare -A suite_rc
if [[ $steps == *" suite "* ]]; then
  for entry in ${SUITE_PACKS:-kernels-tma}; do
    pack=${entry%%:*} tests=${SUITE_TESTS:-python/tests}
    [[ $entry == *:* ]] && tests=${entry#*:} && tests=${tests//,/ }
    tma=0; [[ $pack == *-tma ]] && tma=1
    ATTN_KV_TMA=$tma ATTN_CACHE_DIR=$PWD/out/$pack timeout ${SUITE_TIMEOUT:-240} python3 -m pytest -q -rs \
      -p no:cacheprovider $tests > "$L/pytest-$pack.log" 2>&1
    suite_rc[$pack]=$?
    stamp "pytest on $pack rc=${suite_rc[$pack]}: $(tail -1 "$L/pytest-$pack.log")"
    grep -E "^FAILED|^ERROR" "$L/pytest-$pack.log" | head -30 | tee -a "$L/summary.txt"
  done
fi
if [[ $steps == *" kab "* ]]; then
  only=${KAB_ONLY:-P1,P2,P3-d64,P3-d256,P5}
  for round in $(seq ${KAB_ROUNDS:-2}); do
    for pack in ${KAB_PACKS:-kernels-base kernels}; do
      tma=0; [[ $pack == *-tma ]] && tma=1
      if [[ ${suite_rc[$pack]:-0} == 124 ]]; then stamp "kab $pack skipped: its suite timed out"; continue; fi
      env $(pack_env $pack) ATTN_KV_TMA=$tma ATTN_CACHE_DIR=$PWD/out/$pack timeout 150 python3 bench/harness/run_bench.py --out "$L/kab-$pack-$round" \
        --only "$only" --no-peers > "$L/kab-$pack-$round.log" 2>&1
      stamp "kab $pack round $round rc=$?"
      grep -E "^[A-Z][0-9]" "$L/kab-$pack-$round.log" | sed "s/^/  $pack $round /" | tee -a "$L/summary.txt"
    done
  done
  if [ -z "${KAB_NO_PEERS:-}" ]; then
    timeout 200 python3 bench/harness/run_bench.py --out "$L/kab-peers" --only "$only" > "$L/kab-peers.log" 2>&1
    stamp "kab with peers (out/kernels) rc=$?"
    grep -E "^[A-Z][0-9]|ceilings" "$L/kab-peers.log" | tee -a "$L/summary.txt"
  fi
fi
if [[ $steps == *" kabp "* ]]; then
  packs=$(for p in ${KABP_PACKS:-kernels-base kernels}; do printf 'out/%s,' "$p"; done)
  timeout ${KABP_TIMEOUT:-300} python3 bench/harness/kab_paired.py --packs "$packs" \
    --only "${KABP_ONLY:-P1,P2,P3-d64,P3-d256,P5}" --rounds ${KABP_ROUNDS:-8} --json "$L/kabp.json" > "$L/kabp.log" 2>&1
  stamp "kabp rc=$?"
  tee -a "$L/summary.txt" < "$L/kabp.log"
fi
if [[ $steps == *" ncu "* ]]; then
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  for pack in ${NCU_PACKS:-kernels}; do
    tma=0; [[ $pack == *-tma ]] && tma=1
    for w in ${NCU_WORKLOADS:-P1}; do
      r="$L/ncu-$w-$pack"
      ATTN_KV_TMA=$tma ATTN_CACHE_DIR=$PWD/out/$pack timeout ${NCU_TIMEOUT:-240} "$NCU" --clock-control none \
        -k regex:attn_ --launch-skip 2 --launch-count 2 --set full --import-source no -f -o "$r" \
        python3 bench/harness/profile_workload.py "$w" > "$r.log" 2>&1
      stamp "ncu $w on $pack rc=$?"
      "$NCU" --import "$r.ncu-rep" --page details > "$r-details.txt" 2>&1
      "$NCU" --import "$r.ncu-rep" --page source --csv --print-source sass > "$r-sass.csv" 2>&1
      grep -E "attn_|Duration|Executed Instructions |Issue Slots Busy|Compute \(SM\) Throughput" \
        "$r-details.txt" | head -20 >> "$L/summary.txt"
    done
  done
fi
stamp "done"
