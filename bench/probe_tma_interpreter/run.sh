#!/usr/bin/env bash
# Builds and runs the TMA probes whose measurements jittile/interpreter/tma.py and
# tests/test_interpreter_tma.py follow (tf32 rounding, NaN fill, swizzle off the period,
# misaligned shared addresses, out-of-bounds stores and reductions). Usage on the H200:
#   bash bench/probe_tma_interpreter/run.sh > bench/results/probe_tma_interpreter.log
set -u
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
for probe in probe probe2 probe3; do
  nvcc -arch=sm_90a -O2 -o "$work/$probe" "$here/$probe.cu" -lcuda || exit 1
done
for mode in 0 1 2 3 4; do echo "== probe $mode"; "$work/probe" "$mode"; done
for mode in 0 1 2 3 4 5 6 7 8 9; do echo "== probe2 $mode"; "$work/probe2" "$mode"; done
echo "== probe3"; "$work/probe3"
