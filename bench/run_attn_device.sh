#!/usr/bin/env bash
# Issue #24 on the H200 in one command (~4-5 minutes): the setmaxnreg build on the device's
# toolchain (which ptxas linked it, the budgets, HGMMA forms and wgmma waits in the SASS), the
# attention GPU tests (and the toolchain and fragment tests) and bench/attention.py; at most 4
# files land in "$OUT".
#   bash bench/run_attn_device.sh "$OUT" RUN
set -u
out=${1:?output folder}
run=${2:?run number}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv
  echo "ptxas on PATH: $(command -v ptxas) $(ptxas --version 2>&1 | tail -1)"
  timeout 120 python3 examples/attention_fwd.py
  timeout 60 python3 -c "
import sys; sys.path.insert(0, 'examples')
import attention_fwd
ck = attention_fwd.compiled(128, False)
print('linker:', ck.metadata['toolchain']['linker'])
print('\n'.join(l.strip() for l in ck.sass.splitlines()
                if 'USETMAXREG' in l or 'HGMMA' in l or 'WARPGROUP.DEPBAR' in l))"
} > "$out/attn_build_run$run.log" 2>&1
tail -5 "$out/attn_build_run$run.log"
timeout 150 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_gpu_attention.py \
  tests/test_setmaxnreg_link.py tests/test_fragment_algebra.py > "$out/attn_tests_run$run.log" 2>&1
tail -3 "$out/attn_tests_run$run.log"
timeout 210 python3 bench/attention.py "$run" > "$out/attn_bench_run$run.log" 2>&1
grep "causal=" "$out/attn_bench_run$run.log"
cp "bench/results/attention_run$run.json" "$out/" 2>/dev/null
