"""Fixtures of the shard-cache tests: a moto S3 server that records every request it serves,
so tests count shard GETs on the server itself."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter

import pytest

from tests.servers import free_port, s3_env


class RecordingS3:
    """A moto server on loopback with its request recorder on (``MOTO_ENABLE_RECORDING``)."""

    def __init__(self, endpoint: str, log: str):
        self.endpoint, self.log = endpoint, log

    def reset(self) -> None:
        req = urllib.request.Request(self.endpoint + "/moto-api/recorder/reset-recording", method="POST")
        urllib.request.urlopen(req, timeout=10).read()

    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of every request since the last reset."""
        if not os.path.exists(self.log):
            return []
        out = []
        with open(self.log) as f:
            for line in f:
                entry = json.loads(line)
                out.append((entry["method"], entry["url"].split("?", 1)[0]))
        return out

    def shard_gets(self) -> Counter:
        """GET requests per shard file (path-style URL: /bucket/key)."""
        return Counter(path for method, path in self.requests()
                       if method == "GET" and "/shard." in path)


@pytest.fixture(scope="session")
def recording_s3(tmp_path_factory):
    log = str(tmp_path_factory.mktemp("moto-recording") / "requests.jsonl")
    port = free_port()
    env = {**os.environ, "MOTO_ENABLE_RECORDING": "True", "MOTO_RECORDER_FILEPATH": log}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
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
def recorded_bucket(recording_s3, monkeypatch):
    """A fresh bucket on the recording server; yields ``(s3 url, server, env for children)``."""
    import s3fs

    env = s3_env(recording_s3.endpoint)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()
    bucket = f"cache-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem().mkdir(bucket)
    yield f"s3://{bucket}", recording_s3, env
    with contextlib.suppress(Exception):
        s3fs.S3FileSystem.clear_instance_cache()
