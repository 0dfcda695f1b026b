"""str/bytes columns as JaggedBytes (``strings="jagged"``): the same values as the objects form,
from MDS and Parquet, through threads, processes, packing, pinning and resumption."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError
from petastream.parquet import open_parquet
from petastream.torch import JaggedBytes, loader
from petastream.torch._convert import to_jagged, to_pinned_tensors, to_tensors
from petastream.torch._packing import pack, to_device
from tests.jagged_data import blob as _blob
from tests.jagged_data import text as _text
from tests.jagged_data import write_mds_rows, write_parquet_rows

pytestmark = pytest.mark.torch
N = 1500


@pytest.fixture(scope="module")
def mds_url(tmp_path_factory):
    return write_mds_rows(tmp_path_factory.mktemp("jagged") / "mds", N, size_limit=8192,
                          extra={"x": np.arange(N, dtype=np.float32)})


@pytest.fixture(scope="module")
def parquet_path(tmp_path_factory):
    return write_parquet_rows(tmp_path_factory.mktemp("jagged") / "p.parquet", N, row_group_size=400,
                              extra={"x": np.arange(N, dtype=np.float32)})


def _pairs(batches, column):
    return [(b["id"].tolist(), b[column]) for b in batches]


def _assert_same(objects, jagged, column):
    assert len(objects) == len(jagged)
    for (ids_o, vals_o), (ids_j, vals_j) in zip(_pairs(objects, column), _pairs(jagged, column)):
        assert ids_o == ids_j
        assert isinstance(vals_j, JaggedBytes) and len(vals_j) == len(vals_o)
        assert vals_j.values.dtype == torch.uint8 and vals_j.offsets.dtype == torch.int64
        # values and offsets are exactly the objects' bytes and their cumulative lengths
        raw = [v.encode() if isinstance(v, str) else v for v in vals_o]
        assert vals_j.values.numpy().tobytes() == b"".join(raw)
        assert vals_j.offsets.tolist() == np.concatenate([[0], np.cumsum([len(r) for r in raw])]).tolist()
        assert vals_j.tolist() == vals_o  # the round trip gives the objects form back
        assert [vals_j[i] for i in range(len(vals_j))] == vals_o


@pytest.mark.parametrize("fmt", ["mds", "parquet"])
@pytest.mark.parametrize("column", ["s", "b"])
def test_jagged_equals_objects(mds_url, parquet_path, fmt, column):
    src = (lambda: mds_url) if fmt == "mds" else (lambda: open_parquet(parquet_path))
    kw = dict(shuffle=True, seed=3, num_workers=2)  # 1500 rows: a short last batch of 1500 % 64
    objects = list(loader(src(), 64, **kw))
    jagged = list(loader(src(), 64, strings="jagged", **kw))
    assert len(objects[-1]["id"]) == N % 64
    _assert_same(objects, jagged, column)


def test_per_column_choice_and_source_left_as_is(mds_url):
    from petastream.mds.dataset import MDSDataset

    ds = MDSDataset(mds_url)
    batch = next(iter(loader(ds, 32, strings={"b": "jagged"})))
    assert isinstance(batch["b"], JaggedBytes) and isinstance(batch["s"], list)
    assert ds.strings == "objects"  # the loader read through a copy
    view = ds.with_strings("ragged")
    assert view.store is ds.store and view.strings == "ragged"  # a view: not reopened
    assert isinstance(ds.read(np.arange(3), ["s"])["s"][0], str)


def test_a_transform_sees_objects(mds_url):
    seen = []

    def upper(batch):
        seen.append(type(batch["s"][0]))
        return {**batch, "s": np.array([v.upper() for v in batch["s"]], dtype=object)}

    batch = next(iter(loader(mds_url, 16, transform=upper, strings="jagged")))
    assert seen[0] is str and batch["s"].tolist() == [_text(i).upper() for i in range(16)]


def test_processes_and_resume(mds_url):
    kw = dict(shuffle=True, seed=9, strings="jagged")
    whole = list(loader(mds_url, 100, **kw))
    procs = list(loader(mds_url, 100, worker_type="process", num_workers=2, **kw))
    for a, b in zip(whole, procs):
        assert a["id"].tolist() == b["id"].tolist() and a["s"].tolist() == b["s"].tolist()
        assert torch.equal(a["b"].values, b["b"].values) and torch.equal(a["b"].offsets, b["b"].offsets)
    first = loader(mds_url, 100, **kw)
    it = iter(first)
    for _ in range(4):
        next(it)
    state = first.state_dict()
    resumed = loader(mds_url, 100, **kw)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert [b["s"].tolist() for b in rest] == [b["s"].tolist() for b in whole[4:]]


def test_empty_batches_and_values():
    empty = to_jagged("s", np.empty(0, dtype=object), "str")
    assert len(empty) == 0 and empty.offsets.tolist() == [0] and empty.tolist() == []
    blanks = to_jagged("b", np.array([b"", b"", b"x"], dtype=object), "bytes")
    assert blanks.offsets.tolist() == [0, 0, 0, 1] and blanks.tolist() == [b"", b"", b"x"]
    assert blanks[-1] == b"x"
    with pytest.raises(IndexError):
        blanks[3]


def test_none_values_refused_naming_the_column():
    with pytest.raises(InvalidArgumentError, match=r"column 's': 1 None value\(s\).*strings='objects'"):
        to_jagged("s", np.array(["a", None], dtype=object), "str")
    with pytest.raises(InvalidArgumentTypeError, match="column 'b': strings='jagged' takes bytes values"):
        to_jagged("b", np.array([1, 2], dtype=object), "bytes")


def test_parquet_view_shares_the_row_groups(parquet_path):
    src = open_parquet(parquet_path)
    view = src.with_strings("ragged")
    assert view.store is src.store and view.row_groups is src.row_groups
    assert view.strings == "ragged" and src.strings == "objects"
    assert isinstance(src.read(np.arange(3), ["s"])["s"][0], str)
    assert view.read(np.arange(3), ["s"])["s"].values.dtype == np.uint8


def test_parquet_nulls(tmp_path):
    path = tmp_path / "n.parquet"
    pq.write_table(pa.table({"s": ["a", None, "ccc"], "b": pa.array([b"x", None, b""], pa.binary())}), path)
    with pytest.raises(InvalidArgumentError, match=r"columns \['b', 's'\]: null_policy='rows' keeps their nulls"):
        loader(open_parquet(str(path), null_policy="rows"), 8, strings="jagged")
    with pytest.raises(InvalidArgumentError, match=r"columns \['b'\]: null_policy='petastorm'"):
        loader(open_parquet(str(path), null_policy="petastorm"), 8, strings="jagged")
    batch = next(iter(loader(open_parquet(str(path), null_policy="fill"), 8, strings="jagged")))
    objects = next(iter(loader(open_parquet(str(path), null_policy="fill"), 8)))
    assert batch["s"].tolist() == objects["s"] == ["a", "", "ccc"]  # a null is an empty value, as objects
    assert batch["b"].tolist() == objects["b"] == [b"x", b"", b""]


def test_bad_arguments(mds_url):
    with pytest.raises(InvalidArgumentError, match=r"strings='buffer': use one of \('objects', 'jagged'\)"):
        loader(mds_url, 8, strings="buffer")
    with pytest.raises(InvalidArgumentError, match="column 'x' is 'float32', not str or bytes"):
        loader(mds_url, 8, strings={"x": "jagged"})
    with pytest.raises(InvalidArgumentError, match="strings names column 'nope', which is not read"):
        loader(mds_url, 8, strings={"nope": "jagged"})
    with pytest.raises(InvalidArgumentError, match="a convert of your own gets the numpy columns"):
        loader(mds_url, 8, strings="jagged", convert=None)


def test_packed_block_and_device_copy_on_cpu(mds_url):
    """The CUDA path's packing (one block for numeric and jagged columns) with a pageable block,
    then the device stage's copy and views, on the CPU."""
    from petastream.mds.dataset import MDSDataset

    ds = MDSDataset(mds_url).with_strings("ragged")
    batch = ds.read(np.arange(40, 80), ["id", "s", "b", "x"])
    jagged = {"s": "str", "b": "bytes"}
    packed = pack(batch, lambda n: torch.empty(n, dtype=torch.uint8), jagged)
    out, owners = to_device(packed, torch.device("cpu"), False)
    assert len(owners) == 1 and list(out) == ["id", "s", "b", "x"]
    assert out["s"].tolist() == [_text(i) for i in range(40, 80)]
    assert out["b"].tolist() == [_blob(i) for i in range(40, 80)]
    assert out["id"].tolist() == list(range(40, 80))
    # a dict batch (below the pinning size) goes over tensor by tensor, both of a pair owned
    out2, owners2 = to_device(to_tensors(batch, jagged), torch.device("cpu"), False)
    assert out2["s"].tolist() == out["s"].tolist() and len(owners2) == 2 + 2 * 2


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (as tests/test_gpu.py)")
def test_pinned_and_on_the_device(mds_url):
    from petastream.mds.dataset import MDSDataset

    batch = MDSDataset(mds_url).read(np.arange(10), ["s"])
    pinned = to_pinned_tensors(batch, {"s": "str"})
    assert pinned["s"].is_pinned() and pinned["s"].tolist() == [_text(i) for i in range(10)]
    dev = next(iter(loader(mds_url, 64, strings="jagged", device="cuda")))
    assert dev["s"].device.type == "cuda" and dev["s"].tolist() == [_text(i) for i in range(64)]


