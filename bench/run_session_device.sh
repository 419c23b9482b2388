#!/usr/bin/env bash
# One device command for a session's final H200 check (issues #19-#22): the whole GPU suite with
# the GPU-vs-interpreter differential, the runtime-safety counts, launch overhead and the
# interpreter's GEMM timing; every file lands in "$OUT" (at most 8 come back).
#   bash bench/run_session_device.sh "$OUT" RUN
set -u
out=${1:?output folder}
run=${2:?run number}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv
  JITTILE_DIFFERENTIAL=1 timeout 330 python3 -m pytest -m gpu -q -p no:cacheprovider -rfs \
    --tb=short
} > "$out/gpu_tests_run$run.log" 2>&1
tail -4 "$out/gpu_tests_run$run.log"
timeout 90 python3 bench/runtime_safety.py --json "$out/runtime_safety_run$run.json" \
  > /dev/null 2> "$out/runtime_safety_run$run.err"
timeout 150 python3 bench/launch_overhead.py > "$out/launch_overhead_run$run.log" 2>&1
cp bench/results/launch_overhead.json "$out/launch_overhead_run$run.json" 2>/dev/null
tail -25 "$out/launch_overhead_run$run.log"
