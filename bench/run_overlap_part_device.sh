#!/usr/bin/env bash
# Issue #23: a fitted width's last 64-column part flush with its last column, overlapping the
# part before it (one TMA store), where bounds-checked element stores wrote the columns past the
# last whole part (run 118: 8% of 256x152's time at 3000x5000x2000). The forced configs' GPU
# tests, then the example against BASELINE (a copy of the example before the change, carried
# untracked: `git show REV:examples/gemm_bf16.py > ab/gemm_bf16_base.py`), hot L2, beside
# cuBLAS, then the fitted tiles in clusters of two (`@2`).
#   bash bench/run_overlap_part_device.sh "$OUT" RUN BASELINE
source bench/device_env.sh "$@"
baseline=${3:?baseline copy of the example}
run_step "forced config tests" 200 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" \
    tests/test_gpu_gemm.py -k "each_kind or resident"
tail -3 "$out/gemm_tests_run$run.log" >> "$log"
run_step "base ab" 240 "$out/base_ab_run$run.log" python3 bench/base_ab.py "$run" "$baseline" \
    3000x5000x2000:256x152 4097x4104x4096:128x208 4097x4104x4096:256x136 \
    3000x5000x2000:128x232 4097x4104x4096:192x176 3072x5120x2048:256x160
cp "$(result base_ab)" "$out/" 2>/dev/null
run_step "clustered" 150 "$out/configs_ab_run$run.log" python3 bench/configs_ab.py "$run" \
    3000x5000x2000:256x152@2 4097x4104x4096:192x176@2 4097x4104x4096:128x216@2
cp "$(result configs_ab)" "$out/" 2>/dev/null
grep " us, " "$out/base_ab_run$run.log" "$out/configs_ab_run$run.log" | sed 's/.*log://' >> "$log"
cat "$log"
