#!/usr/bin/env bash
# Issue #23 on the H200 after the consumers' ring counters went to 32 bits (a 5- or 6-stage
# ring's stage index had cost a 64-bit signed modulo per stage) and 64x32 tiles joined the space
# for M <= 64, within the session's last 5 device minutes:
# bench/gemm.py over the short, square and ragged shapes, both types, cut at 240 s (it saves
# after every shape).
# Usage (on the GPU machine, from the project root): bash bench/run_counters_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step bench 240 "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" --samples 10 \
  --shapes skinny,square,ragged
cp "$(result gemm)" "$out/" 2>> "$log"
date -u >> "$log"
