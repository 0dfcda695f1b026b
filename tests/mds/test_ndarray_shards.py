"""Issue #29.7: ``ndarray`` columns whose rank or dtype differs from shard to shard.

A shard of 1-D arrays of one dtype decodes to a ``Ragged``; a shard with other ranks (or mixed
dtypes) to an object array of arrays. A read across shards must give every sample's array back
as written (Mosaic does), never crash on the mix nor promote int32 and uint8 to one type.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import petastream
from petastream.columns.ragged import Ragged
from petastream.mds.writer import MDSWriter
from tests.conftest import FIXTURES
from tests.mds.fixture_values import load_expected, to_value

MOSAIC = os.path.join(FIXTURES, "ndarray-mixed-shards")  # written by Mosaic's MDSWriter


def _assert_same_array(got, want, where) -> None:
    assert isinstance(got, np.ndarray), (where, type(got))
    assert got.dtype == want.dtype and got.shape == want.shape, (where, got.dtype, got.shape, want.dtype,
                                                                   want.shape)
    np.testing.assert_array_equal(got, want, err_msg=str(where))


def _assert_rows(block: dict, expected: list[dict], ids: np.ndarray, columns: list[str]) -> None:
    for col in columns:
        assert len(block[col]) == len(ids)
        for k, i in enumerate(ids):
            _assert_same_array(block[col][k], expected[int(i)][col], (col, int(i)))


# -- Mosaic-written ----------------------------------------------------------------------------

def _mosaic_rows() -> list[dict]:
    return [{k: to_value(v) for k, v in s.items()} for s in load_expected("ndarray-mixed-shards")["samples"]]


ARRAY_COLUMNS = ["dyn", "f16", "i32", "u8"]


def test_mosaic_fixture_shards_really_differ():
    """The fixture is what the tests below need: per shard, one kind; across shards, several."""
    ds = petastream.open(MOSAIC)
    kinds = [type(ds.read_shard(s)["dyn"]).__name__ for s in range(ds.num_shards)]
    assert kinds.count("Ragged") >= 2 and kinds.count("ndarray") >= 2, kinds
    dtypes = {ds.read_shard(s)["dyn"].dtype for s in range(ds.num_shards) if kinds[s] == "Ragged"}
    assert len(dtypes) >= 2, dtypes


@pytest.mark.parametrize("order", ["sequential", "shuffled"])
def test_mosaic_fixture_reads_across_shards_as_written(order):
    ds = petastream.open(MOSAIC)
    rows = _mosaic_rows()
    ids = np.arange(len(ds))
    if order == "shuffled":
        rng = np.random.default_rng(3)
        ids = np.concatenate([rng.permutation(len(ds)), rng.integers(0, len(ds), 4)])
    got = ds.read(ids)
    _assert_rows(got, rows, ids, ARRAY_COLUMNS)
    assert [int(v) for v in got["id"]] == [int(i) for i in ids]


def test_mosaic_fixture_one_column_across_two_shards():
    """columns= and two shards only (a Ragged int32 shard beside a Ragged uint8 one)."""
    ds = petastream.open(MOSAIC)
    ids = np.array([3, 0, 2, 1])
    _assert_rows(ds.read(ids, columns=["dyn"]), _mosaic_rows(), ids, ["dyn"])


# -- written here -------------------------------------------------------------------------------

def _write_by_shard(path: str, encoding: str, shards: list[list[np.ndarray]]) -> list[dict]:
    """One shard per inner list (``flush`` cuts them); returns the rows in order."""
    rows = []
    with MDSWriter(columns={"a": encoding, "id": "int"}, out=path, size_limit=None) as w:
        for arrays in shards:
            for a in arrays:
                rows.append({"a": a, "id": len(rows)})
                w.write(rows[-1])
            w.flush()
    return rows


def _ranks(dtype: str) -> list[list[np.ndarray]]:
    """1-D shards (a Ragged each) around shards of 2-D and 3-D arrays of varying shapes."""
    def a(*shape):
        return (np.arange(int(np.prod(shape))) % 100).astype(dtype).reshape(shape)
    return [[a(3), a(1), a(4)], [a(2, 3), a(1, 5)], [a(2)], [a(2, 2, 2), a(3)], [a(6), a(2)]]


@pytest.mark.parametrize("encoding", ["ndarray", "ndarray:int32", "ndarray:uint8", "ndarray:float16"])
def test_variable_ranks_across_shards_read_back_as_written(tmp_path, encoding):
    dtype = encoding.split(":")[1] if ":" in encoding else "float32"
    path = str(tmp_path / "ds")
    rows = _write_by_shard(path, encoding, _ranks(dtype))
    ds = petastream.open(path)
    assert ds.num_shards == 5
    assert isinstance(ds.read_shard(0)["a"], Ragged)
    ids = np.random.default_rng(1).permutation(len(rows))
    _assert_rows(ds.read(ids), rows, ids, ["a"])
    _assert_rows(ds.read(np.arange(len(rows))), rows, np.arange(len(rows)), ["a"])
    for i in range(len(rows)):  # per sample, Mosaic's path, agrees
        _assert_same_array(ds[i]["a"], rows[i]["a"], i)


def test_untyped_dtypes_across_shards_are_not_promoted(tmp_path):
    """int32 beside uint8 used to come back as int32 for all, int64 beside float32 as float64."""
    path = str(tmp_path / "ds")
    shards = [[np.array([1, -2, 3], np.int32), np.array([4], np.int32)],
              [np.array([250, 7], np.uint8)],
              [np.array([2**40, 5], np.int64)],
              [np.array([0.5, 1.25], np.float32), np.array([3.0], np.float32)]]
    rows = _write_by_shard(path, "ndarray", shards)
    ds = petastream.open(path)
    assert all(isinstance(ds.read_shard(s)["a"], Ragged) for s in range(ds.num_shards))
    ids = np.array([5, 0, 2, 3, 1, 4, 2])
    got = ds.read(ids)
    _assert_rows(got, rows, ids, ["a"])
    assert [got["a"][k].dtype.name for k in range(len(ids))] == [
        "float32", "int32", "uint8", "int64", "int32", "float32", "uint8"]


def test_ragged_parts_of_one_dtype_stay_ragged(tmp_path):
    """The fast path is kept where it holds: 1-D arrays of one dtype in every shard."""
    path = str(tmp_path / "ds")
    rows = _write_by_shard(path, "ndarray", [[np.arange(3, dtype=np.int16)], [np.arange(5, dtype=np.int16)]])
    got = petastream.open(path).read(np.array([1, 0]))
    assert isinstance(got["a"], Ragged) and got["a"].dtype == np.int16
    _assert_rows(got, rows, np.array([1, 0]), ["a"])


@pytest.mark.torch
@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_torch_loader_gives_each_array_as_a_tensor(tmp_path, worker_type):
    torch = pytest.importorskip("torch")
    from petastream.torch import loader

    path = str(tmp_path / "ds")
    rows = _write_by_shard(path, "ndarray", [[np.arange(3, dtype=np.int32)] * 3,
                                             [np.ones((2, 2), np.float32)] * 3,
                                             [np.arange(2, dtype=np.uint8)] * 3])
    seen = 0
    for batch in loader(path, 4, shuffle=True, seed=2, num_workers=2, worker_type=worker_type):
        assert isinstance(batch["a"], list)
        for i, t in zip(batch["id"].tolist(), batch["a"]):
            want = torch.from_numpy(rows[i]["a"])
            assert isinstance(t, torch.Tensor) and t.dtype == want.dtype and t.shape == want.shape
            assert torch.equal(t, want)
            seen += 1
    assert seen == len(rows)
