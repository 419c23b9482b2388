#!/usr/bin/env bash
# Issue #23 on the H200: the attention GPU tests (unless TESTS is "no"), then
# bench/inflight_ab.py (the bf16 consumers' wgmma groups in flight: 1, 2, 3, and cuBLAS) over its
# default tile specs or the SPEC arguments.
#   bash bench/run_inflight_device.sh "$OUT" RUN [TESTS [SPEC ...]]
tests=${3:-yes}
source bench/device_env.sh "$1" "$2"
shift $(($# < 3 ? $# : 3))
if [ "$tests" != no ]; then
  run_step "attention gpu tests" 240 "$out/attention_tests_run$run.log" \
    "${GPU_TESTS[@]}" tests/test_gpu_attention.py
  tail -3 "$out/attention_tests_run$run.log" >> "$log"
fi
run_step "inflight a/b" 400 "$out/inflight_ab_run$run.log" python3 bench/inflight_ab.py "$run" "$@"
grep "in flight\|cuBLAS" "$out/inflight_ab_run$run.log" >> "$log"
cp "$(result inflight_ab)" "$out/" 2>/dev/null
cat "$log"
