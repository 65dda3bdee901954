# Sourced by .ci/run and scripts/ci-sanitize.sh: `timed NAME CMD...` runs CMD,
# prints how long it took, and appends "NAME<TAB>SECONDS" to $OAR_CI_TIMES
# (when set) for the summary .ci/run prints at its end. A failing CMD fails
# the caller (set -e) after its line is printed.
timed() {
  local name="$1"
  shift
  local t0=$SECONDS rc=0
  "$@" || rc=$?
  local took=$((SECONDS - t0))
  echo "ci: $name took $took s$([ $rc -eq 0 ] || echo " (failed, exit $rc)")"
  if [ -n "${OAR_CI_TIMES:-}" ]; then
    printf '%s\t%d%s\n' "$name" "$took" "$([ $rc -eq 0 ] || echo ' FAILED')" >>"$OAR_CI_TIMES"
  fi
  return $rc
}
