#!/usr/bin/env bash
# Issue #23 on the H200 after the parallel-compile fix, one call within 8 minutes, on a cold
# compile cache: bench/gemm.py bf16 over the square and skinny shapes (each first call is a
# fresh tuning: its line gives compiling vs timing), then fp8 over the squares and projections.
# Usage (on the GPU machine, from the project root): bash bench/run_tuning_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
timeout 200 python3 bench/gemm.py "$run" --samples 10 --only bf16 --shapes square,skinny \
  > "$out/gemm_bench_run$run.log" 2>&1
echo "bf16 bench rc=$? $(date -u +%T)" >> "$log"
printf -v file "bench/results/gemm_run%02d.json" "$run"
cp "$file" "$out/gemm_run${run}_bf16.json" 2>> "$log"
timeout 230 python3 bench/gemm.py "$run" --samples 10 --only fp8 --shapes square,projection \
  > "$out/gemm_fp8_bench_run$run.log" 2>&1
echo "fp8 bench rc=$? $(date -u +%T)" >> "$log"
cp "$file" "$out/gemm_run${run}_fp8.json" 2>> "$log"
date -u >> "$log"
