#!/usr/bin/env bash
# Issue #23: 64-row tiles in clusters of two along N multicasting their A tile, with the relay
# thread's releases (bench/share_a_ab.py, hot L2, beside cuBLAS and the tiles alone).
#   bash bench/run_share_a_device.sh "$OUT" RUN
source bench/device_env.sh "$@"
run_step "share A" 400 "$out/share_a_ab_run$run.log" python3 bench/share_a_ab.py "$run"
cp "$(result share_a_ab)" "$out/" 2>/dev/null
grep " us, " "$out/share_a_ab_run$run.log" >> "$log"
cat "$log"
