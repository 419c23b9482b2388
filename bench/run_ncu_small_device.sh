#!/usr/bin/env bash
# Issue #23's short GEMMs under Nsight Compute on the H200: the tuned bf16 configs of
# 64x4096x4096 (64x128, split 4) and 512x4096x4096 (128x256, split 2), each beside cuBLAS's
# kernels on the same operands (bench/gemm_one_config.py), within 5 minutes.
# Usage (on the GPU machine, from the project root): bash bench/run_ncu_small_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
profile m64 64 4096 4096 64 128 4
profile m512 512 4096 4096 128 256 2
date -u >> "$log"
