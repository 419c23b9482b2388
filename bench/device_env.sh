# Sourced by the bench/run_*_device.sh scripts (on the GPU machine, from the project root) with
# their "$OUT" and RUN arguments: sets out, run and log (device_run$RUN.log in $OUT, opened with
# the GPU, its driver, clock and the date, after what a script before wrote there), the import
# path, parallel compile workers and the printed autotuning lines. JITTILE_CACHE_DIR defaults to
# a fresh folder per run (a cold cache).
set -u
out=${1:?output folder}
run=${2:?run number}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 JITTILE_AUTOTUNE_JOBS=${JITTILE_AUTOTUNE_JOBS:-16}
export JITTILE_CACHE_DIR=${JITTILE_CACHE_DIR:-/tmp/jittile-device-cache-$run}
export JITTILE_PRINT_AUTOTUNING=1
log="$out/device_run$run.log"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; nproc; date -u; } \
  >> "$log" 2>&1

# run_step NAME SECONDS OUTPUT COMMAND...: COMMAND under a timeout, its output into OUTPUT (the
# log itself when OUTPUT is "$log"), then "NAME rc=STATUS TIME" into the log.
run_step() {
  local name=$1 seconds=$2 output=$3
  shift 3
  if [ "$output" = "$log" ]; then
    timeout "$seconds" "$@" >> "$log" 2>&1
  else
    timeout "$seconds" "$@" > "$output" 2>&1
  fi
  echo "$name rc=$? $(date -u +%T)" >> "$log"
}

# result NAME: the file a benchmark writes for this run, bench/results/NAME_runRUN.json (RUN in
# two digits at least, as bench/common.py names it).
result() { printf "bench/results/%s_run%02d.json" "$1" "$run"; }

GPU_TESTS=(python3 -m pytest -m gpu -q -p no:cacheprovider -rf --tb=short)

# profile NAME M N K BM BN SPLIT [CLUSTER]: Nsight Compute on one tuned-kernel config (its 4th
# launch, bench/gemm_one_config.py), then on cuBLAS's next two kernels of the same operands.
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
  --section LaunchStats --section SchedulerStats --section ComputeWorkloadAnalysis
  --section SourceCounters)
profile() {
  local name=$1
  shift
  run_step "ncu $name jittile" 90 "$out/ncu_${name}_run$run.log" ncu --clock-control none \
    -k regex:gemm_bf16_tuned --launch-skip 3 --launch-count 1 "${sections[@]}" \
    python3 bench/gemm_one_config.py "$@"
  run_step "ncu $name cublas" 60 "$out/ncu_${name}_cublas_run$run.log" ncu --clock-control none \
    -k 'regex:^(?!jittile).*(gemm|nvjet|gemv|xmma|splitK|cutlass)' --launch-skip 2 --launch-count 2 "${sections[@]}" \
    python3 bench/gemm_one_config.py "$@"
}

# gemm_bench_on_h200 SECONDS [ARGS...]: on an H200 only (the acceptance card), every GEMM shape
# of both types (or those ARGS of bench/gemm.py choose) tuned cold, its results file into $OUT
# and its geomeans into the log.
gemm_bench_on_h200() {
  nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || return 0
  run_step "gemm bench" "$1" "$out/gemm_bench_run$run.log" python3 bench/gemm.py "$run" \
    --samples 10 "${@:2}"
  cp "$(result gemm)" "$out/" 2>> "$log"
  grep -i "geomean" "$out/gemm_bench_run$run.log" >> "$log"
}
