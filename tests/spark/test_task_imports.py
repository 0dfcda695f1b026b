"""A materialization task does not import pandas into its Python worker.

pyarrow imports pandas at the first ``to_numpy``/``pa.array``/``pa.scalar`` of a process:
0.4-0.5 s of CPU per Spark Python worker of a fresh session, paid before the task reads its
first batch (see petastream.mds.arrow_numpy); and a task of fixed-size columns only does not
import ``pyarrow.compute`` either (0.1 s). The task here runs in a fresh interpreter, as a
worker would, on a 'tabular' batch (int64, fixed-length float arrays, int32, variable-length
arrays, booleans) and a 'binary' one (bytes and strings beside them).
"""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys, numpy as np, pyarrow as pa
from petastream.spark._task import TaskWriter
from petastream.spark.schema import ColumnPlan

def arr(t, values):  # from buffers: pa.array itself would import pandas
    return pa.Array.from_buffers(t, len(values), [None, pa.py_buffer(np.asarray(values))])

def lists(t, flat, offsets):
    return pa.ListArray.from_arrays(arr(pa.int32(), np.asarray(offsets, np.int32)), arr(t, flat))

def strings(t, items):
    offsets = np.cumsum([0] + [len(x) for x in items]).astype(np.int32)
    return pa.Array.from_buffers(t, len(items), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(items))])

n = 4
batch = pa.RecordBatch.from_arrays([
    arr(pa.int64(), np.arange(n, dtype=np.int64)),
    lists(pa.float32(), np.ones(2 * n, np.float32), np.arange(0, 2 * n + 1, 2)),
    arr(pa.int32(), np.arange(n, dtype=np.int32)),
    lists(pa.float64(), np.ones(6, np.float64), [0, 1, 3, 4, 6]),
    pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(np.array([0b0101], np.uint8))]),
    strings(pa.binary(), [b"x" * 7, b"", b"yz", b"w"]),
    strings(pa.string(), [b"a", b"bc", b"", b"d"]),
], names=[f"_c{i}" for i in range(7)])
plans = [ColumnPlan("id", "int64", "plain"),
         ColumnPlan("f", "ndarray:float32", "list_auto", None, "float32", "array<float>"),
         ColumnPlan("label", "int32", "plain"),
         ColumnPlan("v", "ndarray:float64", "list_auto", None, "float64", "array<double>"),
         ColumnPlan("flag", "uint8", "plain"),
         ColumnPlan("payload", "bytes", "plain"), ColumnPlan("name", "str", "plain")]
fixed = TaskWriter(sys.argv[1] + "-fixed", plans[:3], compression=None, hashes=["xxh3_64"],
                   size_limit=None, fill=False, storage_options=None)
list(fixed(iter([pa.RecordBatch.from_arrays(batch.columns[:3], names=batch.schema.names[:3])])))
# all fixed-size (the 'tabular' case): not even pyarrow.compute (0.1 s per fresh worker)
assert "pyarrow.compute" not in sys.modules, "the fixed-size task imported pyarrow.compute"
w = TaskWriter(sys.argv[1], plans, compression=None, hashes=["xxh3_64"], size_limit=None,
               fill=False, storage_options=None)
[row] = list(w(iter([batch, batch])))
assert "pandas" not in sys.modules, "the task imported pandas"
got = row.to_pydict()
assert got["samples"] == [8] and got["shards"] == [1] and got["failure"] == [""], got
print(got["encodings"][0])
"""


def test_a_task_writes_without_importing_pandas(tmp_path):
    out = subprocess.run([sys.executable, "-c", CODE, str(tmp_path / "attempt")], check=True,
                         capture_output=True, text=True).stdout
    assert '"f": "ndarray:float32:2"' in out and '"v": "ndarray:float64"' in out


def test_the_result_row_has_the_declared_schema(tmp_path):
    import pyarrow as pa

    from petastream.spark._task import RESULT_SCHEMA, TaskWriter
    from petastream.spark.schema import ColumnPlan

    w = TaskWriter(str(tmp_path / "a"), [ColumnPlan("id", "int64", "plain")], compression=None,
                   hashes=[], size_limit=None, fill=False, storage_options=None)
    [row] = list(w(iter([pa.RecordBatch.from_pydict({"id": pa.array([1, 2], pa.int64())})])))
    declared = [part.strip().split(" ") for part in RESULT_SCHEMA.split(",")]
    names = {"int": pa.int32(), "long": pa.int64(), "string": pa.string(), "double": pa.float64()}
    assert [(f.name, f.type) for f in row.schema] == [(n, names[t]) for n, t in declared]
    assert row.to_pydict()["samples"] == [2]
