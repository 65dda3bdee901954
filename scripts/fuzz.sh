#!/usr/bin/env bash
# Runs each libFuzzer target for a fixed time from its committed seed corpus
# (tests/fuzz/corpus/<target>), in a clang build with ASan+UBSan and the
# fuzzer's instrumentation, and fails on the first finding, leaving the input
# that crashed in $ARTIFACTS and printing how to replay it. New inputs the
# fuzzer finds go to a scratch corpus, never into the tree.
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET]      (default 60)
#   env: FUZZ_BUILD_DIR (build-asan: the same build scripts/ci-sanitize.sh runs
#        the ASan+UBSan suite in), ARTIFACTS (FUZZ_BUILD_DIR/findings),
#        FUZZ_BUILD_ONLY=1 (configure and build, run nothing)
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET="${1:-60}"
BUILD="${FUZZ_BUILD_DIR:-build-asan}"
ARTIFACTS="${ARTIFACTS:-$BUILD/findings}"
TARGETS=(var_message program_desc pserver_request)

CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1" -DOAR_SANITIZE=address,undefined -DOAR_FUZZ=ON \
  -DOAR_BUILD_BENCH=OFF -DOAR_WITH_CUDA=OFF -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]/%/_fuzzer}"
[ -n "${FUZZ_BUILD_ONLY:-}" ] && exit 0

mkdir -p "$ARTIFACTS"
status=0
for t in "${TARGETS[@]}"; do
  scratch="$BUILD/corpus/$t"
  mkdir -p "$scratch"
  echo "fuzz: $t for ${SECONDS_PER_TARGET}s"
  if ! "$BUILD/tests/fuzz/${t}_fuzzer" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=4096 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$ARTIFACTS/$t-" \
      "$scratch" "tests/fuzz/corpus/$t" 2>"$BUILD/fuzz-$t.log"; then
    tail -60 "$BUILD/fuzz-$t.log" >&2
    echo "fuzz: $t found a failure; its input is in $ARTIFACTS ($t-*). Replay it with" \
         "$BUILD/tests/fuzz/${t}_fuzzer FILE, fix it, and commit the input under tests/fuzz/regressions/$t/" >&2
    status=1
  else
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$BUILD/fuzz-$t.log" | tr '\n' ' '
    echo
  fi
done
exit $status
