#!/usr/bin/env bash
# The wgmma session on the H200: single-product tests, the GEMM example, the GEMM benchmark.
# Usage (on the GPU machine, from the project root): bash bench/run_gemm_device.sh "$OUT"
set -u
out=${1:-/tmp/jittile-out}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > "$out/wgmma_tests.log" 2>&1
python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short tests/test_gpu_wgmma.py \
  >> "$out/wgmma_tests.log" 2>&1
(cd examples && timeout 300 python3 gemm_bf16.py) > "$out/gemm_example.log" 2>&1
timeout 400 python3 bench/gemm.py > "$out/gemm_bench.log" 2>&1
cp bench/results/gemm.json "$out/" 2>/dev/null
