"""One local Spark session per test process, shared by every test directory.

A classic ``local[2]`` session that also serves Spark Connect (the Connect plugin in the same
JVM, on a free loopback port): ``SparkSession.builder.remote("local[2]")`` refuses to start
beside a classic session in one process, so Connect tests talk to this one instead.
"""

from __future__ import annotations

import glob
import os
import sys
from typing import Any

from tests.servers import free_port

_STATE: dict[str, Any] = {}


def classic() -> Any:
    if "spark" not in _STATE:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession

        port = free_port() if has_connect_server() else None
        # pyspark 3.5.0 (the minimum-versions run) now and then hands a task a reused Python
        # worker whose socket is closed ("java.net.SocketException: Socket is closed", seen
        # once in four runs on a loaded machine): let a task be tried twice there. Most likely
        # SPARK-54217 (seen on 4.1 as ClosedChannelException / CancelledKeyException): a task
        # cancelled after its job failed, slow to finish, has its already released worker
        # destroyed under the next job's task. petastream's write tasks no longer fail on data
        # errors (spark/_task.py), but a test whose own code fails a task can still set it off.
        master = "local[2]" if port is not None else "local[2,2]"
        builder = (
            SparkSession.builder.master(master)
            .appName("petastream-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.memory", "2g")
        )
        if port is not None:
            builder = (
                builder.config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
                .config("spark.connect.grpc.binding.address", "127.0.0.1")
                .config("spark.connect.grpc.binding.port", str(port))
            )
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        _STATE.update(spark=session, port=port)
    return _STATE["spark"]


def has_connect_server() -> bool:
    """pyspark 4 ships the Connect server jar; 3.5 (the oldest supported, in the
    minimum-versions run) does not, and then the Connect tests are skipped."""
    import pyspark

    return bool(glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "spark-connect_*.jar")))


def connect_port() -> int:
    classic()
    if _STATE["port"] is None:
        import pytest

        pytest.skip("this pyspark has no Spark Connect server (pyspark < 4)")
    return _STATE["port"]


def connect() -> Any:
    if "connect" not in _STATE:
        port = connect_port()
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        session = RemoteSparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
        session.conf.set("spark.sql.session.timeZone", "UTC")
        _STATE["connect"] = session
    return _STATE["connect"]
