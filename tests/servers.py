"""Real services on loopback for tests: an S3 API (moto server) that s3fs talks HTTP to."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto_s3_server() -> Iterator[str]:
    """Start ``moto_server`` on 127.0.0.1 and yield its endpoint URL; stop it afterwards."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
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
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)


S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def s3_env(endpoint: str) -> dict[str, str]:
    """Environment that points boto/s3fs at the loopback endpoint."""
    return {**S3_ENV, "AWS_ENDPOINT_URL": endpoint, "AWS_ENDPOINT_URL_S3": endpoint,
            "NO_PROXY": "127.0.0.1,localhost", **{k: v for k, v in os.environ.items() if k == "PATH"}}
