"""One local Spark session per test process, shared by every test directory.

A classic ``local[2]`` session that also serves Spark Connect (the Connect plugin in the same
JVM, on a free loopback port): ``SparkSession.builder.remote("local[2]")`` refuses to start
beside a classic session in one process, so Connect tests talk to this one instead.
"""

from __future__ import annotations

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

        port = free_port()
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
            .config("spark.connect.grpc.binding.port", str(port))
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        _STATE.update(spark=session, port=port)
    return _STATE["spark"]


def connect_port() -> int:
    classic()
    return _STATE["port"]


def connect() -> Any:
    if "connect" not in _STATE:
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        session = RemoteSparkSession.builder.remote(f"sc://127.0.0.1:{connect_port()}").getOrCreate()
        session.conf.set("spark.sql.session.timeZone", "UTC")
        _STATE["connect"] = session
    return _STATE["connect"]
