#!/usr/bin/env bash
# Issues #23 and #24 on the H200 in one call of at most 9.5 minutes (timeouts): every GEMM
# config compiled with the device's toolchain (filling the compile cache), the atomics and GEMM
# GPU tests (one-launch split-K), bench/gemm.py over every shape of both types, the attention GPU
# tests and bench/attention.py over D=128, 64 and 256. 8 files into $OUT.
# Usage (on the GPU machine, from the project root): bash bench/run_final_device.sh "$OUT" RUN
set -u
out=${1:?output folder}
run=${2:?run number}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 JITTILE_AUTOTUNE_JOBS=${JITTILE_AUTOTUNE_JOBS:-16}
export JITTILE_CACHE_DIR=$(mktemp -d /tmp/jittile-final-cache.XXXX)
log="$out/device_run$run.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > "$log" 2>&1
timeout 60 python3 bench/gemm_configs.py > "$out/gemm_configs_run$run.log" 2>&1
echo "configs rc=$? $(date -u +%T)" >> "$log"
timeout 110 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short --durations=5 \
  tests/test_gpu_atomics.py tests/test_gpu_gemm.py > "$out/gemm_tests_run$run.log" 2>&1
echo "gemm tests rc=$? $(date -u +%T)" >> "$log"
timeout 160 python3 bench/gemm.py "$run" --samples 10 > "$out/gemm_bench_run$run.log" 2>&1
echo "gemm bench rc=$? $(date -u +%T)" >> "$log"
printf -v file "bench/results/gemm_run%02d.json" "$run"
cp "$file" "$out/" 2>> "$log"
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider -rfs --tb=short \
  tests/test_gpu_attention.py > "$out/attn_tests_run$run.log" 2>&1
echo "attention tests rc=$? $(date -u +%T)" >> "$log"
timeout 100 python3 bench/attention.py "$run" 128 64 256 > "$out/attn_bench_run$run.log" 2>&1
echo "attention bench rc=$? $(date -u +%T)" >> "$log"
cp "bench/results/attention_run$run.json" "$out/" 2>> "$log"
date -u >> "$log"
