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
} > "$out/gpu.log" 2>&1
python3 -m pytest -m gpu -q -p no:cacheprovider -rs 2>&1 | tee -a "$out/gpu.log"
python3 -m jittile.demo > "$out/demo.log" 2>&1
for b in ${BENCHES:-tma_copy launch_overhead}; do
  echo "== $b" >> "$out/bench.log"
  timeout 300 python3 bench/$b.py >> "$out/bench.log" 2>&1
  cp bench/results/$b.json "$out/" 2>/dev/null
done
echo "== compile_time" >> "$out/bench.log"
timeout 300 python3 bench/compile_time.py --runs 3 --name compile_time_h200 >> "$out/bench.log" 2>&1
cp bench/results/compile_time_h200.json "$out/" 2>/dev/null
