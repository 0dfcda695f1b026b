"""A remote :class:`~petastream.storage.location.Location` used in a forked child process.

fsspec's async filesystems (s3, gcs, abfs, http) run on an event-loop thread of the process
that made them and refuse use from a forked child ("This class is not fork-safe"); a Location,
and every dataset holding one, must work in DataLoader workers forked after it was opened.
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import petastream
from petastream.mds.writer import write_mds
from petastream.storage.location import resolve
from tests.servers import local_server

# Every test here needs the cloud filesystems (s3fs, gcsfs, adlfs, fsspec's http: the 'cloud'
# extra), which the minimum-versions environments do not install.
pytestmark = pytest.mark.cloud

N = 300
DATA = {"id": np.arange(N), "s": np.array([f"v{i}" for i in range(N)], dtype=object)}


def _in_forked_child(fn: Callable[[], Any]) -> Any:
    """``fn()`` run in a child forked from this process: its result, or its error re-raised."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()

    def target() -> None:
        try:
            queue.put(("ok", fn()))
        except BaseException as e:
            queue.put(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))

    child = ctx.Process(target=target)
    child.start()
    try:
        status, value = queue.get(timeout=120)
    finally:
        child.join(timeout=60)
    if status == "error":
        raise AssertionError(f"in the forked child: {value}")
    return value


# Storage options that build each filesystem without reaching a server.
OFFLINE = {
    "s3://bucket/ds": {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}},
    "gs://bucket/ds": {"token": "anon", "endpoint_url": "http://127.0.0.1:9"},
    "abfs://container/ds": {"connection_string": "DefaultEndpointsProtocol=http;AccountName=a;"
                                                 "AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:9/a;"},
    "http://127.0.0.1:9/ds": {},
}


@pytest.mark.parametrize("url", list(OFFLINE))
def test_every_remote_filesystem_is_reopened_in_a_forked_child(url):
    loc = resolve(url, OFFLINE[url])
    parent_fs = loc.fs

    def child() -> tuple[bool, bool, bool]:
        fs = loc.fs
        fs.loop  # noqa: B018  # the parent's instance raises "This class is not fork-safe" here
        return fs is not parent_fs, loc.child("x").fs is fs, fs.storage_options == parent_fs.storage_options

    assert _in_forked_child(child) == (True, True, True)
    assert loc.fs is parent_fs  # the parent keeps its own


def test_pickled_location_rebuilds_its_filesystem_in_the_receiver():
    import pickle

    loc = resolve("s3://bucket/ds", OFFLINE["s3://bucket/ds"])
    copy = pickle.loads(pickle.dumps(loc))
    assert (copy.url, copy.path, copy.fs.storage_options) == (loc.url, loc.path, loc.fs.storage_options)
    assert _in_forked_child(lambda: pickle.loads(pickle.dumps(loc)).fs.loop is not None)


def _read_all_in_a_forked_child(url: str, cache_dir: str, **options: Any) -> None:
    # Opened (index read, filesystem in use) here, read there: nothing of it is cached yet.
    ds = petastream.open(url, cache_dir=cache_dir, **options)
    got = _in_forked_child(lambda: ds.read(np.arange(N)[::-1])["id"].tolist())
    assert got == list(range(N - 1, -1, -1))


def test_forked_child_reads_an_s3_dataset(s3_bucket, tmp_path):
    url = f"{s3_bucket}/fork"
    write_mds(DATA, url, size_limit=500, compression="zstd")
    _read_all_in_a_forked_child(url, str(tmp_path / "cache"))


def test_forked_child_reads_an_azure_blob_dataset(abfs_container, tmp_path):
    container, options = abfs_container
    url = f"{container}/fork"
    write_mds(DATA, url, size_limit=500, compression="zstd", storage_options=options)
    _read_all_in_a_forked_child(url, str(tmp_path / "cache"), storage_options=options)


@pytest.fixture
def http_root(tmp_path) -> Iterator[tuple[str, str]]:
    """``(directory, its http:// URL)``: Python's static file server on loopback."""
    root = tmp_path / "www"
    root.mkdir()
    with local_server(["http.server", "--bind", "127.0.0.1", "{port}", "--directory", str(root)], "/") as base:
        yield str(root), base


def test_forked_child_reads_an_http_dataset(http_root, tmp_path):
    root, base = http_root
    write_mds(DATA, os.path.join(root, "ds"), size_limit=500, compression="zstd")
    _read_all_in_a_forked_child(f"{base}/ds", str(tmp_path / "cache"))
