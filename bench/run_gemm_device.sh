#!/usr/bin/env bash
# The GEMM session on the H200 (issue #23), about 6 minutes: the time to tune a new shape in a
# fresh process (compile cache cold; the script read from stdin, as run 48's crash needs) and to
# reuse the cached tuning, every config compiled with the device's toolchain (registers, local
# bytes), the host-vs-device diagnosis of short GEMMs, bench/gemm.py over every shape (bf16 and
# fp8), the GEMM GPU tests. 8 files into $OUT; about 5 min expected, at most 7 min 40 s (timeouts).
# Usage (on the GPU machine, from the project root): bash bench/run_gemm_device.sh "$OUT" RUN
set -u
out=${1:-/tmp/jittile-out}
run=${2:-0}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 JITTILE_AUTOTUNE_JOBS=${JITTILE_AUTOTUNE_JOBS:-16}
log="$out/gemm_device.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; date -u; } > "$log" 2>&1

# 1. A new shape tuned in a fresh process with nothing compiled yet (every candidate compiles in
#    parallel), then the same shape again in another fresh process (the tuning from disk).
tune_once() {  # SECONDS M N K label
  local limit=$1; shift
  timeout "$limit" python3 - "$@" <<'EOF'
import sys, time
sys.path.insert(0, "examples")
import torch
import gemm_bf16
m, n, k = (int(x) for x in sys.argv[1:4])
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
t = time.perf_counter()
gemm_bf16.launch(a, b, c)
torch.cuda.synchronize()
first = time.perf_counter() - t
t = time.perf_counter()
gemm_bf16.launch(a, b, c)
torch.cuda.synchronize()
print(f"tune {sys.argv[4]} {m}x{n}x{k}: first launch {first * 1e3:.1f} ms, next "
      f"{(time.perf_counter() - t) * 1e3:.2f} ms, {gemm_bf16.gemm_bf16_tuned.best_config}, "
      f"{len(gemm_bf16.BF16_SPACE.candidates(m, n, k))} candidates", flush=True)
EOF
}
export JITTILE_PRINT_AUTOTUNING=1
# an empty cache directory: nothing compiled, nothing tuned (the rest of the run shares it)
export JITTILE_CACHE_DIR=$(mktemp -d /tmp/jittile-gemm-cache.XXXX)
tune_once 30 3072 5120 1536 new-shape-cold-compile-cache >> "$log" 2>&1 || echo "rc=$?" >> "$log"
tune_once 15 3072 5120 1536 cached-tuning >> "$log" 2>&1 || echo "rc=$?" >> "$log"
tune_once 30 96 6144 2048 new-shape >> "$log" 2>&1 || echo "rc=$?" >> "$log"
tune_once 15 96 6144 2048 cached-tuning >> "$log" 2>&1 || echo "rc=$?" >> "$log"
unset JITTILE_PRINT_AUTOTUNING

# 2. Every config of both spaces compiled for this GPU with the device's NVVM/ptxas (run 48 saw
#    8 bytes of local memory where 13.5 here has none): registers, local bytes, GMMA form; the
#    compiles also fill the cache the benchmark's tunings use.
timeout 45 python3 bench/gemm_configs.py --json "$out/gemm_configs.json" > "$out/gemm_configs.log" 2>&1
echo "configs rc=$?" >> "$log"

# 3. Short GEMMs: host microseconds per launch, device time behind a 100 us and a 2 ms spin,
#    one input copy or eight (why 1024^3 took 207 us in run 48).
timeout 40 python3 bench/gemm_diagnose.py --json "$out/gemm_diagnose.json" >> "$log" 2>&1
echo "diagnose rc=$?" >> "$log"

# 4. The benchmark: every shape, both types, 10 samples after 3 warm-ups.
timeout 160 python3 bench/gemm.py "$run" --samples 10 > "$out/gemm_bench.log" 2>&1
echo "bench rc=$?" >> "$log"
printf -v file "bench/results/gemm_run%02d.json" "$run"
cp "$file" "$out/" 2>> "$log"

# 5. The GEMM GPU tests (correctness of every kind of config, fp8 vs cuBLAS's error, the cached
#    tuning in a fresh process).
timeout 65 python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short --durations=8 \
  tests/test_gpu_gemm.py tests/test_gpu_autotune.py > "$out/gemm_tests.log" 2>&1
echo "tests rc=$?" >> "$log"
(cd examples && timeout 25 python3 gemm_bf16.py; timeout 25 python3 gemm_fp8.py) \
  >> "$out/gemm_tests.log" 2>&1
echo "examples rc=$?" >> "$log"

# 6. The tuning choices on record (jittile cache tunings).
timeout 10 python3 -m jittile cache tunings --json > "$out/gemm_tunings.json" 2>> "$log"
date -u >> "$log"
