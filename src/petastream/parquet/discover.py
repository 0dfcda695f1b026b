"""Which Parquet files a URL names: one file, a directory (Hive partitions included), or a list.

Directories are discovered by :func:`pyarrow.dataset.dataset` with ``partitioning="hive"``, so
a petastream read sees exactly the files and partition columns a pyarrow (or Spark) read does:
names starting with ``_`` or ``.`` are skipped at every level (Spark's ``_SUCCESS``,
``_temporary/``, ``.crc`` files, ``_metadata`` and ``_common_metadata`` summaries), and so are
Hadoop's ``*_$folder$`` directory markers on object stores;
``key=value`` directories become columns, their values URL-decoded, typed as pyarrow infers
them (``int32`` when every value is an integer, else ``string``), ``__HIVE_DEFAULT_PARTITION__``
read as null. A file given by name is read whatever its name, and has no partition columns.

Each file is recorded with what identifies its bytes (:attr:`ParquetFileRef.tag`): size,
modification time and inode locally; size and ETag (or generation) on object stores, from one
recursive listing per directory. Cache keys and the source's fingerprint are built from them,
so a rewritten file is never read from a stale cached copy.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from petastream.errors import (
    DatasetNotFoundError,
    FormatError,
    InvalidArgumentTypeError,
    StorageError,
)
from petastream.storage.location import Location, remote_tag, resolve

__all__ = ["ParquetFileRef", "Discovery", "discover", "locate", "as_url_list", "listing", "is_delta_table"]


@dataclass(frozen=True)
class ParquetFileRef:
    """One Parquet file of a source."""

    #: Where it is, for messages and cache keys.
    url: str
    #: Its path on its root's filesystem (absolute locally).
    path: str
    #: Index of its root in :attr:`Discovery.roots`.
    root: int
    size: int
    #: What identifies this version of its bytes (see the module doc).
    tag: str
    #: Hive partition values (``None``: the null partition), in the partition schema's order.
    partition: tuple[Any, ...] = ()
    #: Rows it holds, when known without its footer (a Delta log's ``numRecords``), and its
    #: columns' null counts known so (``(name in the file, count)``): such a file may be
    #: planned without reading its footer (see :func:`petastream.parquet.plan.make_plan`).
    num_rows: int | None = None
    null_counts: tuple[tuple[str, int], ...] = ()


@dataclass
class Discovery:
    """The files of a source, and the partition columns their directories add."""

    roots: list[Location]
    files: list[ParquetFileRef]
    #: Partition fields (name, Arrow type), appended after the files' own columns.
    partition_fields: list[tuple[str, Any]] = field(default_factory=list)
    #: ``{name in the files: name served}`` for columns stored under another name (a Delta
    #: table's column mapping); empty: served as stored.
    column_names: dict[str, str] = field(default_factory=dict)


def as_url_list(url_or_urls: Any) -> list[str]:
    """``url_or_urls`` as a non-empty list of strings (paths, ``PathLike``s or URLs)."""
    if isinstance(url_or_urls, (str, os.PathLike)):
        items: Sequence[Any] = [url_or_urls]
    elif isinstance(url_or_urls, Sequence) and not isinstance(url_or_urls, (bytes, bytearray)):
        items = url_or_urls
    else:
        raise InvalidArgumentTypeError(
            f"a Parquet source takes a path or URL, or a list of them, got {type(url_or_urls).__name__}")
    urls = [os.fspath(u) for u in items]
    if not urls or not all(isinstance(u, str) and u for u in urls):
        raise InvalidArgumentTypeError(f"a Parquet source needs non-empty paths or URLs, got {url_or_urls!r}")
    return urls


def _as_fsspec(filesystem: Any, argument: str) -> Any:
    """An fsspec filesystem for a ``filesystem`` argument: fsspec's own or a ``pyarrow.fs`` one."""
    import fsspec

    if isinstance(filesystem, fsspec.AbstractFileSystem):
        return filesystem
    import pyarrow.fs

    if isinstance(filesystem, pyarrow.fs.FileSystem):
        from fsspec.implementations.arrow import ArrowFSWrapper

        return ArrowFSWrapper(filesystem)
    raise InvalidArgumentTypeError(
        f"{argument}: expected an fsspec filesystem or a pyarrow.fs.FileSystem, got "
        f"{type(filesystem).__module__}.{type(filesystem).__name__} (pyarrow's legacy "
        "pyarrow.filesystem classes are gone since pyarrow 15); pass storage_options instead, or a "
        "pyarrow.fs.FileSystem")


