#!/usr/bin/env bash
# Builds Debian's own Abseil (the source package of the installed
# libabsl-dev, with Debian's patches and options) as shared libraries with
# ThreadSanitizer, for the TSan half of CI. Oar locks with absl::Mutex, which
# lives in libabsl_synchronization: uninstrumented, TSan cannot see it lock,
# and every access it guards looks like a race. The instrumented libraries
# keep Debian's SONAMEs, so with LD_LIBRARY_PATH pointing at them Oar and
# gRPC both use them. Cached per version; prints the library directory.
#
#   LD_LIBRARY_PATH=$(bash scripts/build-tsan-absl.sh) build-tsan/tests/pserver_tests
#   env: OAR_ABSL_TSAN (cache root, default /opt/oar-absl-tsan)
set -euo pipefail

version="$(dpkg-query -W -f='${source:Version}' libabsl-dev)"
root="${OAR_ABSL_TSAN:-/opt/oar-absl-tsan}/$version"
if [ -f "$root/done" ]; then
  echo "$root/lib"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The same archives the machine installs from, as deb-src (deb822 or
# one-line lists), in a private apt state so the system's is untouched.
mkdir -p "$work/parts" "$work/lists/partial"
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && sed 's/^Types: deb$/Types: deb-src/' "$f" >"$work/parts/$(basename "$f")"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] && sed -n 's/^deb /deb-src /p' "$f" >"$work/parts/$(basename "$f").list"
done
apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$work/parts" -o "Dir::State::Lists=$work/lists")
apt-get "${apt_opts[@]}" -qq update >&2
(cd "$work" && apt-get "${apt_opts[@]}" -qq source --download-only "abseil=$version" >&2 2>/dev/null) || {
  echo "build-tsan-absl: Debian's source of abseil $version could not be fetched" >&2
  exit 1
}
(cd "$work" && dpkg-source -x ./*.dsc src >/dev/null)
# Debian's configuration (debian/rules): C++17, shared; plus TSan.
CC=clang CXX=clang++ cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" >&2
cmake --build "$work/build" -j "$(nproc)" >&2
mkdir -p "$root/lib"
find "$work/build" -name 'libabsl_*.so.*' -exec cp -P {} "$root/lib/" \;
touch "$root/done"
echo "$root/lib"
