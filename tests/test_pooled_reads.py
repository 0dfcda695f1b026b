"""Pooled reads end to end (issue 36): batches a user keeps (tensors, numpy views of them, one
column of a batch dict) are never overwritten by the batches after them, with thread and
process workers, DataLoader workers and a resumed loader, while the pool does reuse buffers."""

from __future__ import annotations

import numpy as np
import pytest

from petastream.columns import pool as pool_mod
from petastream.mds.dataset import MDSDataset
from petastream.mds.writer import write_mds

torch = pytest.importorskip("torch")
from petastream.torch import MDSIterableDataset, loader  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")]
N = 30_000  # 24-byte rows: the chunks' arrays are past the pool's 64 KiB floor


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("pooled") / "ds")
    ids = np.arange(N, dtype=np.int64)
    write_mds({"id": ids, "x": (ids[:, None] * 4 + np.arange(4)).astype(np.float32),
               "y": (ids % 7).astype(np.int32)}, path, compression=None, size_limit=120_000)
    return path


@pytest.fixture
def fresh_pool():
    pool = pool_mod.configure(64 << 20, min_bytes=1 << 12)
    yield pool
    pool_mod.configure()


def _snap(batch: dict) -> tuple[dict, np.ndarray]:
    """A batch the test keeps, with a copy of its ids as read: an overwrite by a later batch
    changes every column of a row together, so the ids alone would not show it."""
    return batch, np.asarray(batch["id"]).copy()


def _check(kept: list) -> list[int]:
    """Every kept batch still holds what it was read with; its ids, in order."""
    seen = []
    for b, ids0 in kept:
        ids = np.asarray(b["id"])
        assert np.array_equal(ids, ids0), "a kept batch was overwritten"
        want = ids[:, None] * 4 + np.arange(4)
        assert np.array_equal(np.asarray(b["x"]), want), "a kept batch was overwritten"
        if "y" in b:
            assert np.array_equal(np.asarray(b["y"]), ids % 7)
        seen += ids.tolist()
    return seen


def _keep_some(batches, every: int = 3) -> list:
    """Keep every ``every``-th batch in several forms (dropping the rest frees their buffers)."""
    kept = []
    for k, b in enumerate(batches):
        if k % every:
            continue
        if k % 2:  # numpy views of the tensors, the tensors themselves dropped
            kept.append(_snap({"id": b["id"].numpy()[:], "x": b["x"].numpy()[:, :]}))
        else:
            kept.append(_snap(b))
    return kept


