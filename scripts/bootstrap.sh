#!/usr/bin/env bash
# Create (or refresh) the project virtual environment in .venv, idempotently.
# Everything is pinned by constraints.txt; torch==2.13.0 is the local CPU wheel (any other pin
# downloads a multi-GB CUDA build). Re-runs are no-ops until pyproject.toml or constraints.txt change.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
stamp="$VENV/.petastream-stamp"
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/python" ]; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -c constraints.txt -e ".[dev]"
echo "$want" > "$stamp"
