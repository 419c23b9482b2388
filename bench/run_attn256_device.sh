#!/usr/bin/env bash
# Issue #24's D=256 on the H200 in one command (~4-6 minutes): the D=256 build on the device's
# toolchain (registers, local and shared bytes, setmaxnreg budgets, HGMMA forms and wgmma waits in
# the SASS), the attention GPU tests (D 64, 128 and 256) and bench/attention.py's D=256 shapes
# (the D=64/128 kernels' PTX is unchanged since run 49); at most 4 files land in "$OUT".
#   bash bench/run_attn256_device.sh "$OUT" RUN
set -u
out=${1:?output folder}
run=${2:?run number}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv
  echo "ptxas on PATH: $(command -v ptxas) $(ptxas --version 2>&1 | tail -1)"
  timeout 90 python3 -c "
import sys; sys.path.insert(0, 'examples')
import attention_fwd
for causal in (False, True):
    ck = attention_fwd.compiled(256, causal)
    print('D=256 causal=%s:' % causal, {key: ck.metadata[key] for key in (
        'registers', 'local_bytes', 'shared_bytes', 'spill_stores', 'spill_loads')},
        'linker:', ck.metadata['toolchain']['linker'])
import collections
lines = (l.split(';')[0].split('*/')[-1].strip() for l in ck.sass.splitlines())
print(collections.Counter(t.split()[0] if 'HGMMA' in t else t for t in lines
      if 'USETMAXREG' in t or 'HGMMA' in t or 'WARPGROUP.DEPBAR' in t))"
} > "$out/attn256_build_run$run.log" 2>&1
tail -12 "$out/attn256_build_run$run.log"
timeout 180 python3 -m pytest -m gpu -q -p no:cacheprovider -rfs --tb=short \
  tests/test_gpu_attention.py > "$out/attn256_tests_run$run.log" 2>&1
tail -3 "$out/attn256_tests_run$run.log"
timeout 120 python3 bench/attention.py "$run" 256 > "$out/attn256_bench_run$run.log" 2>&1
grep "causal=" "$out/attn256_bench_run$run.log"
cp "bench/results/attention_run$run.json" "$out/" 2>/dev/null
