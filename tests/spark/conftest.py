"""Spark test fixtures. The session itself (``spark``, ``spark_connect``) is in tests/conftest.py:
one classic local session per test run, with the Spark Connect server plugin
loaded into the same JVM, and one Connect client session talking to it.

``SparkSession.builder.remote("local[2]")`` refuses to start while a classic session runs in the
process (SESSION_ALREADY_EXIST), so instead of two JVMs the classic session serves Connect on a
free loopback port and the Connect client (``pyspark.sql.connect.session.SparkSession``) uses
``sc://localhost:<port>``. Both run in the pytest process.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh parent cache directory; the in-process de-dup forgets earlier tests."""
    from petastream.spark import materializer

    materializer._REGISTRY.clear()
    path = tmp_path / "cache"
    path.mkdir()
    return str(path)
