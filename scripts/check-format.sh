#!/usr/bin/env bash
# Checks that the C++ lines changed since a base commit follow .clang-format
# (clang-format-diff over `git diff -U0`). The base is the commit that
# formatted the whole tree (.ci/format-base), so every line written since is
# checked, and no line nobody touched fails for a newer clang-format.
#
#   bash scripts/check-format.sh          # check; prints the fix and exits 1
#   bash scripts/check-format.sh --fix    # rewrite those lines in place
#   bash scripts/check-format.sh --base REV
set -euo pipefail
cd "$(dirname "$0")/.."
base="$(cat .ci/format-base)"
fix=0
while [ $# -gt 0 ]; do
  case "$1" in
    --fix) fix=1 ;;
    --base) base="$2"; shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check-format: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
diff_tool="$(command -v clang-format-diff-14 || command -v clang-format-diff || true)"
if [ -z "$diff_tool" ]; then
  echo "check-format: clang-format-diff not found: install Debian's clang-format (scripts/install-deps.sh)" >&2
  exit 1
fi
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
  echo "check-format: base commit $base is not in this clone (a shallow clone? fetch more history)" >&2
  exit 1
fi
# Working-tree changes included, so a session sees its own lines before
# committing: tracked files against the base, new files whole.
changes="$(git diff -U0 --no-color "$base" -- '*.cc' '*.h' '*.cu')"
while IFS= read -r f; do
  [ -n "$f" ] || continue
  changes+=$'\n'"$(git diff --no-index -U0 --no-color /dev/null "$f" || true)"
done < <(git ls-files --others --exclude-standard -- '*.cc' '*.h' '*.cu')
binary="$(command -v clang-format-14 || command -v clang-format)"
if [ "$fix" = 1 ]; then
  printf '%s\n' "$changes" | "$diff_tool" -p1 -i -binary "$binary"
  exit 0
fi
out="$(printf '%s\n' "$changes" | "$diff_tool" -p1 -binary "$binary")"
if [ -n "$out" ]; then
  printf '%s\n' "$out"
  echo "check-format: the lines above, changed since $(git rev-parse --short "$base"), do not follow .clang-format;" \
       "bash scripts/check-format.sh --fix rewrites them" >&2
  exit 1
fi
echo "check-format: every C++ line changed since $(git rev-parse --short "$base") follows .clang-format"
