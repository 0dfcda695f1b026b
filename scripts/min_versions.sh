#!/usr/bin/env bash
# The minimum-versions run (make test-min; CI): the declared lower bounds, installed exactly
# (constraints-min.txt), run the core, MDS, Parquet, CLI and classic Spark tests. Two environments:
#   .venv-min        numpy 1.x + the oldest pyarrow, pandas, pyspark, tqdm, ... of every extra
#   .venv-min-np2    numpy 2.0 + pyarrow 16.0 (the oldest pyarrow built for numpy 2), core only
# No torch or TensorFlow here (an old torch is a multi-GB download): their tests run in .venv.
# Each environment is rebuilt only when pyproject.toml, constraints-min.txt or this file change.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
NUMPY2_PINS=(numpy==2.0.0 pyarrow==16.0.0)
CORE_TESTS=(tests/mds tests/stream tests/test_import.py tests/pipeline/test_decode.py tests/test_cli.py
            tests/pipeline/test_arena.py tests/pipeline/test_processes.py tests/test_sources.py
            tests/parquet --ignore=tests/parquet/test_loaders.py --ignore=tests/parquet/test_spark.py)
PYTEST=(-q -p no:cacheprovider -m "not cloud" --timeout 900)

build() {  # build VENV CONSTRAINTS EXTRAS
  local venv=$1 constraints=$2 extras=$3 stamp want
  stamp="$venv/.petastream-stamp"
  want=$(cat pyproject.toml "$constraints" "$0" | sha256sum | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/python" ]; then
    return 0
  fi
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  # pip refuses if a pin here contradicts a declared bound: that is the first check.
  "$venv/bin/python" -m pip install --quiet -c "$constraints" -e ".[$extras]" \
    pytest pytest-timeout
  echo "$want" > "$stamp"
}

start=$SECONDS
build .venv-min constraints-min.txt "pyspark,compression,images,migrate"
np2=$(mktemp)
trap 'rm -f "$np2"' EXIT
{ grep -v -E '^(numpy|pyarrow)==' constraints-min.txt; printf '%s\n' "${NUMPY2_PINS[@]}"; } > "$np2"
build .venv-min-np2 "$np2" "compression,images"
echo "min-versions: environments ready in $((SECONDS - start)) s"

versions() { "$1/bin/python" -c 'import numpy, pyarrow; print("numpy", numpy.__version__, "pyarrow", pyarrow.__version__)'; }
echo "min-versions [$(versions .venv-min)]: core, MDS, CLI and classic Spark tests"
.venv-min/bin/python -m pytest "${PYTEST[@]}" "${CORE_TESTS[@]}" tests/spark
echo "min-versions [$(versions .venv-min-np2)]: core, MDS and CLI tests"
.venv-min-np2/bin/python -m pytest "${PYTEST[@]}" "${CORE_TESTS[@]}"
echo "min-versions: done in $((SECONDS - start)) s"
