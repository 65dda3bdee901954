#!/usr/bin/env bash
# Packs what a machine with a GPU but without this project's build
# dependencies needs to run the GPU tests and gpu_bench of this build:
# the binaries (oar, gpu_tests, gpu_bench) and the shared libraries they
# load that a stock CUDA image lacks (gRPC, protobuf, Abseil, OpenBLAS,
# glog, gflags, ...), into .gpu/, which git ignores. CUDA's own libraries
# (cudart, cuBLAS, cuRAND, cuDNN, NCCL) are not packed: the GPU machine's
# are used. --with-data adds Fashion-MNIST (30 MB) for the training tests.
#
#   make build && scripts/gpu-bundle.sh [--with-data]
#   # then, on the GPU machine, from a copy of this tree with .gpu/ in it:
#   scripts/gpu-run.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD_DIR:-build}
DATA=${OAR_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
bins=("$BUILD/cli/oar" "$BUILD/tests/gpu_tests" "$BUILD/bench/gpu_bench")
for b in "${bins[@]}"; do
  [[ -x $b ]] || { echo "gpu-bundle: $b is missing: build with CUDA first (make build)" >&2; exit 1; }
done
rm -rf .gpu
mkdir -p .gpu
# Every library the loader resolves, less glibc, the compiler's runtime
# (the GPU machine's are newer) and CUDA's.
ldd "${bins[@]}" | awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+)\.so' |
  grep -v -E '/lib(cuda|cudart|cublas|cublasLt|curand|cudnn[a-z_]*|nccl)\.so' > .gpu/libs.txt
sed 's#^/##' .gpu/libs.txt | tar -C / -cJhf .gpu/libs.txz --transform 's#.*/##' -T -
tar cJf .gpu/bins.txz --transform 's#.*/##' "${bins[@]}"
if [[ ${1:-} == --with-data ]]; then
  mkdir -p .gpu/data
  cp "$DATA"/*.gz .gpu/data/
fi
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >> "$exclude"
echo "gpu-bundle: $(du -sh .gpu | cut -f1) in .gpu/ ($(wc -l < .gpu/libs.txt) libraries)"
