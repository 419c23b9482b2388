#!/usr/bin/env bash
# Issue #23's clustered GEMMs on the H200, one call of at most 9.5 minutes (timeouts): remote
# arrivals in the default .release.cta form vs .release.cluster, and clusters of four
# (bench/cluster_arrive_ab.py); where a short GEMM's time goes (bench/gemm_intercept.py, 1024^2
# over K); bench/gemm.py over every bf16 shape (the tuner choosing among clustered configs too;
# its lines say where each tuning's time went); the clustered and GEMM GPU tests. The compile
# cache lives in a fixed /tmp folder, so a second call on the still-warm machine reuses it.
# At most 6 files into $OUT.
# Usage (on the GPU machine, from the project root): bash bench/run_cluster_device.sh "$OUT" RUN
export JITTILE_CACHE_DIR=${JITTILE_CACHE_DIR:-/tmp/jittile-device-cache}  # kept across calls
source bench/device_env.sh "$@"
run_step "arrive A/B" 150 "$log" python3 bench/cluster_arrive_ab.py \
  512x4096x4096:64x256 256x8192x8192:64x256 4096x4096x4096:128x256
run_step "intercept" 80 "$log" python3 bench/gemm_intercept.py "$run"
run_step "gemm bench" 200 "$out/gemm_bench_run$run.log" \
  python3 bench/gemm.py "$run" --samples 10 --only "${GEMM_KIND:-bf16}"
run_step "gemm tests" 110 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" --durations=8 \
  tests/test_gpu.py -k "mapa or multicast or cluster" tests/test_gpu_gemm.py
cp "$(result gemm)" "$(result gemm_intercept)" "$out/" 2>> "$log"
date -u >> "$log"