@pytest.mark.parametrize("workers", [1, 2])
def test_kept_batches_survive_later_epochs_with_threads(url, fresh_pool, workers):
    ld = loader(url, 512, shuffle=True, seed=5, num_workers=workers)
    kept = []
    for _ in range(3):
        kept += _keep_some(ld)
    only_x = [(b["x"], b["x"].clone()) for b in ld]  # one column of each batch dict, the dicts dropped
    _check(kept)
    assert all(torch.equal(x, x0) for x, x0 in only_x)
    assert sorted(int(v) for x, _ in only_x for v in x[:, 0] // 4) == list(range(N))
    assert fresh_pool.stats().reused > 0  # not vacuous: buffers did come back


def test_kept_batches_survive_with_process_workers(url):
    ld = loader(url, 512, shuffle=True, seed=6, num_workers=2, worker_type="process", num_epochs=2)
    kept = _keep_some(ld, every=2)
    seen = _check(kept)  # (in each worker the pool reuses; here the slots are shared memory)
    assert len(kept) == -(-2 * N // 512 // 2) and set(seen) <= set(range(N))


@pytest.mark.parametrize("workers", [0, 2])
def test_kept_batches_survive_dataloader_workers(url, fresh_pool, workers):
    ds = MDSIterableDataset(url, 512, shuffle=True, seed=7)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
    kept = _keep_some(dl) + _keep_some(dl)
    _check(kept)


def test_kept_batches_survive_a_resumed_loader(url, fresh_pool):
    first = loader(url, 500, shuffle=True, seed=9, num_workers=2)
    kept = []
    for k, batch in enumerate(first):
        kept.append(_snap(batch))
        if k == 20:
            break
    rest = loader(url, 500, shuffle=True, seed=9, num_workers=2)
    rest.load_state_dict(first.state_dict())
    kept += [_snap(b) for b in rest]
    assert sorted(_check(kept)) == list(range(N))
    assert _check(kept) == _check([_snap(b) for b in loader(url, 500, shuffle=True, seed=9)])


def test_pooled_bytes_stay_bounded_and_batches_stay_right(url):
    pool = pool_mod.configure(1 << 20, min_bytes=1 << 12)
    try:
        kept = [_snap(b) for b in loader(url, 512, shuffle=True, seed=2, num_workers=2)]  # all kept
        st = pool.stats()
        assert st.held_bytes <= 1 << 20 and st.unpooled > 0
        assert sorted(_check(kept)) == list(range(N))
    finally:
        pool_mod.configure()


def test_pooled_and_plain_reads_agree(url, fresh_pool):
    ds = MDSDataset(url)
    rng = np.random.default_rng(0)
    picks = rng.permutation(N)[:9000]
    got = ds.read(picks)
    in_shard = ds.read_shard(1, rng.permutation(int(ds.shard_offsets[2] - ds.shard_offsets[1])))
    pool_mod.configure(0)
    assert all(np.array_equal(got[k], v) for k, v in ds.read(picks).items())
    assert np.array_equal(got["id"], picks)
    plain = ds.read_shard(1, in_shard["id"] - ds.shard_offsets[1])
    assert all(np.array_equal(in_shard[k], v) for k, v in plain.items())


@pytest.fixture(scope="module")
def mixed_url(tmp_path_factory):
    """A layout with a variable-size column: its fixed columns come from the header gather."""
    path = str(tmp_path_factory.mktemp("pooled-mixed") / "ds")
    ids = np.arange(N, dtype=np.int64)
    write_mds({"id": ids, "x": (ids[:, None] * 4 + np.arange(4)).astype(np.float32),
               "s": np.array([b"v%d" % i for i in range(N)], dtype=object),
               "y": (ids % 7).astype(np.int32)}, path, compression=None, size_limit=200_000)
    return path


@pytest.mark.parametrize("workers", [1, 2])
def test_kept_batches_of_a_mixed_layout_survive_later_epochs(mixed_url, fresh_pool, workers):
    ld = loader(mixed_url, 512, shuffle=True, seed=11, num_workers=workers)
    kept = []
    for epoch in range(3):
        # (the middle epoch keeps nothing: a block's columns are read straight into pooled
        # buffers, with no pooled temporaries, so buffers come back only from blocks not kept)
        kept += _keep_some(ld) if epoch != 1 else [b for b in ld][:0]
    _check(kept)
    full = [b for b, _ in kept if "s" in b]
    assert full and all(b["s"] == [b"v%d" % i for i in b["id"].tolist()] for b in full)
    assert fresh_pool.stats().reused > 0


@pytest.fixture(scope="module")
def strings_url(tmp_path_factory):
    """str/bytes columns of one length throughout (``h``) and of varying lengths, past the 12
    bytes a binary view holds inline for some rows (``s``), over several shards."""
    path = str(tmp_path_factory.mktemp("pooled-strings") / "ds")
    ids = np.arange(N, dtype=np.int64)
    write_mds({"id": ids, "x": (ids[:, None] * 4 + np.arange(4)).astype(np.float32),
               "s": np.array([f"v{i}" + "é" * (i % 9) for i in range(N)], dtype=object),
               "h": np.array([i.to_bytes(8, "little") * 2 for i in range(N)], dtype=object)},
              path, compression=None, size_limit=300_000)
    return path


def _check_strings(kept: list) -> None:
    for b, ids0 in kept:
        ids = np.asarray(b["id"]).tolist()
        assert ids == ids0.tolist(), "a kept batch was overwritten"
        assert b["s"].tolist() == [f"v{i}" + "é" * (i % 9) for i in ids], "a kept batch was overwritten"
        assert b["h"].tolist() == [i.to_bytes(8, "little") * 2 for i in ids], "a kept batch was overwritten"


@pytest.mark.parametrize("workers", [1, 2])
def test_kept_jagged_batches_survive_later_epochs(strings_url, fresh_pool, workers):
    ld = loader(strings_url, 512, shuffle=True, seed=13, num_workers=workers, strings="jagged")
    assert MDSDataset(strings_url).num_shards > 2
    kept = [_snap(b) for k, b in enumerate(ld) if k % 3 == 0]
    seen = [v for b in ld for v in np.asarray(b["id"]).tolist()]  # an epoch kept by no one
    kept += [_snap(b) for k, b in enumerate(ld) if k % 4 == 1]
    _check_strings(kept)
    assert sorted(seen) == list(range(N))
    assert fresh_pool.stats().reused > 0
