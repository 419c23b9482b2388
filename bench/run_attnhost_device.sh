#!/usr/bin/env bash
# Issue #24's short-shape "regression" (run 49 -> 56) on the H200, in at most 8 minutes (cold
# compile caches: the attention builds take most of it): the attention GPU tests (D 64, 128 and
# 256, ragged, GQA, causal and not), then bench/attention.py with every sample gated behind a
# GPU spin (device time only; common.median_ms) and each contender's host microseconds per call
# (GPU kept busy; common.host_us) in every row; 3 files land in "$OUT".
#   bash bench/run_attnhost_device.sh "$OUT" RUN
set -u
out=${1:?output folder}
run=${2:?run number}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  echo "ptxas on PATH: $(command -v ptxas) $(ptxas --version 2>&1 | tail -1)"
  timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider -rfs --tb=short \
    tests/test_gpu_attention.py
} > "$out/attnhost_tests_run$run.log" 2>&1
tail -3 "$out/attnhost_tests_run$run.log"
timeout 220 python3 bench/attention.py "$run" > "$out/attnhost_bench_run$run.log" 2>&1
grep "causal=" "$out/attnhost_bench_run$run.log"
cp "bench/results/attention_run$run.json" "$out/" 2>/dev/null
