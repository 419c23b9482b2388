#!/usr/bin/env bash
# Issue #24 on the H200 after the D=64/128 rework (P V as one n=D wgmma, swizzled O staging), in
# at most 4 minutes: the builds on the device's toolchain (registers, local and shared bytes,
# setmaxnreg budgets and HGMMA forms in the SASS), the attention GPU tests (D 64, 128 and 256,
# ragged, GQA, causal and not) and bench/attention.py over the D=128, D=64 and D=256 shapes
# (cuDNN and flash samples interleaved); at most 4 files land in "$OUT".
#   bash bench/run_attn3_device.sh "$OUT" RUN
set -u
out=${1:?output folder}
run=${2:?run number}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv
  echo "ptxas on PATH: $(command -v ptxas) $(ptxas --version 2>&1 | tail -1)"
  timeout 50 python3 -c "
import collections, sys; sys.path.insert(0, 'examples')
import attention_fwd
for head_dim in attention_fwd.HEAD_DIMS:
    ck = attention_fwd.compiled(head_dim, False)
    lines = (l.split(';')[0].split('*/')[-1].strip() for l in ck.sass.splitlines())
    print('D=%d:' % head_dim, {key: ck.metadata[key] for key in (
        'registers', 'local_bytes', 'shared_bytes', 'spill_stores', 'spill_loads')},
        dict(collections.Counter(t.split()[0] if 'HGMMA' in t else t for t in lines
             if 'USETMAXREG' in t or 'HGMMA' in t)))"
} > "$out/attn3_build_run$run.log" 2>&1
tail -4 "$out/attn3_build_run$run.log"
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider -rfs --tb=short \
  tests/test_gpu_attention.py > "$out/attn3_tests_run$run.log" 2>&1
tail -3 "$out/attn3_tests_run$run.log"
timeout 80 python3 bench/attention.py "$run" 128 64 256 > "$out/attn3_bench_run$run.log" 2>&1
grep "causal=" "$out/attn3_bench_run$run.log"
cp "bench/results/attention_run$run.json" "$out/" 2>/dev/null
