#!/usr/bin/env bash
# Runs the host-lowered decode and prefill that build.sh put here: PASS or
# FAIL per case (the max errors against the CPU reference, a host-memory
# output refused) on a GPU; without one SKIPPED, after the compiled call has
# passed the runtime's argument checks (main.cpp).
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/host-attention"
