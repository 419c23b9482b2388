#!/usr/bin/env bash
# Issue #23's cluster multicast on the H200, one call of at most 9.5 minutes (timeouts): how many
# 2-CTA clusters the GPU keeps resident, the remote-arrival and multicast GPU tests, the GEMM GPU
# tests (clustered configs forced, bf16 and fp8), release vs relaxed remote arrivals
# (bench/cluster_arrive_ab.py), and bench/gemm.py over every bf16 shape (the tuner choosing among
# clustered configs too; its lines say where each tuning's time went). The compile cache lives
# in a fixed /tmp folder, so a second call on the still-warm machine reuses it. At most 5 files
# into $OUT.
# Usage (on the GPU machine, from the project root): bash bench/run_cluster_device.sh "$OUT" RUN
set -u
out=${1:?output folder}
run=${2:?run number}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 JITTILE_AUTOTUNE_JOBS=${JITTILE_AUTOTUNE_JOBS:-16}
export JITTILE_CACHE_DIR=${JITTILE_CACHE_DIR:-/tmp/jittile-device-cache}
export JITTILE_PRINT_AUTOTUNING=1  # where each tuning's time goes, in the benchmark's log
log="$out/device_run$run.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > "$log" 2>&1
timeout 60 python3 -c "import sys; sys.path.insert(0, 'examples'); import gemm_bf16; \
print('resident 2-CTA clusters:', gemm_bf16.resident_clusters(132, 2))" >> "$log" 2>&1
echo "resident rc=$? $(date -u +%T)" >> "$log"
# release vs relaxed remote arrivals of the clustered 64x256 config (run 61: no clustered config
# won; ptxas puts a MEMBAR.ALL.GPU before each .release.cluster arrive)
timeout 90 python3 bench/cluster_arrive_ab.py 512 4096 4096 >> "$log" 2>&1
echo "arrive A/B rc=$? $(date -u +%T)" >> "$log"
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short --durations=8 \
  tests/test_gpu.py -k "mapa or multicast or gemm or fp8 or cluster or tuned or fresh" \
  tests/test_gpu_gemm.py > "$out/gemm_tests_run$run.log" 2>&1
echo "gemm tests rc=$? $(date -u +%T)" >> "$log"
timeout 210 python3 bench/gemm.py "$run" --samples 10 --only "${GEMM_KIND:-bf16}" \
  > "$out/gemm_bench_run$run.log" 2>&1
echo "gemm bench rc=$? $(date -u +%T)" >> "$log"
printf -v file "bench/results/gemm_run%02d.json" "$run"
cp "$file" "$out/" 2>> "$log"
date -u >> "$log"
