#!/usr/bin/env bash
# Issue #23's one-wave GEMMs under Nsight Compute on the H200 (pipes, warp stalls and their
# SASS locations): 512x4096x4096 in 128x128 tiles alone and in clusters of two (cuBLAS's tiles
# and grid, run 85) and 64x4096x4096 in 64x32 tiles, each beside cuBLAS's kernels on the same
# operands (bench/gemm_one_config.py).
#   bash bench/run_ncu_mid_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
profile m512t128 512 4096 4096 128 128 1
profile m512t128c2 512 4096 4096 128 128 1 2
profile m64t32 64 4096 4096 64 32 1
date -u >> "$log"
cat "$log"
