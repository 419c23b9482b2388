#!/usr/bin/env bash
# Issue #23 on the H200: where the skinny products' time goes. bench/gemm_intercept.py at
# 1 x 4096, 16 x 4096 and 64 x 4096 over K = 64 .. 4096 (fixed cost against cost per 1024 of
# K), the swapped 64 x 16 tiles whole and in two splits, 128 x 16 in two, the 64 x 32 tiles and
# 64 x 128 in two splits, beside cuBLAS; then bench/stream_floor.py (32 MB read by torch's
# own kernels); one call within 9.5 minutes.
# Usage (on the GPU machine, from the project root): bash bench/run_skinny_intercept_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
for m in 1 16 64; do
  run_step "intercept $m" 150 "$log" python3 bench/gemm_intercept.py \
    "$run$m" "$m" 4096 64x16 64x16:2 128x16:2 64x32 64x128:2
  cp "bench/results/gemm_intercept_run$run$m.json" "$out/gemm_intercept_${m}_run$run.json" 2>> "$log"
done
run_step floor 60 "$out/stream_floor_run$run.log" python3 bench/stream_floor.py "$run"
cp "$(result stream_floor)" "$out/" 2>> "$log"
date -u >> "$log"
