#!/usr/bin/env bash
# On a machine with a GPU: unpacks .gpu/ (scripts/gpu-bundle.sh), points the
# loader at its libraries and at the machine's own CUDA, cuDNN and NCCL,
# then runs the gpu-labelled tests and gpu_bench. Logs go to OUT_DIR
# (default /tmp/oar-gpu): env.log, gpu_tests.log, gpu_bench.log,
# profile.log (Fluid's profiler table of one epoch of fashion_mlp and
# fashion_cnn on the GPU, with --with-data) and summary.log (one line per
# test suite: passed, FAILED, TIMED OUT or CRASHED, and gpu_bench's exit).
#
# Each test suite runs in a process of its own under a time limit, so a
# crash or a hang in one still leaves the others' results; the whole run
# stops starting suites at OAR_GPU_DEADLINE_S seconds (default 500, inside
# the device tool's 600-second command) and gpu_bench gets what is left,
# at most 150 seconds. With a gtest filter the matching tests run in one
# process. OAR_GPU_SUITE_S caps one suite (default 240).
#
#   scripts/gpu-run.sh OUT_DIR [--tests-only|--bench-only] [gtest filter]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/oar-gpu}
what=${2:-all}
filter=${3:-*}
mkdir -p "$out"
w=/tmp/oar-gpu-bundle
rm -rf "$w" && mkdir -p "$w/lib" "$w/bin"
unpack() {  # ARCHIVE DIR: xz-compressed tar; Python's tarfile where there is no xz
  [[ -f $1 ]] || return 1
  if command -v xz >/dev/null; then tar xJf "$1" -C "$2"
  else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"; fi
}
unpack .gpu/libs.txz "$w/lib" && unpack .gpu/bins.txz "$w/bin" || { echo "gpu-run: no .gpu/ bundle (scripts/gpu-bundle.sh)" >&2; exit 1; }
dirs=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libcudnn.so.9 libnccl.so.2; do
  f=$(find /usr/local /usr/lib /opt /lib -name "$lib" -print -quit 2>/dev/null)
  if [[ -z $f ]]; then echo "gpu-run: $lib not found on this machine"; continue; fi
  d=$(dirname "$f")
  case ":$dirs:" in *":$d:"*) ;; *) dirs="$dirs:$d" ;; esac
done
export LD_LIBRARY_PATH="$w/lib$dirs"
export OAR_BINARY="$w/bin/oar"
[[ -d .gpu/data ]] && export OAR_FASHION_MNIST_DIR="$PWD/.gpu/data"
[[ -d tests/testdata ]] && export OAR_TESTDATA_DIR="$PWD/tests/testdata"  # the Paddle-written fixtures
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ldd "$w/bin/gpu_tests" | grep -E "not found|cudnn|cublas|nccl|cudart" || true
} 2>&1 | tee "$out/env.log"
deadline=${OAR_GPU_DEADLINE_S:-500}  # from the script's start (SECONDS counts from 0)
: > "$out/summary.log"
: > "$out/gpu_tests.log"
verdict() {  # exit status of a timed run -> a word
  case $1 in
    # 137 is SIGKILL: timeout's -k after its TERM, or the kernel's OOM killer.
    0) echo passed ;; 1) echo FAILED ;; 124|137) echo "TIMED OUT" ;; *) echo "CRASHED (exit $1)" ;;
  esac
}
rc=0
# One process under `timeout`: its output to gpu_tests.log, its verdict to summary.log.
run_tests() {  # NAME LIMIT_S GTEST_FILTER
  local r
  timeout -k 10 "$2" "$w/bin/gpu_tests" --gtest_filter="$3" 2>&1 | tee -a "$out/gpu_tests.log"
  r=${PIPESTATUS[0]}
  (( r != 0 )) && rc=1
  echo "$1: $(verdict "$r")" | tee -a "$out/summary.log"
}
if [[ $what != --bench-only ]]; then
  if [[ $filter != "*" ]]; then
    run_tests "$filter" $((deadline - SECONDS > 20 ? deadline - SECONDS : 20)) "$filter"
  else
    # A gpu_tests that cannot start (a library missing) lists nothing: that is a failure, not an empty pass.
    suites=$("$w/bin/gpu_tests" --gtest_list_tests 2>&1 | awk '!/^ / && $1 ~ /\.$/ {sub(/\.$/, "", $1); print $1}')
    if [[ -z $suites ]]; then
      "$w/bin/gpu_tests" --gtest_list_tests 2>&1 | tail -5 | tee -a "$out/gpu_tests.log"
      echo "gpu_tests: CRASHED (cannot list its tests)" | tee -a "$out/summary.log"
      rc=1
    fi
    # Whole training jobs last: a slow one then cannot starve the kernel suites.
    suites="$(grep -v -x 'GpuTrainTest' <<<"$suites") $(grep -x 'GpuTrainTest' <<<"$suites")"
    for suite in $suites; do
      left=$((deadline - SECONDS))
      if (( left < 20 )); then echo "$suite: NOT RUN (deadline)" | tee -a "$out/summary.log"; rc=1; continue; fi
      cap=${OAR_GPU_SUITE_S:-240}
      run_tests "$suite" $(( left < cap ? left : cap )) "$suite.*"
    done
  fi
fi
if [[ $what != --tests-only ]]; then
  left=$((deadline + 40 - SECONDS))
  (( left > 150 )) && left=150
  if (( left < 20 )); then
    echo "gpu_bench: NOT RUN (deadline)" | tee -a "$out/summary.log"
  else
    timeout -k 10 "$left" "$w/bin/gpu_bench" 2>&1 | tee "$out/gpu_bench.log"
    echo "gpu_bench: $(verdict "${PIPESTATUS[0]}")" | tee -a "$out/summary.log"
  fi
fi
# Where a training step's time goes on the GPU: Fluid's profiler table of
# one epoch of each bundled model (host time per op, which on a GPU is its
# launch and any copies), into profile.log.
if [[ $what == all && -d .gpu/data ]] && (( deadline + 60 - SECONDS > 30 )); then
  for model in fashion_mlp fashion_cnn; do
    timeout -k 5 60 "$w/bin/oar" train --model "$model" --device gpu --epochs 1 --profile \
      --data_dir "$OAR_FASHION_MNIST_DIR" 2>&1 |
      grep -v '\[=*>* *\]' >> "$out/profile.log"
  done
  echo "profile: $(grep -c '^trained' "$out/profile.log") of 2 models" | tee -a "$out/summary.log"
fi
echo "--- summary ---"
cat "$out/summary.log"
exit "$rc"
