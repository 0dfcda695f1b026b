#!/usr/bin/env bash
# Build a peer's benchmark environment: benchmarks/envs/build.sh petastorm|mosaic|litdata [...]
#
# Creates .bench/envs/<peer> with `python3.11 -m venv` (override: PYTHON=...), installs
# <peer>.txt with dependencies, then <peer>.nodeps.txt with --no-deps (packages whose declared
# requirements would make pip resolve a torch of its own: only torch==2.13.0, the local CPU
# wheel, may ever be installed), then copies stubs/<peer>/ into site-packages, then imports
# what the peer runner needs. Idempotent: a finished env carries a stamp (hash of its inputs);
# a rerun with unchanged inputs does nothing, a changed or half-built env is rebuilt from scratch.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
envs=${PETASTREAM_BENCH_ENVS:-$root/.bench/envs}
python=${PYTHON:-python3.11}

declare -A CHECK=(
  [petastorm]="import petastorm, petastorm.spark, pyspark, pyarrow, torch, tensorflow; assert pyarrow.__version__.startswith('14.')"
  [mosaic]="import streaming, torch; from streaming import StreamingDataset"
  [litdata]="import litdata, torch, boto3; from litdata import StreamingDataset, StreamingDataLoader, optimize"
)

pip_install() {  # quiet pip; drops the noise of this machine's file:// extra indexes
  "$env/bin/python" -m pip install -q "$@" 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; }
}

build() {
  local peer=$1 env=$envs/$1
  local reqs=$here/$peer.txt nodeps=$here/$peer.nodeps.txt stubs=$here/stubs/$peer
  if [[ ! -f $reqs ]]; then
    echo "build.sh: unknown peer '$peer'; valid: ${!CHECK[*]}" >&2
    return 2
  fi
  local stamp
  stamp=$( { cat "$reqs" "$nodeps" 2>/dev/null; [[ -d $stubs ]] && find "$stubs" -type f -name '*.py' -print0 | sort -z | xargs -0 cat; echo "$python ${CHECK[$peer]}"; } | sha256sum | cut -d' ' -f1)
  if [[ -f $env/.built && $(cat "$env/.built") == "$stamp" ]]; then
    echo "build.sh: $peer env is up to date ($env)"
    return 0
  fi
  command -v "$python" >/dev/null || { echo "build.sh: $python not found (set PYTHON=...)" >&2; return 1; }
  local t0=$SECONDS
  echo "build.sh: building $peer env in $env"
  rm -rf "$env"
  mkdir -p "$envs"
  "$python" -m venv "$env"
  pip_install -r "$reqs"
  if [[ -f $nodeps ]]; then pip_install --no-deps -r "$nodeps"; fi
  if [[ -d $stubs ]]; then
    local site
    site=$("$env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    cp -r "$stubs"/. "$site"/
  fi
  "$env/bin/python" -c "${CHECK[$peer]}"
  "$env/bin/python" -m pip freeze > "$env/freeze.txt"
  echo "$stamp" > "$env/.built"
  echo "build.sh: $peer env built in $((SECONDS - t0)) s (pip freeze: $env/freeze.txt)"
}

[[ $# -gt 0 ]] || set -- petastorm mosaic
for peer in "$@"; do build "$peer"; done  # not `build || ...`: that would switch off set -e inside
