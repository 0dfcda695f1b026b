"""A Parquet source crosses into spawned processes: reopened from its plan, checked unchanged."""

from __future__ import annotations

import multiprocessing
import os
import pickle

import numpy as np
import pyarrow.parquet as pq
import pytest

from petastream.errors import FormatError
from petastream.parquet import open_parquet
from tests.parquet.helpers import assert_same, write_files


def _read_in_child(blob: bytes, ids: list[int]) -> tuple[dict, str, str]:
    src = pickle.loads(blob)
    return src.read(np.asarray(ids)), src.fingerprint, src.cache_dir


def _read_with(opener, ids: list[int]) -> tuple[dict, str, str]:
    src = opener()
    return src.read(np.asarray(ids)), src.fingerprint, src.cache_dir


@pytest.fixture(scope="module")
def spawn():
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        yield pool


def test_a_pickled_source_reads_the_same_in_a_spawned_process(pq_dir, spawn, tmp_path):
    src = open_parquet(pq_dir, filters=[("id", ">", 20)], columns=["id", "s", "ragged"],
                       rows_per_shard=9, cache_dir=str(tmp_path / "c"))
    ids = np.random.default_rng(0).permutation(len(src))[:50].tolist()
    got, fingerprint, _ = spawn.apply(_read_in_child, (pickle.dumps(src), ids))
    assert fingerprint == src.fingerprint
    assert_same(got, src.read(np.asarray(ids)))


def test_a_reopener_keeps_this_process_cache(pq_dir, spawn, tmp_path):
    src = open_parquet(pq_dir, cache_dir=str(tmp_path / "mine"), cache_limit="10mb")
    opener = src.reopener()
    again = src.reopener()
    assert opener.func is again.func and opener.args == again.args and opener.keywords == again.keywords
    got, fingerprint, cache_dir = spawn.apply(_read_with, (opener, [0, 199]))
    assert cache_dir == str(tmp_path / "mine") and fingerprint == src.fingerprint
    assert_same(got, src.read(np.array([0, 199])))


def test_a_file_changed_since_pickling_is_refused(tmp_path, data, spawn):
    root = str(tmp_path / "d")
    paths = write_files(data, root, files=2)
    src = open_parquet(root)
    blob = pickle.dumps(src)
    pq.write_table(data.slice(0, 5), paths[0])
    with pytest.raises(FormatError, match=r"part-00000\.parquet changed since this Parquet source was opened"):
        spawn.apply(_read_in_child, (blob, [0]))
    os.remove(paths[0])
    with pytest.raises(FormatError, match="changed since"):
        pickle.loads(blob)
