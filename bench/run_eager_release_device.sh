#!/usr/bin/env bash
# Issue #23: each stage released as soon as its own wgmma group completes (wait_group 0) against
# the example's one group in flight, on the tiles the tuner picks (bench/eager_release_ab.py,
# hot L2, beside cuBLAS).
#   bash bench/run_eager_release_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "eager release" 400 "$out/eager_release_ab_run$run.log" \
    python3 bench/eager_release_ab.py "$run"
cp "$(result eager_release_ab)" "$out/" 2>/dev/null
grep " us, " "$out/eager_release_ab_run$run.log" >> "$log"
cat "$log"
