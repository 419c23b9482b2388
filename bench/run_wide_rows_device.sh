#!/usr/bin/env bash
# Issue #23 on the H200 with the 256-row fitted tiles (two consumers of 128 rows, setmaxnreg
# budgets): the GEMM GPU tests (their forced configs include 256x152), forced tiles of the ragged
# and square shapes beside cuBLAS (hot L2, bench/configs_ab.py: cuBLAS's 152x256 at
# 3000x5000x2000 is our 256x152), then bench/gemm.py over every shape (tuned cold, both types).
#   bash bench/run_wide_rows_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "gemm tests" 320 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" tests/test_gpu_gemm.py
tail -3 "$out/gemm_tests_run$run.log" >> "$log"
run_step "forced tiles" 200 "$out/configs_ab_run$run.log" python3 bench/configs_ab.py "$run" \
    3000x5000x2000:256x152 3000x5000x2000:256x160 3000x5000x2000:128x232 \
    3000x5000x2000:128x256 4097x4104x4096:256x136 4097x4104x4096:128x208 \
    8192x8192x8192:256x160 8192x8192x8192:128x256
cp "$(result configs_ab)" "$out/" 2>/dev/null
run_step "gemm bench" 240 "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" --samples 10
cp "$(result gemm)" "$out/" 2>/dev/null
grep -i "geomean\|geometric" "$out/gemm_bench_run$run.log" >> "$log"
cat "$log"
