"""compat's TransformSpec hands the torch loaders writable arrays of their own.

pandas' copy-on-write (always on from pandas 3, an option in 2.x) makes ``to_numpy()`` return
read-only views of the frame, and torch warns "The given NumPy array is not writable" on them,
once per worker process and epoch. Under pandas 2 without copy-on-write the arrays are writable
(pandas copies a read-only array put into a frame); the decoded MDS columns a transform starts
from are writable too (memory-mapped shards included).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from petastream.compat.transform import TransformSpec, edit_field, transform_batch

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")


def _copy_on_write() -> contextlib.AbstractContextManager:
    if int(pd.__version__.split(".")[0]) >= 3:
        return contextlib.nullcontext()  # always on (and the option is deprecated)
    return pd.option_context("mode.copy_on_write", True)


def _alias_and_read_only(df: pd.DataFrame) -> pd.DataFrame:
    df["y"] = df["x"]  # under copy-on-write: the same memory as x until one of them is written
    df["ro"] = np.frombuffer(np.arange(len(df), dtype=np.float64).tobytes())  # read-only memory
    return df


SPEC = TransformSpec(_alias_and_read_only, edit_fields=[edit_field("y", np.float32, (), False),
                                                        edit_field("ro", np.float64, (), False)])


@pytest.mark.parametrize("copy_on_write", [True, False], ids=["copy-on-write", "default"])
def test_transformed_columns_are_writable_and_share_no_memory(copy_on_write):
    batch = {"id": np.arange(6), "x": np.arange(6, dtype=np.float32), "v": np.ones((6, 2), np.float32)}
    with _copy_on_write() if copy_on_write else contextlib.nullcontext():
        out = transform_batch(SPEC, batch)
    assert list(out) == ["id", "x", "v", "y", "ro"]
    assert all(col.flags.writeable for col in out.values()), {k: c.flags.writeable for k, c in out.items()}
    assert not np.shares_memory(out["x"], out["y"])  # writing one tensor must not change the other
    assert out["y"].tolist() == list(range(6)) and out["ro"].tolist() == list(range(6))
    assert out["v"].shape == (6, 2)


_SCRIPT = """
import sys
import numpy as np
import pandas as pd
if int(pd.__version__.split(".")[0]) < 3:
    pd.set_option("mode.copy_on_write", True)  # at import: DataLoader workers re-run it if spawned


def double(df):
    df["x"] = df["x"] * 2
    return df


if __name__ == "__main__":
    import torch
    from petastream.compat import TransformSpec, make_batch_reader
    from petastream.compat.pytorch import BatchedDataLoader, DataLoader, InMemBatchedDataLoader
    from petastream.mds.writer import write_mds

    path = sys.argv[1]
    write_mds({"id": np.arange(200), "x": np.arange(200, dtype=np.float32)}, path, size_limit=1000,
              compression=None)  # memory-mapped shards
    for pool in ("thread", "process"):
        for cls in (DataLoader, BatchedDataLoader):
            reader = make_batch_reader(path, num_epochs=1, reader_pool_type=pool, workers_count=2,
                                       transform_spec=TransformSpec(double))
            loader = cls(reader, batch_size=32)
            for _ in range(2):  # two epochs: new worker processes each
                assert sorted(int(i) for b in loader for i in b["id"]) == list(range(200))
    reader = make_batch_reader(path, num_epochs=1, transform_spec=TransformSpec(double))
    loader = InMemBatchedDataLoader(reader, batch_size=50, transform_fn=torch.from_numpy, rows_capacity=200)
    assert sorted(int(x) for b in loader for x in b["x"]) == list(range(0, 400, 2))
    print("done")
"""


@pytest.mark.torch
def test_loaders_with_a_transform_spec_do_not_warn_about_read_only_arrays(tmp_path):
    # A fresh interpreter: torch gives this warning once per process, so an earlier test in
    # this one could have used it up.
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(_SCRIPT))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, str(script), str(tmp_path / "ds")], capture_output=True, text=True,
                         env=env, timeout=600)
    assert res.returncode == 0 and res.stdout.strip() == "done", res.stderr
    assert "not writable" not in res.stderr, res.stderr
