#!/usr/bin/env bash
# Rewrites docs/paddle-api-coverage.md and README.md's coverage line from
# what Oar does now (api_coverage_test replays every committed case).
#   scripts/api-coverage.sh             from the committed fixtures
#   scripts/api-coverage.sh --fixtures  first rewrite the fixtures with
#       PaddlePaddle 2.6.2 ($PYTHON, default python3, must import paddle)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --fixtures) "${PYTHON:-python3}" tests/paddle_fixtures/api_coverage.py ;;
  "") ;;
  -h|--help) sed -n 2,7p "$0"; exit 0 ;;
  *) echo "api-coverage.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
cmake --build build --target common_tests >/dev/null
OAR_WRITE_API_COVERAGE=1 build/tests/common_tests --gtest_filter='PaddleApiCoverage.*' | tail -3
grep -F "Paddle API coverage (docs/paddle-api-coverage.md)" README.md
