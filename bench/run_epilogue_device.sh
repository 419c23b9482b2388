#!/usr/bin/env bash
# Issue #23 on the H200 after the epilogue's 64-column parts alternate between two swizzled
# buffers: bench/base_ab.py against BASELINE (the example before it, carried untracked) on
# short-K, square, projection, ragged and split-built tiles, then bench/gemm.py over every shape
# (tuned cold, both types; each call now takes the next input copy).
#   bash bench/run_epilogue_device.sh "$OUT" RUN BASELINE
baseline=${3:?baseline gemm_bf16.py}
source bench/device_env.sh "$1" "$2"
run_step "epilogue a/b" 200 "$out/base_ab_run$run.log" python3 bench/base_ab.py "$run" \
  "$baseline" 3072x5120x2048:128x256 3000x5000x2000:128x256 4096x4096x4096:128x256 \
  8192x14336x4096:128x256 4224x4096x4096:128x256 4224x4096x4096:128x256/2 \
  4224x4096x4096:128x256/4 4097x4104x4096:128x256/4 512x4096x4096:128x128 \
  4096x4096x4096:128x192 1024x1024x1024:64x128 256x8192x8192:64x256
cp "$(result base_ab)" "$out/" 2>/dev/null
grep "new\|baseline" "$out/base_ab_run$run.log" >> "$log"
run_step "gemm bench" 330 "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" --samples 10
cp "$(result gemm)" "$out/" 2>/dev/null
grep -i "geomean\|geometric" "$out/gemm_bench_run$run.log" >> "$log"
cat "$log"
