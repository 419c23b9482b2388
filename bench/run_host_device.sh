#!/usr/bin/env bash
# Issue #23's host-side session on the H200, about 5 minutes: a cached tuning's first launch in a
# fresh process (profiled), tuned launches' host microseconds (profiled), the autotuner's GPU
# tests and the fresh-process tuning test, and Nsight Compute's view of the fp8 and bf16 GEMMs
# at 4096^3 and 8192^3 (tuned configs). At most 7 files into $OUT.
# Usage (on the GPU machine, from the project root): bash bench/run_host_device.sh "$OUT" RUN
set -u
out=${1:-/tmp/jittile-out}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 JITTILE_AUTOTUNE_JOBS=${JITTILE_AUTOTUNE_JOBS:-16}
log="$out/host_device.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > "$log" 2>&1
timeout 120 python3 bench/first_launch_profile.py --json "$out/first_launch_profile.json" \
  > "$out/first_launch_profile.log" 2>&1
echo "first launch rc=$?" >> "$log"
timeout 60 python3 bench/gemm_host_profile.py --json "$out/gemm_host_profile.json" \
  > "$out/gemm_host_profile.log" 2>&1
echo "host profile rc=$?" >> "$log"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short -s \
  tests/test_gpu_autotune.py "tests/test_gpu_gemm.py::test_a_fresh_process_reuses_the_tuning_within_10_ms" \
  > "$out/host_tests.log" 2>&1
echo "tests rc=$?" >> "$log"
export JITTILE_CACHE_DIR=$(mktemp -d /tmp/jittile-ncu.XXXX)
for case in "fp8 4096" "fp8 8192" "bf16 4096"; do
  timeout 60 python3 bench/gemm_ncu.py $case >> "$log" 2>&1  # tunes: ncu then sees the choice only
  timeout 100 ncu --clock-control none -k regex:gemm_ --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    python3 bench/gemm_ncu.py $case >> "$out/gemm_ncu.log" 2>&1
  echo "ncu $case rc=$?" >> "$log"
done
date -u >> "$log"
