#!/usr/bin/env bash
# Issue #24 on the H200 after the 32-bit ring positions and masks and the softmax's block
# boundary (FlashAttention-3's intra-warpgroup overlap in the SASS): the attention GPU tests, then
# bench/attention_ab.py over the D=128, D=64 and D=256 shapes, this build against BASELINE
# (examples/attention_fwd.py before the change, carried as an untracked file), cuDNN and flash
# samples interleaved.
#   bash bench/run_overlap_device.sh "$OUT" RUN BASELINE
baseline=${3:?baseline attention_fwd.py}
source bench/device_env.sh "$1" "$2"
run_step "attention gpu tests" 200 "$out/overlap_tests_run$run.log" \
  "${GPU_TESTS[@]}" tests/test_gpu_attention.py
tail -3 "$out/overlap_tests_run$run.log" >> "$log"
run_step "attention a/b" 330 "$out/overlap_bench_run$run.log" \
  python3 bench/attention_ab.py "$run" "$baseline" 128 64 256
grep "causal=" "$out/overlap_bench_run$run.log" >> "$log"
cp "$(result attention_ab)" "$out/" 2>/dev/null
cat "$log"
