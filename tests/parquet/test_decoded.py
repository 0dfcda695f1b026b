"""Decoded row groups in the shard cache (``cache_decoded``): later reads map them instead of
decoding the Parquet again, with the same values; damaged entries are refused, never served."""

from __future__ import annotations

import os

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from petastream.errors import CorruptShardError, InvalidArgumentError
from petastream.parquet import open_parquet
from petastream.storage.cache import ShardCache
from tests.parquet.conftest import N
from tests.parquet.helpers import assert_same, write_files


@pytest.fixture
def parquet_decodes(monkeypatch):
    """Counts the row groups pyarrow decodes from Parquet bytes."""
    calls = []
    real = pq.ParquetFile.read_row_group

    def counted(self, i, *args, **kwargs):
        calls.append(i)
        return real(self, i, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counted)
    return calls


def _decoded_entries(cache_dir: str) -> list[str]:
    return sorted(f.key for f in ShardCache.at(cache_dir).usage().files if f.key.startswith("pqd-"))


def test_later_reads_map_the_decoded_row_groups(pq_dir, tmp_path, parquet_decodes):
    cache_dir = str(tmp_path / "cache")
    plain = open_parquet(pq_dir, rows_per_shard=17)
    ids = np.random.default_rng(3).permutation(N)
    want = plain.read(ids)
    units = len(plain.plan.units)
    parquet_decodes.clear()

    first = open_parquet(pq_dir, rows_per_shard=17, cache_decoded=True, cache_dir=cache_dir)
    assert_same(first.read(ids), want)  # every type of the fixture, decoded from Parquet
    assert len(parquet_decodes) == units
    assert len(_decoded_entries(cache_dir)) == units
    usage = ShardCache.at(cache_dir).usage()
    estimate = int(first.cached_shard_bytes().sum())
    assert 0.5 * usage.bytes <= estimate <= 2 * usage.bytes, (estimate, usage.bytes)

    parquet_decodes.clear()
    first.close()  # a later epoch: the loaded row groups are dropped, their entries stay
    assert_same(first.read(ids), want)
    again = open_parquet(pq_dir, rows_per_shard=17, cache_decoded=True, cache_dir=cache_dir)
    assert_same(again.read(ids), want)  # another reader of the node
    assert parquet_decodes == []


def test_local_files_are_not_copied_unless_asked(pq_dir, tmp_path):
    cache_dir = str(tmp_path / "cache")
    src = open_parquet(pq_dir, cache_dir=cache_dir)  # read in place: decoded every read, no copy
    src.read(np.arange(N))
    assert _decoded_entries(cache_dir) == [] and not src.cached_shard_bytes().any()
    cached = open_parquet(pq_dir, cache_dir=cache_dir, read_in_place=False)  # through the cache: kept
    cached.read(np.arange(N))
    assert len(_decoded_entries(cache_dir)) == len(cached.plan.units)
    off = open_parquet(pq_dir, cache_dir=str(tmp_path / "off"), read_in_place=False, cache_decoded=False)
    off.read(np.arange(N))
    assert _decoded_entries(str(tmp_path / "off")) == []
    with pytest.raises(InvalidArgumentError, match="cache_decoded='yes'"):
        open_parquet(pq_dir, cache_decoded="yes")


def test_projections_and_filters_are_entries_of_their_own(pq_dir, tmp_path, parquet_decodes):
    cache_dir = str(tmp_path / "cache")
    options = dict(cache_decoded=True, cache_dir=cache_dir)
    expr = pc.bit_wise_and(pc.field("id"), 1) == 0  # even ids: rows of every row group
    cases = [dict(columns=["id", "s"]), dict(columns=["s", "id"]), dict(filters=expr), {}]
    units = len(open_parquet(pq_dir).plan.units)
    for case in cases:
        src = open_parquet(pq_dir, **case, **options)
        want = open_parquet(pq_dir, **case).read(np.arange(len(src)))
        parquet_decodes.clear()
        for _ in range(2):
            assert_same(src.read(np.arange(len(src))), want)
            src.close()
        assert len(parquet_decodes) == units  # each once, the second pass from the cache
    assert len(_decoded_entries(cache_dir)) == 4 * units


def test_a_damaged_entry_is_refused(pq_dir, tmp_path):
    cache_dir = str(tmp_path / "cache")
    open_parquet(pq_dir, cache_decoded=True, cache_dir=cache_dir).read(np.arange(N))
    key = _decoded_entries(cache_dir)[0]
    path = ShardCache.at(cache_dir).path(key)
    with open(path, "r+b") as f:  # one byte of the data, not of the IPC structure
        f.seek(os.path.getsize(path) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x01]))
    src = open_parquet(pq_dir, cache_decoded=True, cache_dir=cache_dir)
    with pytest.raises(CorruptShardError, match=f"decoded cache entry {path} .* digest differs.*cache prune"):
        src.read(np.arange(N))
    with open(path, "r+b") as f:
        f.truncate(5)
    src = open_parquet(pq_dir, cache_decoded=True, cache_dir=cache_dir)
    with pytest.raises(CorruptShardError, match=f"decoded cache entry {path} .* damaged"):
        src.read(np.arange(N))


