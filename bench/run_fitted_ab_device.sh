#!/usr/bin/env bash
# Issue #23 on the H200: bench/fitted_ab.py (the fitted tiles' four stages and one epilogue
# buffer per consumer against three stages and two).
#   bash bench/run_fitted_ab_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "fitted a/b" 300 "$out/fitted_ab_run$run.log" python3 bench/fitted_ab.py "$run"
cp "$(result fitted_ab)" "$out/" 2>/dev/null
grep " us, " "$out/fitted_ab_run$run.log" >> "$log"
cat "$log"
