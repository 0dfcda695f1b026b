"""Petastorm's cache-directory URL rules, with its exact messages (users match on them)."""

from __future__ import annotations

import logging
import os
from urllib.parse import urlparse

__all__ = [
    "normalize_dir_url",
    "check_url",
    "make_sub_dir_url",
    "normalize_databricks_dbfs_url",
    "check_parent_cache_dir_url",
    "url_to_local_path",
]

logger = logging.getLogger("petastream.compat.spark_dataset_converter")

CONF = "petastorm.spark.converter.parentCacheDirUrl"
DBFS_PATH_ERROR = (
    "On databricks runtime, if `df` argument is a string, it must be a dbfs fuse path like "
    "'file:/dbfs/xxx' or a dbfs path like 'dbfs:/xxx'."
)


def normalize_dir_url(dataset_url: object) -> str:
    """Petastorm's ``normalize_dir_url``: a string, with one trailing '/' removed."""
    if not isinstance(dataset_url, str):
        raise ValueError("directory url must be a string")
    if not dataset_url:
        # Petastorm indexes dataset_url[-1] and fails with IndexError on ''.
        raise IndexError("string index out of range")
    return dataset_url[:-1] if dataset_url[-1] == "/" else dataset_url


def check_url(dir_url: str) -> None:
    if not urlparse(dir_url).scheme:
        raise ValueError(
            f"ERROR! A scheme-less directory url ({dir_url}) is no longer supported. "
            'Please prepend "file://" for local filesystem.'
        )


def make_sub_dir_url(dir_url: str, name: str) -> str:
    parsed = urlparse(dir_url)
    return parsed._replace(path=parsed.path + "/" + name).geturl()


def normalize_databricks_dbfs_url(url: str, err_msg: str = DBFS_PATH_ERROR) -> str:
    if not (url.startswith("file:/dbfs/") or url.startswith("file:///dbfs/")
            or url.startswith("dbfs:///") or (url.startswith("dbfs:/") and not url.startswith("dbfs://"))):
        raise ValueError(err_msg)
    if url.startswith("dbfs:///"):
        return "file:/dbfs/" + url[len("dbfs:///"):]
    if url.startswith("dbfs:/"):
        return "file:/dbfs/" + url[len("dbfs:/"):]
    return url


def url_to_local_path(url: str) -> str | None:
    """The local path behind a ``file:`` URL (netloc ignored, as Petastorm), else None."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return parsed.path
    if not parsed.scheme:
        return url
    return None


def check_parent_cache_dir_url(dir_url: str, *, is_local_mode: bool) -> None:
    """Petastorm's ``_check_parent_cache_dir_url``: scheme required, remote scheme needs a
    bucket, and the Databricks fuse-path warning on non-local clusters."""
    check_url(dir_url)
    parsed = urlparse(dir_url)
    if parsed.scheme != "file" and not parsed.netloc:
        raise ValueError(f"URLs must be of the form {parsed.scheme}://bucket/path")
    local = url_to_local_path(dir_url)
    if ("DATABRICKS_RUNTIME_VERSION" in os.environ and not is_local_mode
            and local is not None and not local.startswith("/dbfs/")):
        logger.warning(
            "Usually, when running on databricks spark cluster, you should specify a dbfs fuse "
            "path for %s, like: 'file:/dbfs/path/to/cache_dir', otherwise, you should mount NFS "
            "to this directory '%s' on all nodes of the cluster, e.g. using EFS.",
            CONF, dir_url,
        )
