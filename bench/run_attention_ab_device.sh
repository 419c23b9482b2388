#!/usr/bin/env bash
# Issue #24 on the H200: this build of examples/attention_fwd.py against BASELINE (an earlier
# version of the file, carried as an untracked file: `git show REV:examples/attention_fwd.py >
# ab/base.py`), with the attention GPU tests first unless TESTS is "no", then
# bench/attention_ab.py over the shapes of the head dimensions D (default 128 64 256), cuDNN and
# flash samples interleaved, every output's max error against float32.
#   bash bench/run_attention_ab_device.sh "$OUT" RUN BASELINE [TESTS [D ...]]
baseline=${3:?baseline attention_fwd.py}
tests=${4:-yes}
source bench/device_env.sh "$1" "$2"
shift $(($# < 4 ? $# : 4))
[ $# -gt 0 ] || set -- 128 64 256
if [ "$tests" != no ]; then
  run_step "attention gpu tests" 240 "$out/attention_tests_run$run.log" \
    "${GPU_TESTS[@]}" tests/test_gpu_attention.py
  tail -3 "$out/attention_tests_run$run.log" >> "$log"
fi
run_step "attention a/b" 400 "$out/attention_ab_run$run.log" \
  python3 bench/attention_ab.py "$run" "$baseline" "$@"
grep "causal=" "$out/attention_ab_run$run.log" >> "$log"
cp "$(result attention_ab)" "$out/" 2>/dev/null
cat "$log"
