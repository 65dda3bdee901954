#!/usr/bin/env bash
# Installs the Python tools the tests need that Debian does not package at a
# usable version, into a virtual environment of their own (never the system
# Python): kubernetes-validate, which checks manifests against the
# Kubernetes API schemas offline (its wheel carries the schemas). Pinned, so
# every machine validates against the same schemas. Idempotent: nothing is
# fetched when the pinned version is already there.
#
#   OAR_PY_TOOLS=/opt/oar-py-tools bash scripts/install-python-tools.sh
set -euo pipefail

VENV="${OAR_PY_TOOLS:-/opt/oar-py-tools}"
PINNED=(kubernetes-validate==1.37.0)

if [ -x "$VENV/bin/python3" ] && "$VENV/bin/python3" -c '
import sys, importlib.metadata as m
sys.exit(0 if m.version("kubernetes-validate") == "1.37.0" else 1)' 2>/dev/null; then
  exit 0
fi
echo "install-python-tools: creating $VENV with ${PINNED[*]}"
python3 -m venv "$VENV"
"$VENV/bin/python3" -m pip install -q --disable-pip-version-check "${PINNED[@]}"