def test_no_room_for_a_decoded_copy_is_no_error(tmp_path, data):
    root = str(tmp_path / "d")
    write_files(data, root, files=1, row_group_size=N)
    cache_dir = str(tmp_path / "cache")
    # Room for the file (read through the cache) but not beside it for its decoded copy.
    size = os.path.getsize(os.path.join(root, "part-00000.parquet"))
    src = open_parquet(root, cache_decoded=True, read_in_place=False, cache_dir=cache_dir, cache_limit=size + 100)
    with pytest.warns(UserWarning, match="cache_decoded: a decoded row group of .* raise cache_limit"):
        for _ in range(2):
            assert_same(src.read(np.arange(N)), open_parquet(root).read(np.arange(N)))
            src.close()
    assert ShardCache.at(cache_dir).usage().bytes <= size + 100 and _decoded_entries(cache_dir) == []


def test_a_changed_file_is_not_read_from_its_old_entries(tmp_path, data):
    root = str(tmp_path / "d")
    write_files(data, root, files=1)
    cache_dir = str(tmp_path / "cache")
    open_parquet(root, cache_decoded=True, cache_dir=cache_dir).read(np.arange(N))
    changed = data.set_column(0, "id", pc.add(data.column("id"), 1000))
    write_files(changed, root, files=1)
    got = open_parquet(root, cache_decoded=True, cache_dir=cache_dir).read(np.arange(N))
    assert got["id"].tolist() == list(range(1000, 1000 + N))


def test_local_row_groups_stay_decoded_across_passes_within_memory_limit(pq_dir, parquet_decodes):
    src = open_parquet(pq_dir)  # read in place: nothing it holds pins the shard cache
    units = len(src.plan.units)
    ids = np.random.default_rng(4).permutation(N)
    parquet_decodes.clear()
    for _ in range(3):  # three epochs, a close() after each, as a loader does
        src.read(ids)
        src.close()
    assert len(parquet_decodes) == units
    small = open_parquet(pq_dir, memory_limit=1)  # no room to keep any: decoded again each pass
    parquet_decodes.clear()
    for _ in range(2):
        small.read(ids)
        small.close()
    assert len(parquet_decodes) >= 2 * units


def test_cache_backed_row_groups_are_let_go_at_the_end_of_a_pass(pq_dir, tmp_path):
    from petastream.storage.pins import is_pinned

    cache_dir = str(tmp_path / "cache")
    src = open_parquet(pq_dir, cache_decoded=True, cache_dir=cache_dir)
    src.read(np.arange(N))
    paths = [ShardCache.at(cache_dir).path(k) for k in _decoded_entries(cache_dir)]
    src.close()  # another process may need the room: no entry stays mapped by this one
    assert paths and not any(is_pinned(p) for p in paths)


def test_objects_of_decoded_entries_are_kept_between_passes(pq_dir, tmp_path, monkeypatch):
    """A reader per epoch over local-disk (compat): the entries are unmapped at a pass's end,
    and the next pass takes their str/bytes objects from the source instead of making them."""
    from petastream.parquet.kept_objects import KeptObjects
    from petastream.storage.pins import is_pinned

    made = []
    real_put = KeptObjects.put
    monkeypatch.setattr(KeptObjects, "put", lambda self, *a: (made.append(a[:2]), real_put(self, *a))[1])
    cache_dir = str(tmp_path / "cache")
    want = open_parquet(pq_dir).read(np.arange(N))
    src = open_parquet(pq_dir, cache_decoded=True, cache_dir=cache_dir)
    texts = [name for name, v in want.items() if v.dtype == object and isinstance(v[0], (str, bytes))]
    assert texts
    ids = np.random.default_rng(6).permutation(N)
    assert_same(src.read(ids), open_parquet(pq_dir).read(ids))
    src.close()
    units = len(src.plan.units)
    assert len(made) == len(texts) * units and len(src.row_groups.kept_objects) == len(made)
    paths = [ShardCache.at(cache_dir).path(k) for k in _decoded_entries(cache_dir)]
    assert paths and not any(is_pinned(p) for p in paths)  # kept objects hold no mapping
    for _ in range(2):
        assert_same(src.read(ids), open_parquet(pq_dir).read(ids))
        src.close()
    assert len(made) == len(texts) * units  # none made again
    other = open_parquet(pq_dir, cache_decoded=True, cache_dir=cache_dir)  # another reader: its own
    assert_same(other.read(ids), open_parquet(pq_dir).read(ids))
    assert len(made) == 2 * len(texts) * units
    ragged = src.with_strings("ragged").read(ids)  # bytes, not objects: nothing kept is used
    assert [bytes(ragged[texts[0]][k]) for k in range(3)] == [
        v.encode() if isinstance(v, str) else v for v in want[texts[0]][ids[:3]]]


def test_kept_objects_stay_within_their_budget():
    from petastream.parquet.kept_objects import OBJECT_BYTES, KeptObjects

    a = np.array([b"x" * 10] * 4, dtype=object)
    each = 40 + OBJECT_BYTES * 4
    kept = KeptObjects(2 * each)
    kept.put("k1", "s", a, 40)
    kept.put("k2", "s", a, 40)
    assert kept.get("k1", "s", 4) is a and kept.get("k1", "s", 5) is None  # rows must agree
    kept.put("k3", "s", a, 40)  # over the budget: the least recently used (k2) goes
    assert kept.get("k2", "s", 4) is None and kept.get("k1", "s", 4) is a and kept.get("k3", "s", 4) is a
    assert kept.held_bytes == 2 * each and len(kept) == 2
    kept.put("big", "s", a, 3 * each)  # larger than the budget: not kept, nothing dropped
    assert kept.get("big", "s", 4) is None and len(kept) == 2
    off = KeptObjects(0)
    off.put("k1", "s", a, 40)
    assert len(off) == 0
