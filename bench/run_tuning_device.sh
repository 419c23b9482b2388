#!/usr/bin/env bash
# Issue #23 on the H200 after the parallel-compile fix, one call within 8 minutes, on a cold
# compile cache: bench/gemm.py bf16 over the square and skinny shapes (each first call is a
# fresh tuning: its line gives compiling vs timing), then fp8 over the squares and projections.
# Usage (on the GPU machine, from the project root): bash bench/run_tuning_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "bf16 bench" 200 "$out/gemm_bench_run$run.log" \
  python3 bench/gemm.py "$run" --samples 10 --only bf16 --shapes square,skinny
cp "$(result gemm)" "$out/gemm_run${run}_bf16.json" 2>> "$log"
run_step "fp8 bench" 230 "$out/gemm_fp8_bench_run$run.log" \
  python3 bench/gemm.py "$run" --samples 10 --only fp8 --shapes square,projection
cp "$(result gemm)" "$out/gemm_run${run}_fp8.json" 2>> "$log"
date -u >> "$log"
