"""Where datasets live: local paths and fsspec URLs, with atomic writes.

Accepted: plain paths, ``file://`` and ``file:/`` URLs, Databricks fuse paths (``/dbfs/...``,
and ``dbfs:/...`` where the fuse mount exists), and any fsspec URL (``memory://``, ``s3://``,
``gs://``, ``abfs://`` with the ``cloud`` extra).

Writes never expose a partial file under its final name: a local file is written to a
temporary name and renamed; an object-store PUT is atomic by itself. Readers of a remote
dataset go through a local cache directory (see :meth:`Location.cached`), so a second epoch
does not download again.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import uuid
from typing import Any

from petastream.errors import MissingExtraError, StorageError
from petastream.storage.counters import IO

__all__ = ["Location", "resolve", "is_local_url", "local_path", "is_remote_mount", "remote_tag", "REMOTE_MOUNTS_ENV"]

#: Colon-separated path prefixes that are FUSE mounts of remote storage, besides Databricks'.
REMOTE_MOUNTS_ENV = "PETASTREAM_REMOTE_MOUNTS"
# Databricks: Unity Catalog volumes and the DBFS fuse mount read through the network.
_REMOTE_MOUNTS = ("/Volumes/", "/dbfs/")

_CLOUD_EXTRAS = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "abfs": "adlfs",
                 "abfss": "adlfs", "az": "adlfs"}


def local_path(url: str) -> str | None:
    """The filesystem path of a local URL, or None if ``url`` is remote."""
    if url.startswith("file://"):
        return url[len("file://"):] or "/"
    if url.startswith("file:"):
        return url[len("file:"):]
    if url.startswith("dbfs:/") and not url.startswith("dbfs://"):
        # Databricks: dbfs:/x is the fuse path /dbfs/x on every node.
        fuse = "/dbfs/" + url[len("dbfs:/"):].lstrip("/")
        if os.path.isdir("/dbfs") or "DATABRICKS_RUNTIME_VERSION" in os.environ:
            return fuse
        return None
    if "://" in url:
        return None
    return url


def is_local_url(url: str) -> bool:
    return local_path(url) is not None


def is_remote_mount(path: str) -> bool:
    """Whether a local path lies on a FUSE mount of remote storage (``/Volumes/...``,
    ``/dbfs/...``, or a prefix listed in ``$PETASTREAM_REMOTE_MOUNTS``): readers copy such
    shards into the local cache instead of reading them in place over the network."""
    extra = [p for p in os.environ.get(REMOTE_MOUNTS_ENV, "").split(os.pathsep) if p]
    path = os.path.abspath(path)
    for prefix in (*_REMOTE_MOUNTS, *extra):
        prefix = prefix.rstrip("/") + "/"
        if path.startswith(prefix) or path + "/" == prefix:
            return True
    return False


class Location:
    """A directory: a local path (``fs`` None) or an fsspec filesystem and path.

    ``fs`` is reopened in a forked child (DataLoader workers, ``multiprocessing`` with the
    ``fork`` start method): an async fsspec filesystem (s3, gcs, abfs, http) is bound to its
    creator's event-loop thread, which the child lacks ("This class is not fork-safe").
    """

    def __init__(self, url: str, path: str, fs: Any = None):
        self.url, self.path = url, path
        self._fs = fs
        self._pid = os.getpid()  # the process ``_fs`` belongs to; a forked child sees its parent's

    def __repr__(self) -> str:
        return f"Location(url={self.url!r}, path={self.path!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Location):
            return NotImplemented
        return (self.url, self.path, self._fs) == (other.url, other.path, other._fs)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it replaces

    def __getstate__(self) -> dict[str, Any]:
        # The filesystem pickles as fsspec's recipe (class, arguments) and is rebuilt by the
        # receiver in its own process: the pid recorded here must not travel with it.
        return {"url": self.url, "path": self.path, "_fs": self._fs}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _pid=os.getpid())

    @property
    def fs(self) -> Any:
        if self._fs is not None and self._pid != os.getpid():
            self._fs, self._pid = _reopen(self._fs), os.getpid()
        return self._fs

    @property
    def is_local(self) -> bool:
        return self._fs is None

    def child(self, name: str) -> Location:
        return Location(self.child_url(name), self._join(name), self.fs)

    def child_url(self, name: str) -> str:
        return self.url.rstrip("/") + "/" + name

    def _join(self, name: str) -> str:
        if self.is_local:
            return os.path.join(self.path, *name.split("/"))
        return posixpath.join(self.path, name)

    # -- reading -----------------------------------------------------------------------------
    def exists(self, name: str = "") -> bool:
        target = self._join(name) if name else self.path
        return os.path.exists(target) if self.is_local else self.fs.exists(target)

    def size(self, name: str) -> int:
        target = self._join(name)
        try:
            return os.path.getsize(target) if self.is_local else int(self.fs.size(target))
        except (OSError, FileNotFoundError) as e:
            raise StorageError(f"cannot stat {self.child_url(name)}: {e}") from e

    def read_bytes(self, name: str) -> bytes:
        target = self._join(name)
        try:
            if self.is_local:
                with open(target, "rb") as f:
                    return f.read()
            data = self.fs.cat_file(target)
            IO.fetched(len(data))
            return data
        except FileNotFoundError:
            raise
        except OSError as e:
            raise StorageError(f"cannot read {self.child_url(name)}: {e}") from e

    def listdir(self) -> list[str]:
        """Names (not paths) directly under this directory; empty if it does not exist."""
        if self.is_local:
            return sorted(os.listdir(self.path)) if os.path.isdir(self.path) else []
        if not self.fs.exists(self.path):
            return []
        return sorted(posixpath.basename(p.rstrip("/")) for p in self.fs.ls(self.path, detail=False))

    def listdir_recursive_names(self, filename: str, depth: int) -> list[str]:
        """Relative paths of files called ``filename`` at most ``depth`` levels down."""
        found = []
        for name in self.listdir():
            if name == filename:
                found.append(name)
            elif depth > 1 and self.child(name).isdir():
                found += [f"{name}/{p}" for p in self.child(name).listdir_recursive_names(filename, depth - 1)]
        return sorted(found)

    def file_tags(self, directory: str = "") -> dict[str, str]:
        """``{name: tag}`` for the files directly under ``directory``: what identifies a file's
        current version without reading it. Local: size, modification time (ns) and inode.
        Object stores: size and the ETag (or generation, or modification time), from one
        listing request (fresh: fsspec's listing cache is bypassed)."""
        where = self.child(directory) if directory else self
        if self.is_local:
            tags = {}
            with os.scandir(where.path) as it:
                for de in it:
                    st = de.stat()
                    tags[de.name] = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
            return tags
        with contextlib.suppress(Exception):  # not every filesystem keeps a listing cache
            self.fs.invalidate_cache(where.path)
        return {posixpath.basename(info["name"].rstrip("/")): remote_tag(info)
                for info in self.fs.ls(where.path, detail=True)}

    def file_tag(self, name: str) -> tuple[int, str]:
        """(size, tag) of one file, as :meth:`file_tags` names versions, without listing its
        directory (one HEAD request on object stores). FileNotFoundError if absent."""
        if self.is_local:
            st = os.stat(self._join(name))
            return st.st_size, f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
        target = self._join(name)
        with contextlib.suppress(Exception):  # fresh: not fsspec's listing cache
            self.fs.invalidate_cache(target)
        info = self.fs.info(target)
        return int(info["size"]), remote_tag(info)

    def isdir(self) -> bool:
        return os.path.isdir(self.path) if self.is_local else self.fs.isdir(self.path)

    # -- writing -----------------------------------------------------------------------------
    def makedirs(self) -> None:
        if self.is_local:
            os.makedirs(self.path, exist_ok=True)
        else:
            self.fs.makedirs(self.path, exist_ok=True)

    def write_bytes_atomic(self, name: str, data: bytes | memoryview | list[Any]) -> None:
        """Write ``name`` so that it appears complete or not at all. ``data`` may be a list
        of buffers that concatenate to the content (written one after the other locally)."""
        target = self._join(name)
        parts = data if isinstance(data, list) else [data]
        if self.is_local:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            tmp = f"{target}.tmp-{uuid.uuid4().hex[:12]}"
            try:
                with open(tmp, "wb") as f:
                    for part in parts:
                        f.write(part)
                os.replace(tmp, target)
            except BaseException:
                if os.path.exists(tmp):
                    os.remove(tmp)
                raise
        else:
            parent = posixpath.dirname(target)
            if parent and not self.fs.exists(parent):
                self.fs.makedirs(parent, exist_ok=True)
            # One PUT: object stores never show a partial object.
            self.fs.pipe_file(target, b"".join(parts) if len(parts) > 1 else bytes(parts[0]))

    def remove(self, name: str) -> None:
        target = self._join(name)
        if self.is_local:
            if os.path.exists(target):
                os.remove(target)
        elif self.fs.exists(target):
            self.fs.rm_file(target)

    def delete_tree(self) -> None:
        if self.is_local:
            shutil.rmtree(self.path, ignore_errors=True)
        elif self.fs.exists(self.path):
            self.fs.rm(self.path, recursive=True)

    # -- local access ------------------------------------------------------------------------
    def local_file(self, name: str) -> str | None:
        """The local filesystem path of ``name``, or None for a remote location."""
        return self._join(name) if self.is_local else None

    def download(self, name: str, dest: str) -> None:
        """Copy ``name`` to the local file ``dest`` atomically (temp name, then rename)."""
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        tmp = f"{dest}.tmp-{uuid.uuid4().hex[:12]}"
        try:
            if self.is_local:
                shutil.copyfile(self._join(name), tmp)
            else:
                self.fs.get_file(self._join(name), tmp)
                IO.fetched(os.path.getsize(tmp))
            os.replace(tmp, dest)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise


def _reopen(fs: Any) -> Any:
    """The filesystem ``fs`` as this (forked) process's own instance: fsspec's pickling recipe
    (``fs.__reduce__()``: the class and its arguments), which goes through the class's
    instance cache; fsspec clears that cache and its event loop in a forked child, so the
    result is a fresh instance on the child's own loop, as a ``spawn`` worker would build."""
    try:
        make, args = fs.__reduce__()[:2]
        return make(*args)
    except Exception:  # a filesystem that cannot be rebuilt: the inherited one, as before
        return fs


# Fields that change when an object is rewritten, most specific first (S3/Azure, GCS, others).
_VERSION_FIELDS = ("ETag", "etag", "generation", "md5Hash", "LastModified",
                   "last_modified", "mtime", "modified", "created")


def remote_tag(info: dict[str, Any]) -> str:
    """What identifies the version of an object-store file, from its fsspec listing entry:
    ``<size>:<ETag>`` (or generation, or modification time)."""
    version = next((info[k] for k in _VERSION_FIELDS if info.get(k) is not None), None)
    if version is None:  # an unknown filesystem: every field it reports
        version = sorted((k, str(v)) for k, v in info.items())
    return f"{info.get('size')}:{version}"


def resolve(url: str | os.PathLike, storage_options: dict | None = None) -> Location:
    """Turn a path or URL into a :class:`Location`."""
    url = os.fspath(url)
    if not isinstance(url, str) or not url:
        raise StorageError(f"a dataset location must be a non-empty path or URL, got {url!r}")
    local = local_path(url)
    if local is not None:
        return Location(url, os.path.abspath(os.path.expanduser(local)))
    import fsspec

    protocol = url.split("://", 1)[0]
    try:
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    except ImportError as e:
        package = _CLOUD_EXTRAS.get(protocol, "the fsspec implementation for this protocol")
        raise MissingExtraError(
            f"URL {url!r} needs {package}; install petastream[cloud] (pip install {package})"
        ) from e
    except ValueError as e:
        raise StorageError(f"cannot open {url!r}: {e}") from e
    return Location(url.rstrip("/"), path.rstrip("/"), fs)
