"""Where each row group of a Parquet source is read from, and how remote bytes enter the cache
(and stay there while being read: :class:`FilePins`).

A local file is read **in place** (memory-mapped where it lies; its listing tag is checked
before each load, so a file rewritten since the source was opened fails loudly instead of
giving other rows). Remote files, and FUSE mounts of remote storage (``/dbfs``, ``/Volumes``)
unless ``read_in_place=True``, go through the node's shard cache
(:class:`petastream.storage.cache.ShardCache`: one fill per entry per node, atomic, bounded by
``cache_limit``), as one of:

* ``fetch="file"``: the whole file, one entry (one request for files up to 64 MiB, one per
  64 MiB piece beyond), keyed ``pq-<blake2s(url, tag, footer hash)>``;
* ``fetch="row_group"``: per row group, the column chunks read (adjacent ones merged, fetched
  concurrently) then the footer, back to back, keyed by the same and the ranges; pyarrow reads
  the entry through a :class:`~petastream.parquet.footer.RangeFile` that puts each range back at
  its offset in the file.

Checks on fill: every range has its expected length (a file that shrank or grew since open
fails), and (``validate=True``) the footer's bytes hash to what was read at open (a file
rewritten under the same size and tag fails too). Keys name the bytes (URL, listing tag:
size and ETag, or size, mtime and inode; footer hash), so a rewritten file never meets an old
copy.
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from typing import Any, BinaryIO

from petastream.errors import CorruptShardError, StorageError
from petastream.parquet.footer import RangeFile, fetcher, footer_digest
from petastream.parquet.plan import FileInfo, Plan, Unit
from petastream.storage.counters import IO
from petastream.storage.location import Location, is_remote_mount

__all__ = ["Placement", "FilePins"]

_LIVE_PINS: weakref.WeakSet[FilePins] = weakref.WeakSet()

_PIECE = 64 << 20  # bytes per request when a whole file is fetched


class Placement:
    """Per file and row group of a :class:`~petastream.parquet.plan.Plan`: read in place or
    through the cache, the cache key and size, the fill, and pyarrow's view of the bytes."""

    def __init__(self, plan: Plan, roots: list[Location], *, read_in_place: bool | None, validate: bool):
        self.plan, self.roots, self.validate = plan, roots, validate
        self._local = [self._in_place(f, read_in_place) for f in plan.files]

    def _in_place(self, f: FileInfo, read_in_place: bool | None) -> str | None:
        loc = self.roots[f.ref.root]
        if read_in_place is False or not loc.is_local:
            return None
        if read_in_place is None and is_remote_mount(f.ref.path):
            return None
        return f.ref.path

    # -- placement ---------------------------------------------------------------------------
    def local_path(self, unit: Unit) -> str | None:
        """The path to map ``unit``'s file from directly, or None: it goes through the cache."""
        return self._local[unit.file]

    @property
    def all_in_place(self) -> bool:
        return all(p is not None for p in self._local)

    def entry_bytes(self, unit: Unit) -> int:
        """Bytes of the cache entry ``unit`` is read from (its file's, in ``fetch="file"``)."""
        f = self.plan.files[unit.file]
        if self.plan.fetch == "file":
            return f.ref.size
        return unit.range_bytes + f.footer_bytes

    def key(self, unit: Unit) -> str:
        f = self.plan.files[unit.file]
        ident = [f.ref.url, f.ref.tag, f.footer_digest]
        prefix = "pq-"
        if self.plan.fetch == "row_group":
            ident.append(repr(unit.ranges))
            prefix = "pqr-"
        return prefix + hashlib.blake2s("\0".join(ident).encode(), digest_size=16).hexdigest()

    def check_in_place(self, unit: Unit, path: str) -> None:
        """Fail unless the local file is still the version the source was opened on."""
        ref = self.plan.files[unit.file].ref
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise CorruptShardError(f"{ref.url} disappeared since the source was opened") from None
        if f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}" != ref.tag:
            raise CorruptShardError(
                f"{ref.url} changed since the source was opened (size, modification time or inode "
                "differ); open the source again to read the new version")

    # -- filling -----------------------------------------------------------------------------
    def fill(self, unit: Unit, out: BinaryIO) -> None:
        """Write ``unit``'s cache entry (see the module doc) to ``out``, checked."""
        f = self.plan.files[unit.file]
        ref = f.ref
        fetch = fetcher(self.roots[ref.root], ref.path)
        footer_start = ref.size - f.footer_bytes
        try:
            if self.plan.fetch == "file":
                footer = b""
                for start in range(0, ref.size, _PIECE):
                    stop = min(ref.size, start + _PIECE)
                    data = self._expect(fetch(start, stop), start, stop, ref.url)
                    out.write(data)
                    if stop > footer_start:
                        footer += data[max(0, footer_start - start):]
            else:
                ranges = [*unit.ranges, (footer_start, ref.size)]
                for (start, stop), data in zip(ranges, self._fetch_ranges(unit, ranges)):
                    out.write(self._expect(data, start, stop, ref.url))
                footer = data
        except FileNotFoundError:
            raise CorruptShardError(f"{ref.url} disappeared since the source was opened") from None
        except OSError as e:
            if isinstance(e, CorruptShardError):
                raise
            raise StorageError(f"cannot read {ref.url}: {e}") from e
        if self.validate and f.footer_digest and footer_digest(footer) != f.footer_digest:  # "": checked on load
            raise CorruptShardError(
                f"{ref.url}: its footer differs from the one read when the source was opened: the "
                "file was rewritten; open the source again")

    def _fetch_ranges(self, unit: Unit, ranges: list[tuple[int, int]]) -> list[bytes]:
        ref = self.plan.files[unit.file].ref
        loc = self.roots[ref.root]
        if loc.is_local or len(ranges) == 1:
            fetch = fetcher(loc, ref.path)
            return [fetch(a, b) for a, b in ranges]
        # One request per range, run concurrently by async filesystems (s3fs, gcsfs, adlfs).
        out = [bytes(d) for d in loc.fs.cat_ranges([ref.path] * len(ranges), [a for a, _ in ranges],
                                                   [b for _, b in ranges])]
        IO.fetched(sum(len(d) for d in out), gets=len(ranges))
        return out

    @staticmethod
    def _expect(data: Any, start: int, stop: int, url: str) -> Any:
        if isinstance(data, BaseException):
            raise data
        if len(data) != stop - start:
            raise CorruptShardError(f"{url}: bytes [{start}, {stop}) read as {len(data)} bytes: the file "
                                    "changed since the source was opened; open it again")
        return data

    # -- pyarrow's view ----------------------------------------------------------------------
    def footer(self, unit: Unit, buf: Any) -> Any:
        """What pyarrow reads ``unit``'s file footer from, given its cache entry's mapping (in
        ``fetch="row_group"`` the entry's last bytes: pyarrow's own tail read of 64 KiB would
        reach outside the entry's ranges)."""
        import pyarrow as pa

        if self.plan.fetch == "file":
            return pa.BufferReader(pa.py_buffer(buf))
        f = self.plan.files[unit.file]
        return pa.BufferReader(pa.py_buffer(memoryview(buf)[len(buf) - f.footer_bytes:]))

    def source(self, unit: Unit, buf: Any) -> Any:
        """What pyarrow reads ``unit`` from, given its cache entry's mapping."""
        import pyarrow as pa

        f = self.plan.files[unit.file]
        if self.plan.fetch == "file":
            return pa.BufferReader(pa.py_buffer(buf))
        view = memoryview(buf)
        parts, pos = {}, 0
        for a, b in unit.ranges:
            parts[a] = view[pos:pos + b - a]
            pos += b - a
        parts[f.ref.size - f.footer_bytes] = view[pos:pos + f.footer_bytes]
        loc = self.roots[f.ref.root]
        # A reader reaching outside the ranges (an old writer's padding) fetches what it needs.
        rf = RangeFile(f.ref.size, parts, fetcher(loc, f.ref.path), f"{f.ref.url} (cached ranges)")
        return pa.PythonFile(rf, mode="r")


class FilePins:
    """Cached files (``fetch="file"``) a source keeps mapped, so pinned in the shard cache,
    while row groups of theirs are loading or announced: read-ahead filling the next file
    must not evict the one still being read."""

    def __init__(self) -> None:
        self._maps: dict[int, Any] = {}
        self.reset_lock()
        _LIVE_PINS.add(self)

    def reset_lock(self) -> None:
        self._lock = threading.Lock()

    def keep(self, file: int, buf: Any, soon: set[int]) -> None:
        """Unmap the files not in ``soon``; keep ``file`` mapped if it is."""
        with self._lock:
            for f in [f for f in self._maps if f not in soon]:
                del self._maps[f]
            if file in soon:
                self._maps[file] = buf

    def drop(self, keep: int | None = None) -> None:
        """Unmap every file but ``keep`` (the cache is full: let eviction have them)."""
        with self._lock:
            for f in [f for f in self._maps if f != keep]:
                del self._maps[f]


def _after_fork_in_child() -> None:
    # A read-ahead thread of the parent may have held a pins lock at fork time.
    for pins in list(_LIVE_PINS):
        pins.reset_lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
