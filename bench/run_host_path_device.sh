#!/usr/bin/env bash
# Issue #13's device session on the H200; each part fits one device command, several may share one:
#   bash bench/run_host_path_device.sh tests "$OUT"   # the whole GPU suite, differential
#   bash bench/run_host_path_device.sh gemm "$OUT"    # the GEMM benchmark
#   bash bench/run_host_path_device.sh host "$OUT"    # launch overhead, host work, compile time
# Every result file lands in "$OUT" (at most 8 per command come back from the device machine).
set -u
part=${1:?tests, gemm or host}
out=${2:-/tmp/jittile-out}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
case "$part" in
  tests)
    {
      nvidia-smi --query-gpu=name,driver_version --format=csv
      JITTILE_DIFFERENTIAL=1 timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider -rfs \
        --tb=short
    } > "$out/gpu_tests.log" 2>&1 ;;
  gemm)
    timeout 240 python3 bench/gemm.py > "$out/gemm_bench.log" 2>&1
    cp bench/results/gemm.json "$out/" 2>/dev/null ;;
  host)
    timeout 200 python3 bench/launch_overhead.py > "$out/host_bench.log" 2>&1
    cp bench/results/launch_overhead.json "$out/" 2>/dev/null
    timeout 60 python3 bench/launch_host_cpu.py --json "$out/launch_host_cpu_h200.json" \
      >> "$out/host_bench.log" 2>&1
    timeout 200 python3 bench/compile_time.py --runs 3 --name compile_time_h200 \
      >> "$out/host_bench.log" 2>&1
    cp bench/results/compile_time_h200.json "$out/" 2>/dev/null
    timeout 100 python3 bench/numba_costs.py --name numba_costs_h200 >> "$out/host_bench.log" 2>&1
    cp bench/results/numba_costs_h200.json "$out/" 2>/dev/null
    timeout 150 python3 bench/first_compile_overlap.py --runs 7 \
      --name first_compile_overlap_h200 >> "$out/host_bench.log" 2>&1
    cp bench/results/first_compile_overlap_h200.json "$out/" 2>/dev/null ;;
esac
