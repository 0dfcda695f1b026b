"""From what a user passes a loader (a URL, a list of URLs, or a source) to a :class:`~petastream.source.Source`.

:func:`resolve_source` is the one resolver of "a URL or a source" (loaders reach it through
:func:`petastream.mix.open_source`, which makes a list of ``Stream`` a mixture first). It
decides the format by what is there:

* a :class:`~petastream.source.Source` (an ``MDSDataset``, a ``ParquetSource``, ...) is used as is;
* a directory holding ``_delta_log`` is a Delta table (:class:`~petastream.delta.DeltaSource`: one
  snapshot of it, never its directory's files as plain Parquet);
* a directory holding ``index.json`` is an MDS dataset (:class:`~petastream.mds.dataset.MDSDataset`);
* a Parquet file, a directory of Parquet files or Hive partitions (``key=value``), or a list
  of files and directories, is Parquet (:class:`~petastream.parquet.ParquetSource`);
* a directory with MDS shard files but no ``index.json`` is an unfinished MDS write (the MDS
  reader's error says so); anything else is an error saying what was looked for.

``options`` go to the class chosen (a name it does not take is an error naming the format).
"""

from __future__ import annotations

import os
from typing import Any

from petastream.errors import (
    DatasetNotFoundError,
    FormatError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
)
from petastream.source import Source, is_source
from petastream.storage.location import Location, resolve

__all__ = ["resolve_source", "detect_format"]

_PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")


def detect_format(url: str | os.PathLike, storage_options: dict | None = None) -> str:
    """``"delta"``, ``"mds"`` or ``"parquet"`` for what lies at ``url``; an error when it is none."""
    from petastream.parquet.discover import is_delta_table

    loc = resolve(url, storage_options)
    if is_delta_table(loc):
        return "delta"
    if loc.exists("index.json"):
        return "mds"
    if not loc.exists():
        raise DatasetNotFoundError(f"nothing at {loc.url}: no MDS dataset (index.json not found) and no Parquet files")
    if not loc.isdir():
        return "parquet"  # a file given by name: the Parquet reader says if it is not one
    names = [n for n in loc.listdir() if not n.startswith(("_", "."))]
    if any(n.startswith("shard.") for n in names):
        return "mds"  # shard files without index.json: the MDS reader explains what is missing
    if any(n.lower().endswith(_PARQUET_SUFFIXES) or "=" in n for n in names):
        return "parquet"
    if any(_ends_with_magic(loc, n) for n in names[:8]):
        return "parquet"  # extension-less Parquet files (Hive's 000000_0)
    raise FormatError(
        f"{loc.url} is neither an MDS dataset (no index.json) nor a Parquet directory (no .parquet "
        f"files or key=value partitions among {names[:10]}); point at the dataset's directory")


def _ends_with_magic(loc: Location, name: str) -> bool:
    child = loc.child(name)
    try:
        if child.isdir():
            return False
        size = loc.size(name)
        if size < 12:
            return False
        if loc.is_local:
            with open(child.path, "rb") as f:
                f.seek(size - 4)
                return f.read(4) == b"PAR1"
        return bytes(loc.fs.cat_file(child.path, start=size - 4, end=size)) == b"PAR1"
    except OSError:
        return False


def resolve_source(url_or_source: Any, **options: Any) -> Source:
    """The :class:`~petastream.source.Source` for ``url_or_source`` (see the module doc):
    the one resolver of "a URL or a source" (loaders, mixtures' streams, compat)."""
    if is_source(url_or_source):
        if options:
            raise InvalidArgumentError(
                f"options {sorted(options)} (dataset_options) apply when a URL is opened, but an open "
                f"source was given ({type(url_or_source).__name__}): open it with those options instead")
        return url_or_source
    storage_options = options.get("storage_options")
    if isinstance(url_or_source, (str, os.PathLike)):
        fmt = detect_format(url_or_source, storage_options)
    elif isinstance(url_or_source, (list, tuple)) and all(
            isinstance(u, (str, os.PathLike)) for u in url_or_source):
        fmt = "parquet"  # several locations: Parquet files (an MDS dataset is one directory)
    else:
        raise InvalidArgumentTypeError(
            f"expected a path or URL (str), a list of Parquet paths or URLs, a list of petastream.Stream "
            f"(a mixture, in a loader), or a petastream Source, got {_describe(url_or_source)}")
    if fmt == "mds":
        from petastream.mds.dataset import MDSDataset as cls
    elif fmt == "delta":
        from petastream.delta import DeltaSource as cls  # type: ignore[assignment]
    else:
        from petastream.parquet import ParquetSource as cls  # type: ignore[assignment]
    try:
        return cls(url_or_source, **options)
    except TypeError as e:
        if "unexpected keyword argument" not in str(e):
            raise
        raise InvalidArgumentTypeError(f"{url_or_source!r} is read as {fmt.upper()}: {e}") from None


def _describe(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return f"an empty {type(value).__name__}" if not value else \
            f"a {type(value).__name__} holding {type(value[0]).__name__}"
    return type(value).__name__
