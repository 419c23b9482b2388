# Sourced by the bench/run_*_device.sh scripts (on the GPU machine, from the project root) with
# their "$OUT" and RUN arguments: sets out, run and log (device_run$RUN.log in $OUT, opened with
# the GPU, its driver, clock and the date), the import path, parallel compile workers and the
# printed autotuning lines. JITTILE_CACHE_DIR defaults to a fresh folder per run (a cold cache).
set -u
out=${1:?output folder}
run=${2:?run number}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 JITTILE_AUTOTUNE_JOBS=${JITTILE_AUTOTUNE_JOBS:-16}
export JITTILE_CACHE_DIR=${JITTILE_CACHE_DIR:-/tmp/jittile-device-cache-$run}
export JITTILE_PRINT_AUTOTUNING=1
log="$out/device_run$run.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nproc; date -u; } > "$log" 2>&1
