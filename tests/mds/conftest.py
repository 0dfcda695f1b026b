"""Fixtures of the shard-cache tests: a moto S3 server that records every request it serves
(tests count shard GETs on the server itself), and Azurite for Azure Blob Storage (abfs://)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.error
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


# -- Azure Blob Storage: Azurite (npm) on loopback, for abfs:// through adlfs ------------------

AZURITE_VERSION = "3.37.0"
AZURITE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           ".azurite")
# Azurite's documented development account (a public, fixed key: not a secret).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _azurite_binary() -> str | None:
    """``.azurite/node_modules/.bin/azurite-blob``, installed with npm on first use; None
    (skip) only when node or npm is missing."""
    import shutil

    exe = os.path.join(AZURITE_DIR, "node_modules", ".bin", "azurite-blob")
    if os.path.exists(exe):
        return exe
    if not (shutil.which("node") and shutil.which("npm")):
        return None
    os.makedirs(AZURITE_DIR, exist_ok=True)
    subprocess.run(["npm", "install", "--prefix", AZURITE_DIR, "--no-audit", "--no-fund",
                    f"azurite@{AZURITE_VERSION}"], check=True, timeout=600,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return exe


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    """Azurite's blob service on 127.0.0.1; yields adlfs storage options for it."""
    exe = _azurite_binary()
    if exe is None:
        pytest.skip("node/npm not installed: Azurite (npm) cannot run")
    port = free_port()
    proc = subprocess.Popen([exe, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--silent",
                             "--skipApiVersionCheck", "--loose",
                             "--location", str(tmp_path_factory.mktemp("azurite"))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"
    conn = (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={endpoint};")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(endpoint + "?comp=list", timeout=1)
            except urllib.error.HTTPError:
                break  # it answers (unauthenticated: 403)
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("azurite did not start") from None
                time.sleep(0.2)
            else:
                break
        yield {"connection_string": conn}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # node may linger on open keep-alive sockets
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def abfs_container(azurite):
    """A fresh container; yields ``(abfs:// URL, storage_options)``."""
    import adlfs

    fs = adlfs.AzureBlobFileSystem(**azurite)
    name = f"cache-{uuid.uuid4().hex[:12]}"
    fs.mkdir(name)
    yield f"abfs://{name}", azurite
