#!/usr/bin/env bash
# Issue #23's short GEMMs under Nsight Compute on the H200: the tuned bf16 configs of
# 64x4096x4096 (64x128, split 4) and 512x4096x4096 (128x256, split 2), each beside cuBLAS's
# kernels on the same operands (bench/gemm_one_config.py), within 5 minutes.
# Usage (on the GPU machine, from the project root): bash bench/run_ncu_small_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
  --section LaunchStats --section SchedulerStats)
profile() {  # profile NAME M N K BM BN SPLIT: ours (its 4th launch), then cuBLAS's next kernels
  local name=$1
  shift
  run_step "ncu $name jittile" 90 "$out/ncu_${name}_run$run.log" ncu --clock-control none \
    -k regex:gemm_bf16_tuned --launch-skip 3 --launch-count 1 "${sections[@]}" \
    python3 bench/gemm_one_config.py "$@"
  run_step "ncu $name cublas" 60 "$out/ncu_${name}_cublas_run$run.log" ncu --clock-control none \
    -k 'regex:^(?!jittile).*(gemm|nvjet|gemv|xmma|splitK|cutlass)' --launch-skip 2 --launch-count 2 "${sections[@]}" \
    python3 bench/gemm_one_config.py "$@"
}
profile m64 64 4096 4096 64 128 4
profile m512 512 4096 4096 128 256 2
date -u >> "$log"
