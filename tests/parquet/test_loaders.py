"""Every loader over a ParquetSource: the iteration contract of tests/pipeline/test_contract.py
(each sample exactly once per epoch in the planner's order, state_dict resumption on other
worker counts and types), and two ranks with workers sharing an epoch."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

from petastream.parquet import ParquetSource
from tests.pipeline import test_contract as contract

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
N = contract.N  # the contract's checks count on its row count


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """N rows over Hive-partitioned files and row groups of uneven sizes, a filter dropping
    every seventh row (so shards are parts of row groups), slices of at most 23 rows. Column
    ``id`` is each kept row's position in the source, as the contract's checks expect."""
    root = tmp_path_factory.mktemp("loaders")
    raw = np.arange(N + N // 6 + 1)
    kept = raw % 7 != 3
    ids = np.where(kept, np.cumsum(kept) - 1, -1)
    ids[ids >= N] = -1
    cut = [0, 61, 62, 150, len(raw)]
    for k in range(4):  # part=0/f0, part=0/f1, part=1/f2, part=1/f3: path order is data order
        d = root / f"part={k // 2}"
        d.mkdir(exist_ok=True)
        sl = slice(cut[k], cut[k + 1])
        pq.write_table(pa.table({"id": ids[sl], "x": raw[sl].astype(np.float32), "s": [f"r{i}" for i in raw[sl]]}),
                       str(d / f"f{k}.parquet"), row_group_size=[17, 1, 40, 33][k])
    src = ParquetSource(str(root), filters=pc.field("id") >= 0, rows_per_shard=23)
    assert len(src) == N and src.read(np.arange(N), ["id"])["id"].tolist() == list(range(N))
    assert src.num_shards > 10 and src.columns["part"] == "int32"
    return src


_settings = settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))


@_settings
@given(cfg=contract.configs, steps=contract.ops)
def test_contract_numpy_threads_and_processes(source, cfg, steps):
    contract._check(contract.KINDS[("numpy", "thread", "process")[cfg["seed"] % 3]], source, cfg, steps)


@_settings
@given(cfg=contract.configs, steps=contract.ops)
def test_contract_tf(source, cfg, steps):
    kind = contract.KINDS[("tf", "tf_groups", "tf_processes")[cfg["seed"] % 3]]
    try:
        contract._check(kind, source, cfg, steps)
    finally:
        for loader in getattr(kind, "built", []):
            loader.close()  # the worker processes of the last loader built


@_settings
@given(cfg=contract.configs, steps=contract.ops)
def test_contract_iterable_dataset(source, cfg, steps):
    contract._check(contract.KINDS["iterable"], source, cfg, steps)


@pytest.mark.timeout(600)
def test_two_ranks_with_workers_read_every_row_once_and_resume(source):
    from petastream.torch import loader

    def build(rank: int, workers: int, worker_type: str):
        return loader(source, 16, shuffle=True, seed=5, rank=rank, world_size=2, drop_last=True,
                      num_workers=workers, worker_type=worker_type)

    seen = []
    for rank in range(2):
        first = build(rank, 2, "process")
        it = iter(first)
        got = [next(it)["id"].tolist() for _ in range(3)]
        state = first.state_dict()
        del it
        resumed = build(rank, 1, "thread")
        resumed.load_state_dict(state)
        got += [b["id"].tolist() for b in resumed]
        assert len(got) == len(first) == N // 32
        assert [s for b in got for s in b] and all(len(b) == 16 for b in got)
        seen += [i for b in got for i in b]
    assert len(seen) == len(set(seen)) == N // 32 * 32  # every row at most once, both ranks together


def test_loaders_take_a_parquet_url_as_they_take_an_mds_one(tmp_path):
    """petastream.torch.loader(url) and petastream.tf.dataset(url) read a Parquet directory (or
    a list of files) the way they read an MDS dataset: the format is what is at the URL."""
    import petastream.tf as ptf
    from petastream.torch import loader

    for k in range(2):
        pq.write_table(pa.table({"id": np.arange(k * 50, k * 50 + 50), "x": np.ones(50, np.float32)}),
                       str(tmp_path / f"part-{k}.parquet"), row_group_size=20)
    url = str(tmp_path)
    torch_ids = sorted(int(i) for b in loader(url, 16, shuffle=True, seed=1) for i in b["id"])
    tf_ids = sorted(int(i) for b in ptf.dataset(url, 16, worker_type="thread") for i in b["id"].numpy())
    files = [str(tmp_path / "part-0.parquet"), str(tmp_path / "part-1.parquet")]
    listed = sorted(int(i) for b in loader(files, 16) for i in b["id"])
    assert torch_ids == tf_ids == listed == list(range(100))
    with pytest.raises(TypeError, match="read as PARQUET"):
        loader(url, 16, dataset_options={"split": "train"})  # an MDS-only option


def test_list_columns_reach_torch_as_a_tensor_per_row_or_as_one_tensor(tmp_path):
    """A variable-length list column is a list of tensors per batch (each row its own, writable
    values); with ``array_lengths`` it is one (rows, n) tensor."""
    import warnings

    import torch

    from petastream.torch import loader

    ids = np.arange(60)
    values = [list(range(int(i) % 5)) for i in ids]  # lengths 0..4, empty rows included
    pq.write_table(pa.table({"id": ids, "v": pa.array(values, pa.list_(pa.int32())),
                             "w": pa.array([[float(i)] * 3 for i in ids], pa.list_(pa.float32()))}),
                   str(tmp_path / "f.parquet"), row_group_size=25)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "not writable" warning from torch
        warnings.filterwarnings("ignore", "column 'w' is read as variable-length")  # below
        batches = list(loader(str(tmp_path), 16, shuffle=True, seed=3))
    seen = 0
    for b in batches:
        assert isinstance(b["v"], list) and all(isinstance(t, torch.Tensor) for t in b["v"])
        for i, t in zip(b["id"].tolist(), b["v"]):
            assert t.dtype == torch.int32 and t.tolist() == values[i]
            seen += 1
        if len(b["v"]) > 1 and b["v"][0].numel():
            b["v"][0].fill_(-1)  # each row's values are its own
            assert b["v"][1].tolist() == values[b["id"][1].item()]
    assert seen == len(ids)
    # Column w has 3 values in every row: said once, with the fix.
    with pytest.warns(UserWarning, match=r"column 'w' .* array_lengths=\{'w': 3\}"):
        list(loader(str(tmp_path), 16, num_workers=1))
    fixed = ParquetSource(str(tmp_path), array_lengths={"w": 3})
    for b in loader(fixed, 16):
        assert isinstance(b["w"], torch.Tensor) and b["w"].shape == (len(b["id"]), 3)
        assert b["w"][:, 0].tolist() == [float(i) for i in b["id"].tolist()]
