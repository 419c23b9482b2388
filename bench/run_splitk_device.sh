#!/usr/bin/env bash
# One-launch split-K on the H200 (examples/gemm_bf16.py, T.cuda.atomic_add), about 5 minutes:
# every config of both GEMM spaces compiled with the device's toolchain (which also fills the
# compile cache the later steps use), the atomics and GEMM GPU tests, the split configs timed
# against SPLIT=1, the tuned launch and cuBLAS on the small-output shapes, and the examples' own
# GPU checks. 7 files into $OUT; at most 6 min (timeouts).
# Usage (on the GPU machine, from the project root): bash bench/run_splitk_device.sh "$OUT" RUN
set -u
out=${1:-/tmp/jittile-out}
run=${2:-0}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 JITTILE_AUTOTUNE_JOBS=${JITTILE_AUTOTUNE_JOBS:-16}
export JITTILE_CACHE_DIR=$(mktemp -d /tmp/jittile-splitk-cache.XXXX)
log="$out/splitk_device.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > "$log" 2>&1

# 1. Every config compiled for this GPU in parallel (registers, local bytes; the split configs
#    grew by the arrival and the last split's rounding): fills the cache for steps 2-4.
timeout 70 python3 bench/gemm_configs.py --json "$out/gemm_configs.json" > "$out/gemm_configs.log" 2>&1
echo "configs rc=$?" >> "$log"

# 2. The GPU tests: atomics (every op and type, a release/acquire message between CTAs) and the
#    GEMMs (tuned shapes, every kind of config forced, three split-K launches on one workspace
#    that must stay zero, fp8 against cuBLAS's error, the cached tuning in a fresh process).
timeout 110 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short --durations=8 \
  tests/test_gpu_atomics.py tests/test_gpu_gemm.py > "$out/gpu_tests.log" 2>&1
echo "tests rc=$?" >> "$log"

# 3. The split configs against SPLIT=1, the tuned launch and cuBLAS (CUDA events behind a
#    100 us spin, medians of 15): 1024^3, 16x4096x4096, 64x4096x4096, 512x4096x4096,
#    256x8192x8192.
printf -v json "%s/splitk_run%02d.json" "$out" "$run"
timeout 130 python3 bench/splitk.py "$json" --samples 15 > "$out/splitk.log" 2>&1
echo "splitk rc=$?" >> "$log"

# 4. The examples' own GPU checks (16x4096x4096 tunes split-K configs).
(cd examples && timeout 25 python3 gemm_bf16.py; timeout 25 python3 gemm_fp8.py) \
  > "$out/examples.log" 2>&1
echo "examples rc=$?" >> "$log"
date -u >> "$log"
