"""``strings="jagged"`` with spawned worker processes over datasets on S3 (a moto server on
loopback): torch's DataLoader workers started with ``multiprocessing_context="spawn"``, and
TensorFlow's decode processes (:mod:`petastream.pipeline.procpool`, fresh interpreters), over
MDS (zstd shards) and Parquet. Values and offsets are byte-exact against the objects form
read in threads, and a loader resumed from a mid-epoch ``state_dict`` hands out exactly the
rest of the epoch."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from petastream.mds.writer import write_mds

pytestmark = [pytest.mark.cloud, pytest.mark.timeout(180)]
N = 900


def _text(i: int) -> str:
    return "" if i % 7 == 0 else "é" * (i % 5) + f"v{i}"  # empty values, multi-byte UTF-8


def _blob(i: int) -> bytes:
    return b"" if i % 11 == 0 else bytes(range(i % 256))[: i % 40]


@pytest.fixture
def urls(s3_bucket):
    """``{"mds": url, "parquet": url}``: the same rows on S3 in both formats."""
    import s3fs

    mds = f"{s3_bucket}/mds"
    write_mds({"id": np.arange(N), "s": np.array([_text(i) for i in range(N)], dtype=object),
               "b": np.array([_blob(i) for i in range(N)], dtype=object)},
              mds, size_limit=8192, compression="zstd")
    fs = s3fs.S3FileSystem()
    for k, (lo, hi) in enumerate([(0, 400), (400, N)]):
        buf = io.BytesIO()
        ids = np.arange(lo, hi)
        pq.write_table(pa.table({"id": ids, "s": [_text(i) for i in ids],
                                 "b": pa.array([_blob(i) for i in ids], pa.binary())}), buf, row_group_size=150)
        fs.pipe(f"{s3_bucket.removeprefix('s3://')}/pq/part-{k}.parquet", buf.getvalue())
    return {"mds": mds, "parquet": f"{s3_bucket}/pq"}


def _source(urls, fmt):
    if fmt == "mds":
        return urls["mds"]
    from petastream.parquet import open_parquet

    return open_parquet(urls["parquet"])


def _expected(raw: list[bytes]) -> tuple[bytes, list[int]]:
    return b"".join(raw), np.concatenate([[0], np.cumsum([len(r) for r in raw])]).astype(int).tolist()


# -- torch: DataLoader worker processes, spawned -----------------------------------------------

def _torch_check(objects, jagged) -> None:
    from petastream.torch import JaggedBytes

    assert [b["id"].tolist() for b in objects] == [b["id"].tolist() for b in jagged]
    for o, j in zip(objects, jagged):
        for column in ("s", "b"):
            vals = j[column]
            assert isinstance(vals, JaggedBytes)
            raw = [v.encode() if isinstance(v, str) else v for v in o[column]]
            values, offsets = _expected(raw)
            assert vals.values.numpy().tobytes() == values
            assert vals.offsets.tolist() == offsets
            assert vals.tolist() == o[column]


@pytest.mark.torch
@pytest.mark.parametrize("fmt", ["mds", "parquet"])
def test_torch_spawned_workers_jagged_exact_and_resumed(urls, fmt):
    from petastream.torch import loader

    kw = dict(shuffle=True, seed=5)
    objects = list(loader(_source(urls, fmt), 64, worker_type="thread", **kw))
    assert sorted(int(i) for b in objects for i in b["id"]) == list(range(N))
    spawned = dict(worker_type="process", num_workers=2, multiprocessing_context="spawn", strings="jagged", **kw)
    first = loader(_source(urls, fmt), 64, **spawned)
    it = iter(first)
    head = [next(it) for _ in range(5)]
    state = first.state_dict()
    rest_of_first = list(it)
    _torch_check(objects, head + rest_of_first)
    resumed = loader(_source(urls, fmt), 64, **spawned)
    resumed.load_state_dict(state)
    _torch_check(objects[5:], list(resumed))


# -- TensorFlow: decode processes (fresh interpreters) -----------------------------------------

def _tf_rows(batches, column) -> list[bytes]:
    import tensorflow as tf

    out: list[bytes] = []
    for b in batches:
        col = b[column]
        if isinstance(col, tf.RaggedTensor):
            assert col.dtype == tf.uint8 and col.row_splits.dtype == tf.int64
            values, offsets = _expected([bytes(r) for r in col.numpy()])
            assert col.flat_values.numpy().tobytes() == values and col.row_splits.numpy().tolist() == offsets
            out += [bytes(r) for r in col.numpy()]
        else:
            out += list(col.numpy())
    return out


@pytest.mark.tf
@pytest.mark.parametrize("fmt", ["mds", "parquet"])
def test_tf_process_workers_jagged_exact_and_resumed(urls, fmt):
    from petastream.tf import TFLoader

    kw = dict(shuffle=True, seed=4)
    objects = list(TFLoader(_source(urls, fmt), 50, worker_type="thread", **kw))
    procs = dict(worker_type="process", num_workers=2, strings="jagged", batches_per_call=1, **kw)
    first = TFLoader(_source(urls, fmt), 50, **procs)
    it = iter(first)
    head = [next(it) for _ in range(4)]
    state = first.state_dict()
    jagged = head + list(it)
    assert [b["id"].numpy().tolist() for b in jagged] == [b["id"].numpy().tolist() for b in objects]
    for column in ("s", "b"):
        assert _tf_rows(jagged, column) == _tf_rows(objects, column)
    resumed = TFLoader(_source(urls, fmt), 50, **procs)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert [b["id"].numpy().tolist() for b in rest] == [b["id"].numpy().tolist() for b in objects[4:]]
    for column in ("s", "b"):
        assert _tf_rows(rest, column) == _tf_rows(objects[4:], column)


@pytest.mark.torch
def test_own_dataloader_with_spawned_workers_over_s3(urls):
    # A user's own DataLoader over MDSIterableDataset, its workers spawned: every row once, its
    # values and offsets exact.
    from torch.utils.data import DataLoader

    from petastream.torch import JaggedBytes, MDSIterableDataset

    ds = MDSIterableDataset(urls["mds"], 100, shuffle=True, seed=1, strings="jagged")
    rows: dict[int, tuple[bytes, bytes]] = {}
    for b in DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="spawn"):
        assert isinstance(b["s"], JaggedBytes) and isinstance(b["b"], JaggedBytes)
        for column in ("s", "b"):
            raw = [v.encode() if isinstance(v, str) else v for v in b[column].tolist()]
            values, offsets = _expected(raw)
            assert b[column].values.numpy().tobytes() == values and b[column].offsets.tolist() == offsets
        for i, s, blob in zip(b["id"].tolist(), b["s"].tolist(), b["b"].tolist()):
            assert i not in rows
            rows[i] = (s, blob)
    assert rows == {i: (_text(i), _blob(i)) for i in range(N)}
