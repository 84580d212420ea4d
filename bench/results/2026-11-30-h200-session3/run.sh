#!/usr/bin/env bash
# Final GPU run for this commit: GPU tests + plan bench, then the planner A/B.
set -u
sha=$1
OUT_ALL=$OUT
OUT=$OUT_ALL/tests ATTN_COMMIT=$sha SKIP_BENCH=1 bash bench/gpu_run.sh > /tmp/tests.log 2>&1
grep -E "tests passed|passed|failed|memcheck exit|ERROR SUMMARY|relative error|_median" /tmp/tests.log | grep -v "^SKIPPED"
rm -f $OUT_ALL/tests/gpu-run.tgz.x
OUT=$OUT_ALL bash out/ab/ab.sh $sha
