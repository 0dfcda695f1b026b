"""The torch and TensorFlow loaders over a mixture of MDS datasets and an in-memory source:
each stream's share per epoch, in thread and process workers, and through a DataLoader."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from petastream import Stream
from petastream.mds.writer import write_mds
from tests.arrow_source import arrow_source

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


def _rows(src: int, n: int) -> dict[str, np.ndarray]:
    return {"src": np.full(n, src, np.int64), "i": np.arange(n, dtype=np.int64)}


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix")
    write_mds(_rows(0, 90), str(root / "a"), size_limit=600)  # several shards
    write_mds(_rows(1, 40), str(root / "b"), size_limit=600)
    return [Stream(str(root / "a"), choose=45), Stream(str(root / "b"), repeat=1.5),
            Stream(arrow_source(_rows(2, 25), [10, 15]), choose=25)]


def _shares(batches) -> tuple[Counter, Counter]:
    per_stream: Counter = Counter()
    per_sample: Counter = Counter()
    for b in batches:
        src, i = np.asarray(b["src"]).tolist(), np.asarray(b["i"]).tolist()
        per_stream.update(src)
        per_sample.update(zip(src, i))
    return per_stream, per_sample


def _check(batches) -> None:
    per_stream, per_sample = _shares(batches)
    assert per_stream == {0: 45, 1: 60, 2: 25}
    assert max(c for (s, _), c in per_sample.items() if s == 0) == 1  # 45 of 90: distinct
    assert sorted(Counter(c for (s, _), c in per_sample.items() if s == 1).values()) == [20, 20]  # once, or twice
    assert len([k for k in per_sample if k[0] == 2]) == 25


@pytest.mark.torch
@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_torch_loader_over_a_mixture(streams, worker_type):
    import petastream.torch as pt

    loader = pt.loader(streams, 10, shuffle=True, seed=4, num_workers=2, worker_type=worker_type)
    batches = list(loader)
    _check(batches)
    assert _shares(list(loader))[1] != _shares(batches)[1]  # the next epoch chooses anew
    loader.close()


@pytest.mark.torch
def test_torch_iterable_dataset_over_a_mixture(streams):
    import torch.utils.data

    from petastream.torch import MDSIterableDataset

    ds = MDSIterableDataset(streams, 10, shuffle=True, seed=4)
    _check(list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)))


@pytest.mark.tf
def test_tf_dataset_over_a_mixture(streams):
    import petastream.tf as ptf

    ds = ptf.dataset(streams, 10, shuffle=True, seed=4, num_workers=2)
    _check([{k: v.numpy() for k, v in b.items()} for b in ds])


def test_compat_make_batch_reader_over_a_mixture(streams, tmp_path):
    # Petastorm's batch reader API over petastream.Stream items: each epoch the streams' shares;
    # cur_shard/shard_count split them as ranks (the loaders' rule: equal batches per rank, the
    # last global batch completed from the start of the epoch's order).
    import pyarrow as pa
    import pyarrow.parquet as pq

    from petastream.compat import make_batch_reader
    from petastream.errors import InvalidArgumentError

    pq.write_table(pa.table(_rows(3, 30)), tmp_path / "c.parquet", row_group_size=7)
    mixed = [*streams[:2], Stream(str(tmp_path / "c.parquet"), weight=None, choose=30)]
    with make_batch_reader(mixed, num_epochs=2, seed=3) as reader:
        batches = [b._asdict() for b in reader]
    per_stream, _ = _shares(batches)
    assert per_stream == {0: 90, 1: 120, 3: 60}  # two epochs of 45 + 60 + 30
    with make_batch_reader(mixed) as reader:
        first = next(iter(reader))
    assert type(first).__name__ == "inferred_schema_view" and set(first._fields) == {"src", "i"}
    ranks = []
    for rank in range(2):
        with make_batch_reader(mixed, num_epochs=1, cur_shard=rank, shard_count=2) as reader:  # seed from the data
            ranks.append(_shares([b._asdict() for b in reader])[1])
    assert sum(ranks[0].values()) == sum(ranks[1].values())
    assert len(set(ranks[0]) | set(ranks[1])) == 45 + 40 + 30  # every sample of the epoch's shares
    with pytest.raises(InvalidArgumentError, match="predicate applies to one dataset.*open_parquet"):
        make_batch_reader(mixed, predicate=object())
    with pytest.raises(InvalidArgumentError, match="wrap each URL in a petastream.Stream"):
        make_batch_reader([mixed[0], str(tmp_path / "c.parquet")])


def test_two_openings_of_one_mixture_reopen_alike(streams):
    # A parked worker pool keeps the dataset its workers opened while the next loader's source
    # reopens alike (compat opens its sources anew each epoch): a mixture's reopener holds one
    # opener per stream, compared one by one.
    from petastream import mixture
    from petastream.pipeline.procpool.pool import _same_opener

    mds = streams[:2]
    assert _same_opener(mixture(mds).reopener(), mixture(mds).reopener())
    assert not _same_opener(mixture(mds).reopener(), mixture(mds[:1]).reopener())
    weighted = [Stream(s.url_or_source, weight=1) for s in mds]
    assert _same_opener(mixture(weighted, epoch_size=50).reopener(), mixture(weighted, epoch_size=50).reopener())
    assert not _same_opener(mixture(weighted, epoch_size=50).reopener(), mixture(weighted, epoch_size=60).reopener())
