#!/usr/bin/env bash
# One device session: environment facts, the GPU tests, the demo and the benchmarks.
# Usage (on the GPU machine, from the project root): bash bench/run_device.sh "$OUT"
set -u
out=${1:-/tmp/jittile-out}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv
  python3 -c "import numpy, numba, numba.cuda; print('numpy', numpy.__version__, 'numba', numba.__version__)"
} 2>&1 | tee "$out/env.log"
python3 -m pytest -m gpu -q -p no:cacheprovider -rs 2>&1 | tee "$out/gpu.log"
python3 -m jittile.demo 2>&1 | tee "$out/demo.log"
for b in ${BENCHES:-tma_copy launch_overhead}; do
  timeout 300 python3 bench/$b.py > "$out/bench_$b.log" 2>&1
  cp bench/results/$b.json "$out/" 2>/dev/null
done
timeout 300 python3 bench/compile_time.py --runs 3 --name compile_time_h200 > "$out/bench_compile_time.log" 2>&1
cp bench/results/compile_time_h200.json "$out/" 2>/dev/null
