#!/usr/bin/env bash
# Issue #24 on the H200 after the D=64/128 rework (P V as one n=D wgmma, swizzled O staging,
# FlashAttention-3's 128x176 tiles at D=128 non-causal), in at most 4 minutes: the attention GPU
# tests (D 64, 128 and 256, ragged, GQA, causal and not) and bench/attention.py over the D=128,
# D=64 and D=256 shapes (cuDNN and flash samples interleaved; jittile's other D=128 key block
# timed beside its default; the builds' registers, local bytes, setmaxnreg lines and HGMMA count
# in the JSON); 3 files land in "$OUT".
#   bash bench/run_attn3_device.sh "$OUT" RUN
set -u
out=${1:?output folder}
run=${2:?run number}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv
  echo "ptxas on PATH: $(command -v ptxas) $(ptxas --version 2>&1 | tail -1)"
  timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider -rfs --tb=short \
    tests/test_gpu_attention.py
} > "$out/attn3_tests_run$run.log" 2>&1
tail -3 "$out/attn3_tests_run$run.log"
timeout 100 python3 bench/attention.py "$run" 128 64 256 > "$out/attn3_bench_run$run.log" 2>&1
grep "causal=" "$out/attn3_bench_run$run.log"
cp "bench/results/attention_run$run.json" "$out/" 2>/dev/null
