#!/usr/bin/env bash
# Issue #24 on the H200: the conditional rescaling's threshold against its accuracy. This build
# against BASELINE (examples/attention_fwd.py with another RESCALE_LOG2, carried as an untracked
# file), bench/attention_ab.py over the D=128, D=64 and D=256 shapes, cuDNN and flash samples
# interleaved, every output's max error against float32.
#   bash bench/run_rescale_device.sh "$OUT" RUN BASELINE
baseline=${3:?baseline attention_fwd.py}
source bench/device_env.sh "$1" "$2"
run_step "attention a/b" 400 "$out/rescale_bench_run$run.log" \
  python3 bench/attention_ab.py "$run" "$baseline" 128 64 256
grep "causal=" "$out/rescale_bench_run$run.log" >> "$log"
cp "$(result attention_ab)" "$out/" 2>/dev/null
cat "$log"
