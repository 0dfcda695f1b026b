"""Shared test configuration. Framework-specific fixtures (Spark, servers) live in their own
conftest files next to the tests that need them, so a run of tests/mds never starts Spark."""

from __future__ import annotations

import os
import sys

import pytest

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "mds")


@pytest.fixture(autouse=True)
def _isolated_shard_cache(tmp_path, monkeypatch):
    # Every test gets its own shard cache, so no test reads another's decompressed shards.
    monkeypatch.setenv("PETASTREAM_CACHE_DIR", str(tmp_path / "shard-cache"))
    yield
    # Worker processes parked by this test's loaders serve only this test's environment (its
    # cache dir): stop them now rather than a minute later, beside the next tests' workers.
    parking = sys.modules.get("petastream.pipeline.procpool.parking")
    if parking is not None:
        parking.shutdown_idle()


@pytest.fixture(scope="session")
def s3_endpoint():
    """A moto S3 server on loopback for the whole session (started on first use)."""
    from tests.servers import moto_s3_server

    with moto_s3_server() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def recording_s3(tmp_path_factory):
    """A moto S3 server on loopback that records every request (tests count GETs per file)."""
    from tests.mds.conftest import RecordingS3
    from tests.servers import moto_s3_server

    log = str(tmp_path_factory.mktemp("moto-recording") / "requests.jsonl")
    with moto_s3_server({"MOTO_ENABLE_RECORDING": "True", "MOTO_RECORDER_FILEPATH": log}) as endpoint:
        yield RecordingS3(endpoint, log)


@pytest.fixture
def s3_bucket(s3_endpoint, monkeypatch):
    """A fresh bucket on the loopback S3 server; yields its ``s3://`` URL."""
    import uuid

    import s3fs

    from tests.servers import s3_env

    for key, value in s3_env(s3_endpoint).items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_endpoint})
    bucket = f"petastream-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    yield f"s3://{bucket}"
    s3fs.S3FileSystem.clear_instance_cache()


# Spark: one local session (serving Spark Connect too) for the whole run, started on first use.
@pytest.fixture(scope="session")
def spark():
    from tests import spark_session

    return spark_session.classic()


@pytest.fixture(scope="session")
def connect_port(spark):
    from tests import spark_session

    return spark_session.connect_port()


@pytest.fixture(scope="session")
def spark_connect(spark):
    from tests import spark_session

    return spark_session.connect()
