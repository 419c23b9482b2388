#!/usr/bin/env bash
# Issue #23: every GEMM shape, both types, tuned cold (bench/gemm.py), with the clusters'
# releases passed on by a relay thread (the tuner may now pick clustered configs).
#   bash bench/run_gemm_relay_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "gemm bench" 400 "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" --samples 10
cp "$(result gemm)" "$out/" 2>/dev/null
grep -i "geomean\|geometric" "$out/gemm_bench_run$run.log" >> "$log"
cat "$log"
