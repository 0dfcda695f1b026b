"""In the workers our tasks ran in: zips on sys.path are re-read only when they change (CPython
3.10/3.11 re-read them all before every task), and what was loaded is out of the way of the
full collection pyspark runs after every task."""

from __future__ import annotations

import gc
import importlib
import os
import sys
import weakref
import zipfile
import zipimport
from typing import Any

import pytest

from petastream.spark import _python_worker
from petastream.spark._python_worker import (
    _AFFECTED,
    freeze_what_is_loaded,
    reread_zips_only_when_changed,
)


@pytest.fixture
def unfrozen(monkeypatch):
    """Leave the test process's collector as it was."""
    monkeypatch.setattr(_python_worker, "_frozen_in", None)
    yield
    gc.unfreeze()


def test_what_is_loaded_is_frozen_once_per_process(unfrozen):
    assert freeze_what_is_loaded() is True and _python_worker._frozen_in == os.getpid()
    frozen = gc.get_freeze_count()
    assert frozen > 1000  # the modules, classes and functions of this process
    # not again: nothing new joins the frozen (which shrink as reference counting frees some)
    assert freeze_what_is_loaded() is False and gc.get_freeze_count() <= frozen

    class Node:
        other: Any = None

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle made after the freeze...
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None  # ...is collected as before


@pytest.fixture
def zip_on_path(tmp_path, monkeypatch):
    archive = tmp_path / "pkgs.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("zipped_mod_a.py", "VALUE = 1\n")
    monkeypatch.syspath_prepend(str(archive))
    importlib.invalidate_caches()
    yield archive
    for name in ("zipped_mod_a", "zipped_mod_b"):
        sys.modules.pop(name, None)
    for finder in list(sys.path_importer_cache.values()):  # leave the process as it was
        if isinstance(finder, zipimport.zipimporter) and "invalidate_caches" in vars(finder):
            del finder.invalidate_caches
    sys.path_importer_cache.pop(str(archive), None)


@pytest.mark.skipif(not _AFFECTED, reason="only CPython 3.10/3.11 re-read zips on invalidation")
def test_an_unchanged_zip_is_not_reread_and_a_changed_one_is(zip_on_path, monkeypatch):
    import zipped_mod_a

    assert zipped_mod_a.VALUE == 1
    reads = []
    real = zipimport._read_directory
    monkeypatch.setattr(zipimport, "_read_directory", lambda path: reads.append(path) or real(path))
    importlib.invalidate_caches()
    assert str(zip_on_path) in reads  # what every Spark task paid for every zip

    assert reread_zips_only_when_changed() >= 1
    assert reread_zips_only_when_changed() == 0  # guarded once
    reads.clear()
    importlib.invalidate_caches()
    assert reads == []

    with zipfile.ZipFile(zip_on_path, "a") as z:  # a new module: size and mtime change
        z.writestr("zipped_mod_b.py", "VALUE = 2\n")
    importlib.invalidate_caches()
    assert reads == [str(zip_on_path)]
    import zipped_mod_b

    assert zipped_mod_b.VALUE == 2
    reads.clear()
    importlib.invalidate_caches()
    assert reads == []


def test_nothing_is_done_where_invalidation_is_already_lazy(zip_on_path, monkeypatch):
    import zipped_mod_a  # noqa: F401

    monkeypatch.setattr(_python_worker, "_AFFECTED", False)  # CPython 3.12+, or 3.9
    assert reread_zips_only_when_changed() == 0
    assert "invalidate_caches" not in vars(sys.path_importer_cache[str(zip_on_path)])


def _invalidation_rereads(batches, unguard=False):
    """A task: how many zip directories ``importlib.invalidate_caches()`` re-reads in this
    worker, and how many objects are frozen (after undoing both first, with ``unguard``)."""
    import gc
    import importlib
    import zipimport

    import pyarrow as pa

    for _ in batches:
        pass
    if unguard:
        for finder in list(sys.path_importer_cache.values()):
            if isinstance(finder, zipimport.zipimporter) and "invalidate_caches" in vars(finder):
                del finder.invalidate_caches
        gc.unfreeze()
        if "petastream.spark._python_worker" in sys.modules:
            sys.modules["petastream.spark._python_worker"]._frozen_in = None
    reads = []
    real = zipimport._read_directory
    zipimport._read_directory = lambda path: reads.append(path) or real(path)
    try:
        importlib.invalidate_caches()
    finally:
        zipimport._read_directory = real
    yield pa.RecordBatch.from_pydict({"rereads": [len(reads)], "frozen": [gc.get_freeze_count()]})


def _unguard_then_rereads(batches):
    return _invalidation_rereads(batches, unguard=True)


def test_a_materialization_task_lightens_its_worker(zip_on_path, tmp_path, unfrozen):
    import pyarrow as pa
    import zipped_mod_a  # noqa: F401

    from petastream.spark._task import TaskWriter
    from petastream.spark.schema import ColumnPlan

    task = TaskWriter(str(tmp_path / "out"), [ColumnPlan("id", "int64", "plain")],
                      compression=None, hashes=[], size_limit=None, fill=False,
                      storage_options=None)
    [result] = task(iter([pa.RecordBatch.from_pydict({"id": pa.array([1, 2], pa.int64())})]))
    assert result.column("samples").to_pylist() == [2]
    guarded = "invalidate_caches" in vars(sys.path_importer_cache[str(zip_on_path)])
    assert guarded == _AFFECTED
    assert gc.get_freeze_count() > 0


@pytest.mark.spark
@pytest.mark.skipif(not _AFFECTED, reason="only CPython 3.10/3.11 re-read zips on invalidation")
def test_workers_that_ran_a_materialization_task_are_lightened(spark, cache_dir):
    """8 tasks on 2 slots pass through every idle worker (Spark hands them out first in,
    first out), so the probe's tasks run where a materialization task ran."""
    from petastream.spark import materialize

    probe = spark.range(8, numPartitions=8)
    schema = "rereads long, frozen long"
    before = probe.mapInArrow(_unguard_then_rereads, schema).collect()
    assert min(r.rereads for r in before) > 0  # pyspark.zip, py4j's zip, spark-core's jar
    assert {r.frozen for r in before} == {0}
    materialize(spark.range(100, numPartitions=8), cache_dir, reuse=False)
    after = probe.mapInArrow(_invalidation_rereads, schema).collect()
    assert [r.rereads for r in after] == [0] * 8
    assert min(r.frozen for r in after) > 1000
