#!/usr/bin/env bash
# One call on a lent GPU machine (see docs/benchmarks.md, "GPU"): what is installed there, the
# CUDA tests, then benchmarks/gpu.py; logs and the JSON land in $OUT. The machine has torch,
# numpy, pyarrow, fsspec, xxhash and filelock; zstandard travels as a wheel in .whl/.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export PETASTREAM_BENCH_DATA=/tmp/bench-data
nvidia-smi -L
nproc
python3 -c "import sys, torch, numpy, pyarrow, fsspec, zstandard
print(sys.version.split()[0], 'torch', torch.__version__, 'numpy', numpy.__version__,
      'pyarrow', pyarrow.__version__, 'fsspec', fsspec.__version__, 'cuda', torch.cuda.is_available())"
# shellcheck disable=SC2086 # TESTS is a list of paths
timeout "${TEST_S:-200}" python3 -m pytest -q -p no:cacheprovider --timeout 120 \
    ${TESTS:-tests/test_gpu.py tests/test_torch_packing.py tests/test_torch_loader.py tests/test_torch_workers.py tests/test_lightning.py} \
    >"$OUT/tests.log" 2>&1
echo "tests: exit $?"
tail -n 25 "$OUT/tests.log"
timeout "${BENCH_S:-330}" python3 -m benchmarks.gpu --rows "${ROWS:-1000000}" \
    --workers "${WORKERS:-2,8}" --repeat "${REPEAT:-2}" --device "${DEVICE:-cuda}" \
    --batch "${BATCH:-1024}" --workloads "${WORKLOADS:-tabular,binary}" 2>&1 | tee "$OUT/bench-${BATCH:-1024}.log" | grep -v "^gpu/\|^benchmark "
echo "bench: exit $?"
cp bench-results/gpu.json "$OUT/gpu-${BATCH:-1024}.json" 2>/dev/null
tail -n 40 "$OUT/bench-${BATCH:-1024}.log"
