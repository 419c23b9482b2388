#!/usr/bin/env bash
# Issue #23's short and ragged GEMMs on the H200: bench/skinny_ab.py (the example's short-M
# configs against the same kernel without its wgmma, wider and 64-row swapped tiles, and
# short-K fixed costs, hot and cold, with cuBLAS and a read of B), then bench/configs_ab.py on
# the ragged shapes' tiles and splits beside 4096^3's.
#   bash bench/run_skinny_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "skinny a/b" 300 "$out/skinny_ab_run$run.log" python3 bench/skinny_ab.py "$run"
cp "$(result skinny_ab)" "$out/" 2>/dev/null
run_step "configs a/b" 200 "$out/configs_ab_run$run.log" python3 bench/configs_ab.py "$run" \
  4096x4096x4096:128x256 4097x4104x4096:128x256 4097x4104x4096:128x256/2 \
  4097x4104x4096:128x256/4 4097x4104x4096:128x192 4097x4104x4096:128x128 \
  3000x5000x2000:128x256 3000x5000x2000:128x192 3000x5000x2000:128x128 \
  3072x5120x2048:128x256 1024x1024x1024:64x128 1024x1024x1024:128x128/2
cp "$(result configs_ab)" "$out/" 2>/dev/null
cat "$log"
