#!/usr/bin/env bash
# Issue #23 on the H200, one call within 8 minutes: bench/gemm.py over every bf16 shape (cold
# tunings in parallel workers), then the GEMM GPU tests on the compile cache it left.
# Usage (on the GPU machine, from the project root): bash bench/run_final_gemm_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
timeout 230 python3 bench/gemm.py "$run" --samples 10 --only bf16 > "$out/gemm_bench_run$run.log" 2>&1
echo "bf16 bench rc=$? $(date -u +%T)" >> "$log"
printf -v file "bench/results/gemm_run%02d.json" "$run"
cp "$file" "$out/" 2>> "$log"
timeout 220 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short --durations=5 \
  tests/test_gpu_gemm.py tests/test_gpu_autotune.py > "$out/gemm_tests_run$run.log" 2>&1
echo "gemm tests rc=$? $(date -u +%T)" >> "$log"
date -u >> "$log"
