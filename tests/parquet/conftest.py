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
