# Shell helpers for the CI scripts; sourced by .ci/run and
# scripts/ci-sanitize.sh.
# `timed NAME CMD...` runs CMD,
# prints how long it took, and appends "NAME<TAB>SECONDS" to $OAR_CI_TIMES
# (when set) for the summary .ci/run prints at its end. CMD runs in a
# subshell (a `cd` or `export` in it stays there); it fails at its first
# failing step, and then `timed` returns its status after the line is printed
# (which stops a caller running under set -e).
timed() {
  local name="$1"
  shift
  local t0=$SECONDS rc=0
  # In a subshell of its own with errexit on: a command behind `||` would run
  # with errexit off, and a function's failing first step would go unnoticed.
  set +e
  (set -e; "$@")
  rc=$?
  set -e
  local took=$((SECONDS - t0))
  echo "ci: $name took $took s$([ $rc -eq 0 ] || echo " (failed, exit $rc)")"
  if [ -n "${OAR_CI_TIMES:-}" ]; then
    printf '%s\t%d%s\n' "$name" "$took" "$([ $rc -eq 0 ] || echo ' FAILED')" >>"$OAR_CI_TIMES"
  fi
  return $rc
}
