#!/usr/bin/env bash
# Issue #24 on the H200 after D=128's default key block became 128 rows without the causal mask
# too (FlashAttention-3's 176 kept as a build): bench/attention.py at D=128 (the default, 176-row
# blocks and turn-taking off, beside torch SDPA's cuDNN and flash backends).
#   bash bench/run_key_rows_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "attention bench" 200 "$out/attention_bench_run$run.log" python3 bench/attention.py "$run" 128
cp "$(result attention)" "$out/" 2>/dev/null
grep -i "causal\|TFLOP" "$out/attention_bench_run$run.log" | head -40 >> "$log"
cat "$log"
