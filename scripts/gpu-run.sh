#!/usr/bin/env bash
# On a machine with a GPU: unpacks .gpu/ (scripts/gpu-bundle.sh), points the
# loader at its libraries and at the machine's own CUDA, cuDNN and NCCL,
# then runs the gpu-labelled tests and gpu_bench. Logs go to OUT_DIR
# (default /tmp/oar-gpu): gpu_tests.log, gpu_bench.log, env.log.
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
tar xzf .gpu/libs.tgz -C "$w/lib" && tar xzf .gpu/bins.tgz -C "$w/bin" || { echo "gpu-run: no .gpu/ bundle" >&2; exit 1; }
dirs=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libcudnn.so.9 libnccl.so.2; do
  f=$(find /usr/local /usr/lib /opt /lib -name "$lib" 2>/dev/null | head -1)
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
rc=0
if [[ $what != --bench-only ]]; then
  "$w/bin/gpu_tests" --gtest_filter="$filter" 2>&1 | tee "$out/gpu_tests.log"
  rc=${PIPESTATUS[0]}
fi
if [[ $what != --tests-only ]]; then
  "$w/bin/gpu_bench" 2>&1 | tee "$out/gpu_bench.log"
fi
exit "$rc"
