"""Fixtures of the Parquet source tests: a directory of Parquet files of every supported type."""

from __future__ import annotations

import pytest

from tests.parquet.helpers import table, write_files

N = 200  # rows over 3 files, row groups of 40 rows


@pytest.fixture(scope="module")
def data():
    return table(N)


@pytest.fixture(scope="module")
def pq_dir(tmp_path_factory, data):
    root = str(tmp_path_factory.mktemp("parquet") / "data")
    write_files(data, root, files=3, row_group_size=40)
    return root


@pytest.fixture(scope="session")
def recording_s3(tmp_path_factory):
    """A moto S3 server on loopback that records every request (tests count GETs per file)."""
    import os
    import subprocess
    import sys
    import time
    import urllib.request

    from tests.mds.conftest import RecordingS3
    from tests.servers import free_port

    log = str(tmp_path_factory.mktemp("moto-recording") / "requests.jsonl")
    port = free_port()
    env = {**os.environ, "MOTO_ENABLE_RECORDING": "True", "MOTO_RECORDER_FILEPATH": log}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=1)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.2)
        yield RecordingS3(endpoint, log)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def s3_data(recording_s3, monkeypatch, pq_dir):
    """The test files uploaded to a fresh bucket; yields ``(s3 URL of the directory, server)``."""
    import uuid

    import s3fs

    from tests.servers import s3_env

    for key, value in s3_env(recording_s3.endpoint).items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem()
    bucket = f"pq-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    fs.put(pq_dir + "/", f"{bucket}/data/", recursive=True)
    yield f"s3://{bucket}/data", recording_s3
    s3fs.S3FileSystem.clear_instance_cache()
