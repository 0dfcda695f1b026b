"""compat's InMemBatchedDataLoader against what Petastorm 0.13.1's did (probed with the real
package on a Parquet dataset of the same columns; the values asserted here are that record)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from petastream.compat.pytorch import InMemBatchedDataLoader
from petastream.compat.reader import make_batch_reader
from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError, PetastreamError
from petastream.mds.writer import write_mds

pytestmark = pytest.mark.torch
N = 50
# Petastorm's message, 20 spaces included (a line continuation inside its string literal).
REUSE = ("InMemBatchedDataLoader couldn't be used multiple times, please                    "
         "specify total number of epochs using num_epochs in constructor.")


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("inmem") / "ds")
    write_mds({"id": np.arange(N), "x": np.arange(N, dtype=np.float32) / 2, "flag": np.arange(N) % 2 == 0,
               "u16": np.arange(N, dtype=np.uint16), "name": np.array([f"n{i}" for i in range(N)], dtype=object)},
              path, size_limit=300)  # several shards
    return path


def _reader(url, **kwargs):
    return make_batch_reader(url, **{"num_epochs": 1, "shuffle_row_groups": False, "workers_count": 1, **kwargs})


def test_rows_are_loaded_and_the_reader_stopped_in_init(url):
    calls = []
    reader = _reader(url)
    assert not reader.stopped

    def transform(col):
        calls.append(col)
        return torch.as_tensor(col)

    loader = InMemBatchedDataLoader(reader, batch_size=16, transform_fn=transform, rows_capacity=35)
    assert reader.stopped  # Petastorm: stopped (and joined) by the constructor
    assert calls and all(isinstance(c, np.ndarray) for c in calls)
    with pytest.raises(RuntimeError, match="has stopped"):
        next(iter(reader))
    seen = len(calls)
    batches = list(loader)
    assert len(calls) == seen  # nothing read or transformed while iterating
    assert [len(b["id"]) for b in batches] == [16, 16, 3]
    assert torch.cat([b["id"] for b in batches]).tolist() == list(range(35))


def test_transform_fn_gets_numpy_columns_so_from_numpy_works(url):
    seen = {}

    def from_numpy(col):
        seen[col.dtype] = col.flags.writeable
        return torch.from_numpy(col)

    loader = InMemBatchedDataLoader(_reader(url), batch_size=20, transform_fn=from_numpy, rows_capacity=100)
    batches = list(loader)
    assert [len(b["id"]) for b in batches] == [20, 20, 10]
    # Petastorm's promotions happen before transform_fn: bool -> uint8, uint16 -> int32.
    assert set(seen) == {np.dtype("int64"), np.dtype("float32"), np.dtype("uint8"), np.dtype("int32")}
    assert all(seen.values())  # writable: from_numpy gives no "not writable" warning
    first = batches[0]
    assert first["id"].dtype == torch.int64 and first["x"].dtype == torch.float32
    assert first["flag"].dtype == torch.uint8 and first["flag"][:4].tolist() == [1, 0, 1, 0]
    assert first["u16"].dtype == torch.int32
    assert first["x"][:3].tolist() == [0.0, 0.5, 1.0]
    # Petastorm raises TypeError on a str column; here it is a list, not given to transform_fn.
    assert first["name"][:2] == ["n0", "n1"]


def test_columns_come_in_the_readers_order(url):
    reader = _reader(url)
    loader = InMemBatchedDataLoader(reader, batch_size=8, rows_capacity=8)
    assert list(next(iter(loader))) == list(reader.schema_fields)


def test_the_default_transform_gives_tensors(url):
    batch = next(iter(InMemBatchedDataLoader(_reader(url, schema_fields=["id"]), batch_size=4, rows_capacity=6)))
    assert isinstance(batch["id"], torch.Tensor) and batch["id"].tolist() == [0, 1, 2, 3]


def test_an_endless_reader_is_read_up_to_the_capacity(url):
    reader = _reader(url, num_epochs=None)
    loader = InMemBatchedDataLoader(reader, batch_size=32, rows_capacity=120)
    ids = [i for b in loader for i in b["id"].tolist()]
    assert len(ids) == 120 and reader.stopped
    assert ids[:N] == list(range(N)) and ids[N : 2 * N] == list(range(N))  # wrapped into epoch 2


def test_each_epoch_is_shuffled_with_seed_plus_epoch(url):
    loader = InMemBatchedDataLoader(_reader(url), batch_size=8, num_epochs=2, seed=3, shuffle=True,
                                    rows_capacity=12)
    # Petastorm 0.13.1 gave exactly these batches for 12 rows 0..11 loaded in order.
    assert [b["id"].tolist() for b in loader] == [[10, 9, 1, 6, 4, 11, 3, 7], [2, 0, 8, 5],
                                                 [10, 2, 3, 5, 1, 4, 11, 8], [0, 9, 7, 6]]


def test_a_second_iteration_raises_petastorms_error_when_it_starts(url):
    loader = InMemBatchedDataLoader(_reader(url), batch_size=16, rows_capacity=35)
    first = iter(loader)
    next(first)
    second = iter(loader)  # a generator: nothing happens until its first next()
    with pytest.raises(RuntimeError) as info:
        next(second)
    assert str(info.value) == REUSE
    assert [len(b["id"]) for b in first] == [16, 3]  # the first pass goes on
    with pytest.raises(RuntimeError) as info:
        next(iter(loader))
    assert str(info.value) == REUSE


def test_a_second_iteration_from_another_thread_raises_too(url):
    loader = InMemBatchedDataLoader(_reader(url), batch_size=16, rows_capacity=35)
    first = iter(loader)
    next(first)
    errors = []

    def second():
        try:
            next(iter(loader))
        except RuntimeError as e:
            errors.append(str(e))

    thread = threading.Thread(target=second)
    thread.start()
    thread.join()
    assert errors == [REUSE]


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"batch_size": None}, InvalidArgumentTypeError, r"batch_size must be an integer, got None \(NoneType\)"),
    ({"batch_size": 0}, InvalidArgumentError, r"batch_size must be >= 1 \(rows per batch\), got 0"),
    ({"num_epochs": None}, InvalidArgumentTypeError, "num_epochs must be an integer, got None"),
    ({"rows_capacity": 0}, InvalidArgumentError, r"rows_capacity must be >= 1 \(rows loaded into memory\)"),
    ({"transform_fn": "as_tensor"}, InvalidArgumentTypeError, "transform_fn must be callable"),
], ids=["batch_size-None", "batch_size-0", "num_epochs-None", "rows_capacity-0", "transform_fn-str"])
def test_nonsense_arguments_are_refused_before_reading(url, kwargs, error, match):
    # Petastorm read the rows first, then failed inside range() (TypeError for None, ValueError for 0).
    reader = _reader(url)
    with pytest.raises(error, match=match) as info:
        InMemBatchedDataLoader(reader, **kwargs)
    assert isinstance(info.value, PetastreamError)
    assert not reader.stopped  # nothing was read


def test_a_stopped_reader_is_refused(url):
    reader = _reader(url)
    reader.stop()
    with pytest.raises(RuntimeError, match="has stopped"):
        InMemBatchedDataLoader(reader)


def test_it_is_a_context_manager_that_leaves_the_rows(url):
    with InMemBatchedDataLoader(_reader(url), batch_size=25, rows_capacity=N) as loader:
        assert [len(b["id"]) for b in loader] == [25, 25]
