"""Optional source capabilities (petastream.capabilities): each source declares the ones it has,
and the loader, pacing, mixtures and process workers use them through the protocols."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import petastream
from petastream import Stream, mixture
from petastream.capabilities import (
    CachePeers,
    Composite,
    Fingerprinted,
    Pinned,
    StringReads,
    fingerprint_of,
)
from petastream.parquet import open_parquet
from petastream.parquet.source import ParquetPlanned
from petastream.pipeline import BatchLoader
from petastream.pipeline.loader import source_snapshot
from petastream.pipeline.pacing import plan_key
from petastream.stream import StreamPlanner
from tests.arrow_source import arrow_source
from tests.mds.test_cache import _write

ALL = (CachePeers, Composite, Fingerprinted, ParquetPlanned, Pinned, StringReads)


def _has(source) -> set[str]:
    return {c.__name__ for c in ALL if isinstance(source, c)}


@pytest.fixture
def sources(tmp_path):
    mds_url = _write(str(tmp_path / "mds"), n=400)  # zstd shards: read through the cache
    for name, start in (("t", 0), ("u", 100)):
        ids = np.arange(start, start + 100)
        pq.write_table(pa.table({"id": ids, "s": [f"r{i}" for i in ids]}), tmp_path / f"{name}.parquet",
                       row_group_size=25)
    mds = petastream.open(mds_url, cache_dir=str(tmp_path / "c"))
    parquet = open_parquet(str(tmp_path / "t.parquet"), cache_dir=str(tmp_path / "c"))
    other = open_parquet(str(tmp_path / "u.parquet"), cache_dir=str(tmp_path / "c"))
    return mds, parquet, other


def test_each_source_has_the_capabilities_it_declares(sources):
    mds, parquet, other = sources
    assert _has(mds) == {"CachePeers", "Fingerprinted", "StringReads"}
    assert _has(parquet) == {"CachePeers", "Fingerprinted", "StringReads", "ParquetPlanned"}
    mix = mixture([Stream(parquet), Stream(other)])
    assert _has(mix) == {"Composite", "Fingerprinted", "StringReads"}
    plain = arrow_source({"id": np.arange(10)}, [10])  # the protocol only
    assert _has(plain) == set()


def test_a_mixture_sets_string_reads_on_the_streams_that_can(sources):
    _, parquet, other = sources
    mix = mixture([Stream(parquet), Stream(other)])
    assert mix.strings == "objects"
    mix.strings = "ragged"
    assert parquet.strings == other.strings == "ragged"
    plain = arrow_source({"id": np.arange(10)}, [10])
    bare = mixture([Stream(plain), Stream(arrow_source({"id": np.arange(5)}, [5]))])
    assert bare.strings == "objects"  # its streams have no StringReads: the default, and nothing set
    bare.strings = "ragged"
    assert not hasattr(plain, "strings")


def test_fingerprints_identify_the_data_or_fall_back_to_the_url(sources, tmp_path):
    mds, parquet, other = sources
    assert fingerprint_of(mds) == mds.fingerprint != ""
    again = petastream.open(mds.url, cache_dir=str(tmp_path / "other"))  # same data, another cache
    plain = arrow_source({"id": np.arange(100)}, [100])
    assert fingerprint_of(plain) == plain.url
    plan = StreamPlanner([400], 10, shuffle=True, seed=3).plan()
    assert plan_key(mds, plan) == plan_key(again, plan) != plan_key(parquet, plan)
    mix_a = mixture([Stream(parquet), Stream(other)])
    mix_b = mixture([Stream(open_parquet(parquet.url, cache_dir=str(tmp_path / "d"))), Stream(other)])
    assert mix_a.fingerprint == mix_b.fingerprint != mixture([Stream(other), Stream(parquet)]).fingerprint


def test_the_loader_paces_and_pins_only_through_the_capabilities(sources, tmp_path):
    mds = sources[0]
    assert BatchLoader(arrow_source({"id": np.arange(10)}, [10]), 5).pacer is None  # no CachePeers
    limited = petastream.open(mds.url, cache_dir=str(tmp_path / "c2"), cache_limit="1gb")
    assert isinstance(limited, CachePeers) and limited.cache_peers() is not None
    assert BatchLoader(limited, 5).pacer is not None
    assert source_snapshot(mds) is None  # not Pinned

    class Versioned:  # a Pinned stand-in inside a mixture: the snapshot is the mixture's streams'
        url, fingerprint = "v", "v"

        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def __len__(self):
            return len(self.inner)

        @property
        def snapshot(self):
            return {"format": "test", "version": 3}

        def at_snapshot(self, snapshot):
            return self

    pinned = Versioned(arrow_source({"id": np.arange(10)}, [10]))
    assert isinstance(pinned, Pinned) and source_snapshot(pinned) == {"format": "test", "version": 3}
    mix = mixture([Stream(pinned), Stream(arrow_source({"id": np.arange(5)}, [5]))])
    assert source_snapshot(mix) == {"format": "mixture", "streams": [{"format": "test", "version": 3}, None]}