def locate(url: str | os.PathLike, storage_options: dict | None = None, filesystem: Any = None,
           argument: str = "filesystem") -> Location:
    """Where ``url`` is: on the filesystem its scheme names (``storage_options`` for it), or on
    ``filesystem`` when one is given (an fsspec filesystem or a ``pyarrow.fs.FileSystem``, as
    Petastorm's ETL API takes them; ``argument`` names it in an error)."""
    url = os.fspath(url)
    if filesystem is None:
        return resolve(url, storage_options)
    fs = _as_fsspec(filesystem, argument)
    # The filesystem's own path for the URL: fsspec.core.strip_protocol would pick the class
    # by the URL's scheme, which need not be the class of the object given (a pyarrow.fs one).
    return Location(url.rstrip("/"), fs._strip_protocol(url).rstrip("/"), fs)


def discover(url_or_urls: Any, storage_options: dict | None = None, filesystem: Any = None) -> Discovery:
    """The Parquet files ``url_or_urls`` names, in a fixed order (each URL's files sorted by
    path, the URLs in the order given); see the module doc. ``filesystem``: read them on this
    filesystem object instead of the one their scheme names (see :func:`locate`)."""
    roots: list[Location] = []
    files: list[ParquetFileRef] = []
    partitions: list[tuple[str, Any]] | None = None
    partition_source = ""
    for url in as_url_list(url_or_urls):
        loc = locate(url, storage_options, filesystem)
        if not loc.exists():
            raise DatasetNotFoundError(f"no Parquet file or directory at {loc.url}")
        if loc.isdir():
            _refuse_delta(loc)
        roots.append(loc)
        found, fields = (_directory(loc, len(roots) - 1) if loc.isdir() else ([_single(loc, len(roots) - 1)], []))
        if not found:
            raise DatasetNotFoundError(
                f"no Parquet files under {loc.url} (names starting with '_' or '.' are skipped, "
                "as Spark and pyarrow do)")
        if partitions is None:
            partitions, partition_source = fields, loc.url
        elif _names_types(fields) != _names_types(partitions):
            raise FormatError(
                f"{loc.url} has partition columns {_describe(fields)}, {partition_source} has "
                f"{_describe(partitions)}; read them separately, or pass URLs with the same partitioning")
        files += found
    seen: dict[str, str] = {}
    for f in files:
        key = f"{f.root}:{f.path}" if not roots[f.root].is_local else f.path
        if key in seen:
            raise FormatError(f"{f.url} is listed twice (also as {seen[key]}); pass each file once")
        seen[key] = f.url
    return Discovery(roots, files, partitions or [])


def is_delta_table(loc: Location) -> bool:
    """Whether ``loc`` is a Delta table's root (it holds a ``_delta_log`` directory)."""
    try:
        return loc.exists("_delta_log") and loc.child("_delta_log").isdir()
    except OSError:
        return False


def _refuse_delta(loc: Location) -> None:
    """A Delta table's directory (or a partition directory in one) is not plain Parquet: its
    files include those its log removed, and rows its deletion vectors deleted."""
    table, probe = None, loc
    for _ in range(8):  # the directory, then up through key=value partition directories
        if is_delta_table(probe):
            table = probe
            break
        parent, _, name = probe.url.rstrip("/").rpartition("/")
        if "=" not in name or not parent:
            break
        up = (os.path.dirname(probe.path.rstrip("/\\")) if probe.is_local
              else posixpath.dirname(probe.path.rstrip("/")))
        probe = Location(parent, up, None if probe.is_local else probe.fs)
    if table is not None:
        raise FormatError(
            f"{loc.url} is {'a Delta table' if table is loc else 'in the Delta table ' + table.url}: its "
            "directory holds files the table's log removed, so it is not read as plain Parquet; open "
            f"the table ({table.url}) by URL in a loader, or with petastream.delta.DeltaSource")


