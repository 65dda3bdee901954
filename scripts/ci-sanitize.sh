#!/usr/bin/env bash
# The sanitizer half of CI (the plain suite is `make test`). Which parts of
# the suite run here, and why, is in docs/testing.md; in short:
#   asan  a clang -O1 build with ASan + UBSan (no recovery: a finding fails
#         its test; LeakSanitizer on) and libFuzzer's coverage
#         instrumentation, of the in-process suites (common, pserver,
#         trainer, transpiler) and of `oar` with the suite that drives it
#         with users' input (cli_tests); not the multi-process e2e suite;
#   fuzz  scripts/fuzz.sh runs each fuzz target from that same build for a
#         fixed time from its committed seed corpus;
#   tsan  a ThreadSanitizer build of the concurrent parts (the rpc layer, the
#         pserver, its barrier and loops, the ParallelExecutor, the
#         collectives) and their tests, run against Debian's Abseil rebuilt
#         with TSan (scripts/build-tsan-absl.sh).
# Every build goes through ccache (cmake/ccache.cmake). Each part is timed.
#
#   bash scripts/ci-sanitize.sh [asan|fuzz|tsan|all]     (default all)
#   env: FUZZ_SECONDS (per target, default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/ci_util.sh

bash scripts/install-deps.sh sanitize
JOBS="$(nproc)"
part="${1:-all}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp"

# The test binaries each sanitizer runs (docs/testing.md says why these).
ASAN_TESTS=(common_tests pserver_tests trainer_tests transpiler_tests cli_tests)
TSAN_TESTS=(common_tests pserver_tests trainer_tests)

# The ASan+UBSan build that scripts/fuzz.sh also uses (same directory, same flags).
asan_build() {
  FUZZ_BUILD_ONLY=1 bash scripts/fuzz.sh
  cmake --build build-asan -j "$JOBS" --target "${ASAN_TESTS[@]}"
}

asan_suite() {
  # Sanitized code runs 2-5x slower: the bound per test is doubled. The
  # multi-process jobs (label cluster) are not built here, so GoogleTest's
  # placeholder for their binary (e2e_tests_NOT_BUILT) is left out too.
  (cd build-asan && ctest -j "$JOBS" --timeout 1200 --output-on-failure -LE 'gpu|cluster' -E '^e2e_tests_NOT_BUILT$')
}

tsan_build() {
  CC=clang CXX=clang++ cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1" -DOAR_SANITIZE=thread -DOAR_BUILD_BENCH=OFF -DOAR_WITH_CUDA=OFF \
    -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST >/dev/null
  cmake --build build-tsan -j "$JOBS" --target "${TSAN_TESTS[@]}"
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
  asan) timed "asan/ubsan build" asan_build; timed "asan/ubsan suite" asan_suite ;;
  fuzz) timed "fuzzing" bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}" ;;
  tsan) timed "tsan build" tsan_build; timed "tsan suite" tsan_suite ;;
  all)
    timed "asan/ubsan build" asan_build
    timed "asan/ubsan suite" asan_suite
    timed "fuzzing" bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
    timed "tsan build" tsan_build
    timed "tsan suite" tsan_suite
    ;;
  *) echo "usage: $0 [asan|fuzz|tsan|all]" >&2; exit 2 ;;
esac
