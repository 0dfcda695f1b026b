"""Zips on sys.path are re-read only when they change, in the workers our tasks ran in
(CPython 3.10/3.11: ``importlib.invalidate_caches()`` re-read them all before every task)."""

from __future__ import annotations

import importlib
import sys
import zipfile
import zipimport

import pytest

from petastream.spark._zipimport import _AFFECTED, reread_zips_only_when_changed


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

    from petastream.spark import _zipimport

    monkeypatch.setattr(_zipimport, "_AFFECTED", False)  # CPython 3.12+, or 3.9
    assert reread_zips_only_when_changed() == 0
    assert "invalidate_caches" not in vars(sys.path_importer_cache[str(zip_on_path)])


def _invalidation_rereads(batches, unguard=False):
    """A task: how many zip directories ``importlib.invalidate_caches()`` re-reads in this
    worker (after removing the guards first, with ``unguard``)."""
    import importlib
    import zipimport

    import pyarrow as pa

    for _ in batches:
        pass
    if unguard:
        for finder in list(sys.path_importer_cache.values()):
            if isinstance(finder, zipimport.zipimporter) and "invalidate_caches" in vars(finder):
                del finder.invalidate_caches
    reads = []
    real = zipimport._read_directory
    zipimport._read_directory = lambda path: reads.append(path) or real(path)
    try:
        importlib.invalidate_caches()
    finally:
        zipimport._read_directory = real
    yield pa.RecordBatch.from_pydict({"rereads": [len(reads)]})


def _unguard_then_rereads(batches):
    return _invalidation_rereads(batches, unguard=True)


def test_a_materialization_task_guards_the_zips_of_its_worker(zip_on_path, tmp_path):
    import pyarrow as pa
    import zipped_mod_a  # noqa: F401

    from petastream.spark._task import TaskWriter
    from petastream.spark.schema import ColumnPlan

    task = TaskWriter(str(tmp_path / "out"), [ColumnPlan("id", "int64", "plain")],
                      compression=None, hashes=[], size_limit=None, fill=False,
                      storage_options=None)
    [result] = task(iter([pa.record_batch({"id": pa.array([1, 2], pa.int64())})]))
    assert result.column("samples").to_pylist() == [2]
    guarded = "invalidate_caches" in vars(sys.path_importer_cache[str(zip_on_path)])
    assert guarded == _AFFECTED


@pytest.mark.spark
@pytest.mark.skipif(not _AFFECTED, reason="only CPython 3.10/3.11 re-read zips on invalidation")
def test_workers_that_ran_a_materialization_task_skip_the_rereads(spark, cache_dir):
    """8 tasks on 2 slots pass through every idle worker (Spark hands them out first in,
    first out), so the probe's tasks run where a materialization task ran."""
    from petastream.spark import materialize

    probe = spark.range(8, numPartitions=8)
    before = probe.mapInArrow(_unguard_then_rereads, "rereads long").collect()
    assert min(r.rereads for r in before) > 0  # pyspark.zip, py4j's zip, spark-core's jar
    materialize(spark.range(100, numPartitions=8), cache_dir, reuse=False)
    after = probe.mapInArrow(_invalidation_rereads, "rereads long").collect()
    assert [r.rereads for r in after] == [0] * 8
