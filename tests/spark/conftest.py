"""Spark fixtures: one classic local session per test run, with the Spark Connect server plugin
loaded into the same JVM, and one Connect client session talking to it.

``SparkSession.builder.remote("local[2]")`` refuses to start while a classic session runs in the
process (SESSION_ALREADY_EXIST), so instead of two JVMs the classic session serves Connect on a
free loopback port and the Connect client (``pyspark.sql.connect.session.SparkSession``) uses
``sc://localhost:<port>``. Both run in the pytest process.
"""

from __future__ import annotations

import os
import socket
import sys

import pytest

pyspark = pytest.importorskip("pyspark")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def connect_port() -> int:
    return _free_port()


@pytest.fixture(scope="session")
def spark(connect_port):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("petastream-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.connect.grpc.binding.port", str(connect_port))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_connect(spark, connect_port):
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    session = RemoteSparkSession.builder.remote(f"sc://127.0.0.1:{connect_port}").getOrCreate()
    session.conf.set("spark.sql.session.timeZone", "UTC")
    yield session
    session.stop()


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh parent cache directory; the in-process de-dup forgets earlier tests."""
    from petastream.spark import materializer

    materializer._REGISTRY.clear()
    path = tmp_path / "cache"
    path.mkdir()
    return str(path)