def _names_types(fields: list[tuple[str, Any]]) -> list[tuple[str, str]]:
    return [(n, str(t)) for n, t in fields]


def _describe(fields: list[tuple[str, Any]]) -> str:
    return "{" + ", ".join(f"{n}: {t}" for n, t in fields) + "}" if fields else "none"


def _pyarrow_fs(loc: Location) -> Any:
    return None if loc.is_local else loc.fs  # pyarrow wraps an fsspec filesystem itself


def _directory(loc: Location, root: int) -> tuple[list[ParquetFileRef], list[tuple[str, Any]]]:
    import pyarrow as pa
    import pyarrow.dataset as ds

    # The fresh listing first: pyarrow opens a file to infer the schema through fsspec, whose
    # listing cache may still hold a version another writer replaced since (s3fs then asks for
    # the old ETag and fails: "no longer exists"); listing() drops that cache and refills it.
    tags = listing(loc)
    try:
        dataset = ds.dataset(loc.path, filesystem=_pyarrow_fs(loc), format="parquet", partitioning="hive")
    except (pa.ArrowInvalid, OSError) as e:
        raise FormatError(f"cannot read {loc.url} as a Parquet directory: {e}") from e
    # (Hadoop's S3 directory markers, ``<name>_$folder$``, are empty objects, never Parquet.)
    frags = [(frag, _relative(loc, frag.path)) for frag in dataset.get_fragments()
             if not frag.path.endswith("_$folder$")]
    # The partition fields are the keys of the key=value directories. (Not all of
    # partitioning.schema: some pyarrow versions list the files' columns there too.)
    keys_seen = {part.split("=", 1)[0] for _, rel in frags for part in rel.split("/")[:-1] if "=" in part}
    schema = dataset.partitioning.schema if dataset.partitioning is not None else None
    fields = [(f.name, f.type) for f in (schema or [])
              if f.name in keys_seen] if schema is not None else []
    out = []
    for frag, rel in frags:
        keys = ds.get_partition_keys(frag.partition_expression)
        size, tag = tags(frag.path)
        out.append(ParquetFileRef(loc.child_url(rel), frag.path, root, size, tag,
                                  tuple(keys.get(name) for name, _ in fields)))
    out.sort(key=lambda f: f.path)
    return out, fields


def _single(loc: Location, root: int) -> ParquetFileRef:
    size, tag = listing(loc, single=True)(loc.path)
    return ParquetFileRef(loc.url, loc.path, root, size, tag)


def _relative(loc: Location, path: str) -> str:
    base = loc.path.rstrip("/\\")
    rel = path[len(base):] if path.startswith(base) else path
    return rel.replace(os.sep, "/").lstrip("/") if loc.is_local else rel.lstrip("/")


def listing(loc: Location, single: bool = False) -> Callable[[str], tuple[int, str]]:
    """``path -> (size, tag)`` for the files under ``loc`` (or the file ``loc``, ``single``):
    one recursive listing on an object store (fresh: its listing cache is bypassed), a stat per
    file locally."""
    if loc.is_local:
        def local(path: str) -> tuple[int, str]:
            try:
                st = os.stat(path)
            except OSError as e:
                raise StorageError(f"cannot stat {path}: {e}") from e
            return st.st_size, f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
        return local
    fs = loc.fs
    try:
        fs.invalidate_cache(loc.path)  # a fresh listing: the versions read now
    except Exception:  # noqa: BLE001 - not every filesystem keeps a listing cache
        pass
    try:
        infos = {loc.path: fs.info(loc.path)} if single else fs.find(loc.path, detail=True)
    except OSError as e:
        raise StorageError(f"cannot list {loc.url}: {e}") from e
    by_path = {posixpath.normpath(p.rstrip("/")): info for p, info in infos.items()}

    def remote(path: str) -> tuple[int, str]:
        info = by_path.get(posixpath.normpath(path.rstrip("/")))
        if info is None:
            try:
                info = fs.info(path)
            except OSError as e:
                raise StorageError(f"cannot stat {loc.url}: {path}: {e}") from e
        return int(info["size"]), remote_tag(info)  # as MDS shards are tagged
    return remote
