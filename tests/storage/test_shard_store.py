"""ShardStore: one source's units in the shard cache, over a format's ShardLoader (here a
small loader of its own: units are byte strings filled into a real cache)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Sequence

import numpy as np
import pytest

from petastream.errors import OutOfRangeError
from petastream.storage.shards import ShardStore, open_cache


class Units:
    """A ShardLoader: unit ``u`` is ``size`` bytes of ``u``, through the cache."""

    def __init__(self, cache, size: int = 64):
        self.cache, self.size, self.loads = cache, size, []

    def load(self, unit: int, wait: bool, store: ShardStore):
        self.loads.append(unit)
        return self.cache.get(self.key(unit), self.size, lambda out: out.write(bytes([unit]) * self.size),
                              wait=wait, on_pressure=store.release)

    def cost(self, unit: int) -> tuple[int, bool]:
        return self.size, True

    def inline(self, unit: int) -> bool:
        return False

    def cache_keys(self, units: Sequence[int]) -> list[str]:
        return [self.key(u) for u in units]

    @staticmethod
    def key(unit: int) -> str:
        return f"unit-{unit}"


def _store(tmp_path, limit=None, **kw):
    cache, limit = open_cache(str(tmp_path / "cache"), limit)
    return ShardStore(Units(cache), cache=cache, cache_limit=limit, **kw)


def test_shards_map_onto_units_and_load_once(tmp_path):
    store = _store(tmp_path, num_shards=4, units=np.array([0, 0, 1, 1]), depth=0)
    assert not store.is_loaded(1)
    assert bytes(store.get(0)[:2]) == b"\0\0" and bytes(store.get(1)[:1]) == b"\1"
    assert store.is_loaded(0) and store.is_loaded(1) and store.is_loaded(3) and store.loader.loads == [0, 1]
    store.close()  # the end of a pass unmaps what was loaded
    assert not store.is_loaded(0)


def test_prefetch_checks_shards_and_protects_what_is_needed_soon(tmp_path):
    store = _store(tmp_path, num_shards=4, units=np.array([0, 0, 1, 1]), depth=4)
    with pytest.raises(OutOfRangeError, match=r"shards \[4\] out of range \(4 shards\)"):
        store.prefetch([1, 4])
    store.prefetch([2, 3, 0])  # units 1 then 0, once each
    # While read-ahead runs, a unit still loading comes first: the order depends on which
    # thread finished, so only the set is fixed here.
    assert sorted(store.needed_soon()) == [0, 1]
    store.get(1), store.get(0)  # both units loaded: nothing is in flight any more
    assert store.needed_soon() == [1, 0]  # the latest request, in plan order, loaded or not
    assert store.loader.cache_keys(store.needed_soon()) == ["unit-1", "unit-0"]  # what eviction spares
    assert sorted(set(store.loader.loads)) == [0, 1]


def test_cache_peers_only_for_a_bounded_cache_read_through(tmp_path):
    assert _store(tmp_path, num_shards=1).cache_peers() is None  # no cache_limit
    assert _store(tmp_path, "1mb", num_shards=1, through_cache=False).cache_peers() is None
    bounded = _store(tmp_path, "1mb", num_shards=1)
    assert bounded.cache_peers() is bounded.cache.peers
    assert bounded.settings() == {"cache_dir": str(tmp_path / "cache"), "cache_limit": 1_000_000}


def test_per_reader_shares_of_a_limited_cache(tmp_path, monkeypatch):
    from petastream.stream.budget import reader_shares

    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    store = _store(tmp_path, "8mb", num_shards=1)
    assert store.readers == 4
    cached, ahead = reader_shares(8_000_000, 4)
    assert (store._open.cached_budget, store._open.ahead_budget) == (cached, ahead)
    explicit = _store(tmp_path, "8mb", num_shards=1, budgets=(100, 200))
    assert (explicit._open.cached_budget, explicit._open.ahead_budget) == (100, 200)


def test_dropping_the_store_unmaps_its_units_without_a_collection(tmp_path):
    store = _store(tmp_path, num_shards=2, depth=0)
    unit = store.get(0)
    assert store.cache.usage(count_pinned=True).pinned == 1
    ref = weakref.ref(store)
    gc.disable()
    try:
        del store, unit
        assert ref() is None  # no cycle: freed by reference counting, its maps with it
    finally:
        gc.enable()
