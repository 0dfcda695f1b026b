"""``materialize`` keeps a destination the user named; progress on Connect and on a terminal
(issue #15, points 5 and 6)."""

from __future__ import annotations

import io
import logging
import os

import pytest

from petastream.spark import cache, leases, materialize
from petastream.spark._progress import Reporter

pytestmark = pytest.mark.spark


def test_a_named_destination_is_kept_at_exit(spark, cache_dir):
    m = materialize(spark.range(0, 30, 1, 2), cache_dir)
    assert m.created and leases.kept(m.url)
    m.delete()


def test_keep_at_exit_false_deletes_a_named_destination_at_exit(spark, cache_dir):
    m = materialize(spark.range(0, 31, 1, 2), cache_dir, keep_at_exit=False)
    assert m.created and leases.held(m.url) and not leases.kept(m.url)
    m.delete()
    assert not leases.held(m.url) and not os.path.exists(m.url)


def test_a_cache_dir_from_the_spark_conf_is_deleted_at_exit(spark, cache_dir):
    spark.conf.set(cache.PARENT_CONF, cache_dir)
    try:
        m = materialize(spark.range(0, 32, 1, 2))
    finally:
        spark.conf.unset(cache.PARENT_CONF)
    assert m.created and leases.held(m.url) and not leases.kept(m.url)
    m.delete()


def test_connect_progress_lines(spark_connect, cache_dir, caplog):
    from pyspark.sql.connect import functions as F

    if not hasattr(spark_connect, "registerProgressHandler"):
        pytest.skip("Spark Connect progress handlers need pyspark >= 4")
    spark_connect.conf.set("spark.connect.progress.reportInterval", "50ms")
    slow = F.udf(lambda i: __import__("time").sleep(0.004) or i, "long")
    df = spark_connect.range(0, 400, 1, 2).select(slow("id").alias("id"))
    with caplog.at_level(logging.INFO, logger="petastream.spark"):
        m = materialize(df, cache_dir, progress_interval=0.05)
    assert "materializing: " in caplog.text and "tasks done" in caplog.text
    assert "materialized 400 rows" in caplog.text
    m.delete()


def test_quiet_without_info_logging(spark, cache_dir, caplog, capfd):
    with caplog.at_level(logging.WARNING, logger="petastream.spark"):
        materialize(spark.range(0, 33, 1, 2), cache_dir, progress_interval=0.01).delete()
    assert caplog.text == "" and "materializ" not in capfd.readouterr().err


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_tqdm_bar_and_no_log_lines(monkeypatch, caplog):
    pytest.importorskip("tqdm")
    term = _Terminal()
    monkeypatch.setattr("sys.stderr", term)
    with caplog.at_level(logging.INFO, logger="petastream.spark"):
        r = Reporter("materializing", logging.getLogger("petastream.spark"), interval=0.0)
        r.update(1, 4)
        r.update(4, 4)
        r.close()
    assert "materializing" in term.getvalue() and "4/4" in term.getvalue()
    assert caplog.text == ""