def test_pickles_and_nested():
    j = to_jagged("s", np.array(["ab", "", "cde"], dtype=object), "str")
    k = pickle.loads(pickle.dumps(j))
    assert k.tolist() == ["ab", "", "cde"] and k.utf8
    nt = j.nested()
    assert nt.is_nested and [t.tolist() for t in nt.unbind()] == [[97, 98], [], [99, 100, 101]]
    assert j.lengths().tolist() == [2, 0, 3] and "rows=3" in repr(j)


def test_own_dataloader(mds_url):
    from torch.utils.data import DataLoader

    from petastream.torch import MDSIterableDataset

    ds = MDSIterableDataset(mds_url, 100, strings={"s": "jagged"})
    batches = list(DataLoader(ds, batch_size=None, num_workers=2))
    assert all(isinstance(b["s"], JaggedBytes) for b in batches)
    got = sorted((int(i), v) for b in batches for i, v in zip(b["id"], b["s"].tolist()))
    assert got == [(i, _text(i)) for i in range(N)]


def test_shares_only_its_own_buffers():
    """Values gathered for the batch are handed out as they are; views of anything else (a
    cached Arrow buffer, even a writable one) are copied, so a tensor written in place cannot
    change what a later read returns."""
    own = np.arange(10, dtype=np.uint8)
    j = JaggedBytes.from_numpy(own[2:8], np.array([0, 3, 6]))
    assert np.shares_memory(j.values.numpy(), own)
    cached = pa.array([b"abc", b"def"], pa.large_binary())
    view = np.frombuffer(cached.buffers()[2], dtype=np.uint8)
    k = JaggedBytes.from_numpy(view, np.array([0, 3, 6]))
    k.values[0] = ord("z")
    assert cached.to_pylist() == [b"abc", b"def"] and k.tolist() == [b"zbc", b"def"]
