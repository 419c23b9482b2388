#!/usr/bin/env bash
# Issue #23's ragged shapes on the H200: the kernels cuBLAS picks for them (bench/cublas_kernels.py)
# and where a split-K tail's time goes (bench/tail_ab.py's timing-only variants of settle).
#   bash bench/run_tail_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "cublas kernels" 120 "$out/cublas_kernels_run$run.log" python3 bench/cublas_kernels.py \
  "$run" 4097x4104x4096 4096x4096x4096 3000x5000x2000 3072x5120x2048 256x8192x8192 \
  512x4096x4096 4224x4096x4096 8192x8192x8192
cp "$(result cublas_kernels)" "$out/" 2>/dev/null
run_step "tail a/b" 400 "$out/tail_ab_run$run.log" python3 bench/tail_ab.py "$run"
cp "$(result tail_ab)" "$out/" 2>/dev/null
cat "$log"
