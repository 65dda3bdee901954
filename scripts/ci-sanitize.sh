#!/usr/bin/env bash
# The sanitizer half of CI (the plain suite is `make test`):
#   asan  one clang build with ASan + UBSan (no recovery: a finding fails its
#         test) and libFuzzer's coverage instrumentation, at -O1; the whole
#         suite runs in it (the e2e tests start its `oar`), then
#   fuzz  scripts/fuzz.sh runs each fuzz target from that same build for a
#         fixed time from its committed seed corpus;
#   tsan  a ThreadSanitizer build of the concurrent parts (the rpc layer, the
#         pserver, its barrier and loops, the ParallelExecutor, the
#         collectives, the AsyncExecutor) and their tests, run against
#         Debian's Abseil rebuilt with TSan (scripts/build-tsan-absl.sh).
# Each part prints how long it took.
#
#   bash scripts/ci-sanitize.sh [asan|fuzz|tsan|all]     (default all)
#   env: FUZZ_SECONDS (per target, default 60)
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh sanitize
JOBS="$(nproc)"
part="${1:-all}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp"

timed() {
  local name="$1"
  shift
  local t0=$SECONDS
  "$@"
  echo "ci-sanitize: $name took $((SECONDS - t0)) s"
}

# The ASan+UBSan build that scripts/fuzz.sh also uses (same directory, same flags).
asan_build() {
  FUZZ_BUILD_ONLY=1 bash scripts/fuzz.sh
  cmake --build build-asan -j "$JOBS"
}

asan_suite() {
  # Sanitized code runs 2-5x slower: the bound per test is doubled.
  (cd build-asan && ctest -j "$JOBS" --timeout 1200 --output-on-failure -LE gpu)
}

tsan_build() {
  CC=clang CXX=clang++ cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1" -DOAR_SANITIZE=thread -DOAR_BUILD_BENCH=OFF -DOAR_WITH_CUDA=OFF \
    -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST >/dev/null
  cmake --build build-tsan -j "$JOBS" --target common_tests pserver_tests trainer_tests
}

tsan_suite() {
  # Debian's Abseil rebuilt with TSan (same SONAMEs): absl::Mutex visible.
  local absl_lib
  absl_lib="$(bash scripts/build-tsan-absl.sh)"
  export LD_LIBRARY_PATH="$absl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  cd build-tsan
  # Excluded: AsyncExecutor's threads update the shared parameters without
  # locks by design (Hogwild, as Fluid's AsyncExecutor), so their races are
  # the algorithm, not a bug.
  ctest -j "$JOBS" --timeout 1200 --output-on-failure -L concurrent -E '^AsyncExecutorTest\.SeveralThreads'
  ctest -j "$JOBS" --timeout 1200 --output-on-failure \
    -R '^(RpcTest|HandlerPoolsTest|SerdeTest|ReadGateTest|StepJournalTest|GatedServerTest|MetricsServerTest|MultiSlotFeedTest|StreamTransportTest|Modes/StreamModeTest|Transports/ReplyReaderTest|ShmRingTest|StalledPeerTest|TcpWritableTest|WakeDebtsTest|BatchBarrierCountTest|LentRegionTest|SharedRegionTest|LentSendsTest)\.'
}

case "$part" in
  asan) timed "ASan+UBSan build" asan_build; timed "ASan+UBSan suite" asan_suite ;;
  fuzz) timed "fuzzing" bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}" ;;
  tsan) timed "TSan build" tsan_build; timed "TSan suite (concurrent parts)" tsan_suite ;;
  all)
    timed "ASan+UBSan build" asan_build
    timed "ASan+UBSan suite" asan_suite
    timed "fuzzing" bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
    timed "TSan build" tsan_build
    timed "TSan suite (concurrent parts)" tsan_suite
    ;;
  *) echo "usage: $0 [asan|fuzz|tsan|all]" >&2; exit 2 ;;
esac
