"""Petastorm's URL rules and Horovod checks (spec tests #9, #10, #14, #27, #30)."""

from __future__ import annotations

import logging

import pytest

from petastream.compat._horovod import (
    check_rank_and_size_consistent_with_horovod,
    get_horovod_rank_and_size,
)
from petastream.compat._urls import (
    check_parent_cache_dir_url,
    check_url,
    make_sub_dir_url,
    normalize_databricks_dbfs_url,
    normalize_dir_url,
)


def test_check_url_rejects_scheme_less():
    with pytest.raises(ValueError, match="scheme-less"):
        check_url("/a/b/c")
    check_url("file:///a/b/c")


@pytest.mark.parametrize("parent, name, want", [
    ("file:///a/b", "c", "file:///a/b/c"),
    ("hdfs:/a/b", "c", "hdfs:/a/b/c"),
    ("hdfs://nn1:9000/a/b", "c", "hdfs://nn1:9000/a/b/c"),
])
def test_make_sub_dir_url(parent, name, want):
    assert make_sub_dir_url(parent, name) == want


@pytest.mark.parametrize("url, want", [
    ("dbfs:/xx/yy", "file:/dbfs/xx/yy"),
    ("dbfs:///xx/yy", "file:/dbfs/xx/yy"),
    ("file:/dbfs/xx/yy", "file:/dbfs/xx/yy"),
    ("file:///dbfs/xx/yy", "file:///dbfs/xx/yy"),
])
def test_normalize_databricks_dbfs_url(url, want):
    assert normalize_databricks_dbfs_url(url) == want


def test_normalize_databricks_dbfs_url_rejects_netloc_form():
    with pytest.raises(ValueError, match="dbfs fuse path"):
        normalize_databricks_dbfs_url("dbfs://xx/yy")


def test_normalize_dir_url():
    assert normalize_dir_url("file:///a/") == "file:///a"
    with pytest.raises(ValueError, match="directory url must be a string"):
        normalize_dir_url(3)


def test_parent_dir_needs_bucket_for_remote_schemes():
    with pytest.raises(ValueError, match=r"URLs must be of the form s3://bucket/path"):
        check_parent_cache_dir_url("s3:/x", is_local_mode=True)


def test_dbfs_fuse_warning_only_on_databricks_clusters(monkeypatch, caplog):
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "7.0")
    with caplog.at_level(logging.WARNING):
        check_parent_cache_dir_url("file:///tmp/cache", is_local_mode=True)
        assert "you should specify a dbfs fuse path" not in caplog.text
        check_parent_cache_dir_url("file:///dbfs/cache", is_local_mode=False)
        assert "you should specify a dbfs fuse path" not in caplog.text
        check_parent_cache_dir_url("file:///tmp/cache", is_local_mode=False)
        assert "you should specify a dbfs fuse path" in caplog.text


@pytest.mark.parametrize("env", [
    {"HOROVOD_RANK": "1", "HOROVOD_SIZE": "3"},
    {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "3"},
    {"PMI_RANK": "1", "PMI_SIZE": "3"},
])
def test_horovod_rank_compatibility(monkeypatch, env, caplog):
    for var in ("HOROVOD_RANK", "HOROVOD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert get_horovod_rank_and_size() == (1, 3)
    assert check_rank_and_size_consistent_with_horovod({"cur_shard": 1, "shard_count": 3})
    with caplog.at_level(logging.WARNING):
        assert not check_rank_and_size_consistent_with_horovod({"cur_shard": 1, "shard_count": 2})
    assert "is not consistent with horovod environments" in caplog.text
    assert not check_rank_and_size_consistent_with_horovod({})  # None is reported, not a crash


def test_no_horovod_env(monkeypatch):
    for var in ("HOROVOD_RANK", "HOROVOD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert get_horovod_rank_and_size() == (None, None)
    assert check_rank_and_size_consistent_with_horovod({"cur_shard": 0, "shard_count": 2})
