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
def local_server(args: list[str], probe: str, env: dict[str, str] | None = None,
                 timeout: float = 60.0) -> Iterator[str]:
    """Run ``python -m <args>`` (a server on loopback, given its port as ``{port}``), wait until
    ``probe`` (a path) answers, yield its base URL; stop it afterwards."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", *(a.format(port=port) for a in args)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(base + probe, timeout=1)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{args[0]} did not start") from None
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def moto_s3_server(env: dict[str, str] | None = None) -> Iterator[str]:
    """Start ``moto_server`` on 127.0.0.1 and yield its endpoint URL; stop it afterwards."""
    with local_server(["moto.server", "-H", "127.0.0.1", "-p", "{port}"], "/moto-api/", env) as endpoint:
        yield endpoint


S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def s3_env(endpoint: str) -> dict[str, str]:
    """Environment that points boto/s3fs at the loopback endpoint."""
    return {**S3_ENV, "AWS_ENDPOINT_URL": endpoint, "AWS_ENDPOINT_URL_S3": endpoint,
            "NO_PROXY": "127.0.0.1,localhost", **{k: v for k, v in os.environ.items() if k == "PATH"}}
