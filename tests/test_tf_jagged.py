"""str/bytes columns as uint8 RaggedTensors (``strings="jagged"``) in the TensorFlow loader: the
same bytes as the ``tf.string`` form, from MDS and Parquet, threads and processes, resumption."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tensorflow as tf

from petastream.errors import InvalidArgumentError
from petastream.parquet import open_parquet
from petastream.tf import TFLoader
from tests.jagged_data import text as _text
from tests.jagged_data import write_mds_rows, write_parquet_rows

pytestmark = pytest.mark.tf
N = 700


@pytest.fixture(scope="module")
def mds_url(tmp_path_factory):
    return write_mds_rows(tmp_path_factory.mktemp("tf-jagged") / "mds", N, size_limit=4096)


@pytest.fixture(scope="module")
def parquet_path(tmp_path_factory):
    return write_parquet_rows(tmp_path_factory.mktemp("tf-jagged") / "p.parquet", N, row_group_size=200)


def _rows(batches, column):
    out = []
    for b in batches:
        col = b[column]
        if isinstance(col, tf.RaggedTensor):
            assert col.dtype == tf.uint8 and col.row_splits.dtype == tf.int64
            out += [bytes(r) for r in col.numpy()]  # a row of the ragged tensor: its bytes
        else:
            out += list(col.numpy())
    return out


@pytest.mark.parametrize("fmt", ["mds", "parquet"])
def test_ragged_bytes_equal_the_string_form(mds_url, parquet_path, fmt):
    src = (lambda: mds_url) if fmt == "mds" else (lambda: open_parquet(parquet_path))
    kw = dict(shuffle=True, seed=2, worker_type="thread")
    objects = list(TFLoader(src(), 64, **kw))
    jagged = list(TFLoader(src(), 64, strings="jagged", **kw))
    assert [b["id"].numpy().tolist() for b in objects] == [b["id"].numpy().tolist() for b in jagged]
    assert len(jagged[-1]["id"]) == N % 64  # the last, partial batch
    for column in ("s", "b"):
        assert _rows(jagged, column) == _rows(objects, column)
    row_splits = jagged[0]["s"].row_splits.numpy()
    assert row_splits[0] == 0 and len(row_splits) == 65
    assert [v.decode() for v in _rows(jagged[:1], "s")] == [_text(int(i)) for i in jagged[0]["id"].numpy()]


def test_per_column_processes_and_resume(mds_url):
    kw = dict(shuffle=True, seed=4, strings={"b": "jagged"})
    threads = list(TFLoader(mds_url, 50, worker_type="thread", **kw))
    assert threads[0]["s"].dtype == tf.string and isinstance(threads[0]["b"], tf.RaggedTensor)
    procs = list(TFLoader(mds_url, 50, worker_type="process", num_workers=2, **kw))
    assert _rows(procs, "b") == _rows(threads, "b") and _rows(procs, "s") == _rows(threads, "s")
    only = list(TFLoader(mds_url, 50, worker_type="process", num_workers=2, shuffle=True, seed=4, strings="jagged"))
    assert _rows(only, "s") == _rows(threads, "s")

    first = TFLoader(mds_url, 50, worker_type="thread", batches_per_call=1, strings="jagged", shuffle=True, seed=4)
    it = iter(first)
    for _ in range(3):
        next(it)
    resumed = TFLoader(mds_url, 50, worker_type="thread", strings="jagged", shuffle=True, seed=4)
    resumed.load_state_dict(first.state_dict())
    assert _rows(list(resumed), "b") == _rows(threads[3:], "b")


def test_transform_output_and_nulls(mds_url, tmp_path):
    def tag(batch):
        return {**batch, "s": np.array([v + "!" for v in batch["s"]], dtype=object)}

    batch = next(iter(TFLoader(mds_url, 8, transform=tag, strings="jagged", worker_type="thread")))
    assert [bytes(r).decode() for r in batch["s"].numpy()] == [_text(i) + "!" for i in range(8)]

    path = tmp_path / "n.parquet"
    pq.write_table(pa.table({"s": ["a", None]}), path)
    with pytest.raises(InvalidArgumentError, match=r"columns \['s'\]: null_policy='rows' keeps their nulls"):
        TFLoader(open_parquet(str(path), null_policy="rows"), 8, strings="jagged")
    filled = next(iter(TFLoader(open_parquet(str(path), null_policy="fill"), 8, strings="jagged",
                                worker_type="thread")))
    assert [bytes(r) for r in filled["s"].numpy()] == [b"a", b""]


def test_output_signature_declares_bytes_as_ragged_uint8(mds_url):
    sig = {"id": tf.TensorSpec((None,), tf.int64), "s": tf.RaggedTensorSpec((None, None), tf.uint8)}
    batch = next(iter(TFLoader(mds_url, 16, columns=["id", "s"], output_signature=sig, worker_type="thread")))
    assert [bytes(r).decode() for r in batch["s"].numpy()] == [_text(i) for i in range(16)]


def test_numpy_text_arrays_from_transform(mds_url):
    def fixed(batch):
        return {"id": batch["id"], "s": np.array([f"x{i}" for i in batch["id"]]),  # '<U..' array
                "b": np.array([b"y" * (int(i) % 3) for i in batch["id"]], dtype="S")}

    batch = next(iter(TFLoader(mds_url, 6, transform=fixed, strings="jagged", worker_type="thread")))
    assert [bytes(r).decode() for r in batch["s"].numpy()] == [f"x{i}" for i in range(6)]
    assert [bytes(r) for r in batch["b"].numpy()] == [b"y" * (i % 3) for i in range(6)]
