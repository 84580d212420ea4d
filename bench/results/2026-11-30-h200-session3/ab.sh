#!/usr/bin/env bash
# A/B on one GPU: the previous planner (d6d67d1's Plan.cpp) against this tree's,
# interleaved twice, D3/D4 and the decode-skew sweep, attn only.
set -u
root=$PWD
rm -rf /tmp/old && mkdir /tmp/old && cp -r . /tmp/old/ && cp out/ab/Plan.cpp.old /tmp/old/lib/Runtime/Plan.cpp
common="SKIP_TESTS=1 SKIP_PLAN_BENCH=1"
for round in 1 2; do
  (cd /tmp/old && env $common OUT=$OUT/old$round ATTN_GPU_BUILD=/tmp/build-old ATTN_COMMIT="$1+d6d67d1-planner" \
     BENCH_ARGS="--sweep decode-skew --no-peers" bash bench/gpu_run.sh D3,D4 > /tmp/old$round.log 2>&1)
  (cd $root && env $common OUT=$OUT/new$round ATTN_COMMIT="$1" \
     BENCH_ARGS="--sweep decode-skew --no-peers" bash bench/gpu_run.sh D3,D4 > /tmp/new$round.log 2>&1)
done
rm -f $OUT/*/gpu-run.tgz $OUT/*/bench.log
for r in old1 new1 old2 new2; do echo "== $r"; grep -E "^\| (D3|D4|0\.)" $OUT/$r/results.md; done
