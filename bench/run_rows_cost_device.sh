#!/usr/bin/env bash
# Issue #23: fitted tiles unclustered in the space (in clusters only where forced,
# ``in_clusters``), 192-row tiles at 1.05x a 128-row tile's wave cost (``ROWS_COST``), so that
# 4097x4104 and 3000x5000 tune 192x176 and 192x152 too. The forced configs' GPU tests, then the
# tuned GEMM benchmark from a cold cache, both types, beside cuBLAS and Triton.
#   bash bench/run_rows_cost_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "forced config tests" 220 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" \
    tests/test_gpu_gemm.py -k "each_kind or resident"
tail -3 "$out/gemm_tests_run$run.log" >> "$log"
run_step "gemm bench" 340 "$out/gemm_run$run.log" python3 bench/gemm.py "$run" --samples 10
cp "$(result gemm)" "$out/" 2>/dev/null
grep -i "geomean\|geometric" "$out/gemm_run$run.log" >> "$log"
cat "$log"
