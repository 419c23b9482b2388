#!/usr/bin/env bash
# Issue #23 on the H200 with the shape-fitted tiles (128-row tiles of any width to 240 in steps
# of 8, 192-row tiles of three consumers to 192): the GEMM GPU tests, then bench/gemm.py over
# every shape (tuned cold, both types). Run 110 also ran bench/configs_ab.py on the fitted tiles
# of the ragged and square shapes, with a longer space (192x184 and 192x200 since dropped).
#   bash bench/run_fitted_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "gemm tests" 320 "$out/gemm_tests_run$run.log" "${GPU_TESTS[@]}" tests/test_gpu_gemm.py
tail -3 "$out/gemm_tests_run$run.log" >> "$log"
run_step "gemm bench" 240 "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" --samples 10
cp "$(result gemm)" "$out/" 2>/dev/null
grep -i "geomean\|geometric" "$out/gemm_bench_run$run.log" >> "$log"
cat "$log"
