#!/usr/bin/env bash
# Installs every Debian package (and, through install-python-tools.sh, every
# pinned Python tool) that Oar's build, tests, benchmarks and demo need.
# Idempotent: packages already present are left alone, and apt is not touched
# at all when nothing is missing. Run as root (or with sudo available).
#
#   bash scripts/install-deps.sh            # build, tests, benchmarks, demo
#   bash scripts/install-deps.sh sanitize   # and clang with its sanitizer and
#                                           # libFuzzer runtimes (scripts/ci-sanitize.sh)
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ninja-build ccache
  protobuf-compiler libprotobuf-dev protobuf-compiler-grpc libgrpc++-dev
  libabsl-dev libboost-dev libssl-dev libopenblas-dev libeigen3-dev libxxhash-dev libzip-dev zlib1g-dev
  libgoogle-glog-dev libgflags-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist
  graphviz nlohmann-json3-dev python3-yaml python3-numpy
  prometheus libyaml-cpp-dev
  etcd-server
  python3-venv
  clang-format
)
if [ "${1:-}" = "sanitize" ]; then
  PACKAGES+=(clang libclang-rt-14-dev)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -ne 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
      echo "install-deps: missing packages (${missing[*]}) and not root; run as root" >&2
      exit 1
    fi
  fi
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python tools Debian does not package at a usable version (a venv of their own).
bash "$(dirname "$0")/install-python-tools.sh"
