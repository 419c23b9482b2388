#!/usr/bin/env bash
# Issue #23's skinny GEMMs on the H200 with the tuner timing from a cold L2 (as the benchmark's
# rotating inputs run), within 6 minutes: bench/gemm.py over the skinny shapes of both types
# (each candidate's cold time in its JSON), then Nsight Compute on the 64x32 tiles at
# 64x4096x4096 (cuBLAS's tile there) and on the swapped 128x16 split 4 at 1x4096x4096, each
# beside cuBLAS's kernels.
# Usage (on the GPU machine, from the project root): bash bench/run_cold_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step bench 150 "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" --samples 10 \
  --shapes skinny
cp "$(result gemm)" "$out/" 2>> "$log"
profile m64n32 64 4096 4096 64 32 1
profile m1 1 4096 4096 128 16 4
date -u >> "$log"
