#!/usr/bin/env bash
# Issues #23/#24 on the H200 after matrix descriptors became 32-bit words (jittile.ir's
# DescriptorWord) and the consumers' warpgroup index a warp-uniform broadcast: the wgmma, GEMM
# and attention GPU tests, then bench/uniform_ab.py (the uniform index against the per-thread
# one, with cuBLAS) over its default tile specs.
#   bash bench/run_uniform_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "wgmma+gemm gpu tests" 280 "$out/gemm_tests_run$run.log" \
  "${GPU_TESTS[@]}" tests/test_gpu_wgmma.py tests/test_gpu_gemm.py
tail -3 "$out/gemm_tests_run$run.log" >> "$log"
run_step "attention gpu tests" 220 "$out/attention_tests_run$run.log" \
  "${GPU_TESTS[@]}" tests/test_gpu_attention.py
tail -3 "$out/attention_tests_run$run.log" >> "$log"
run_step "uniform a/b" 200 "$out/uniform_ab_run$run.log" python3 bench/uniform_ab.py "$run"
grep "index\|cuBLAS" "$out/uniform_ab_run$run.log" >> "$log"
cp "$(result uniform_ab)" "$out/" 2>/dev/null
cat "$log"
