"""Parquet footers: read once per file at open, in parallel, and a file view made of byte ranges.

A footer is the tail of the file: ``<FileMetaData (thrift)> <uint32 length> "PAR1"``. Opening
a source reads every file's footer (one read of its last 64 KiB, a second only for a larger
footer; remote files in parallel), checks the magic, and keeps its parsed metadata and a hash
of its bytes (checked again when the file is brought into the shard cache: a file replaced
under the same name and size is caught even where its listing tag is not).

:class:`RangeFile` presents byte ranges of a file (a footer in memory, column chunks in a cache
entry, anything else fetched on demand) as one seekable file of the file's full size, which
pyarrow reads as if it were the whole file: its reader touches only the ranges a read needs.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from petastream.errors import CorruptShardError, FormatError, StorageError
from petastream.parquet.discover import ParquetFileRef
from petastream.storage.counters import IO
from petastream.storage.location import Location

__all__ = ["Footer", "RangeFile", "read_footers", "fetcher", "footer_digest"]

_TAIL = 1 << 16  # bytes read from the end of a file first (pyarrow's own guess, too)
_MAGIC = b"PAR1"
_PARALLEL = 16  # footers read at once from an object store


@dataclass
class Footer:
    """One file's footer: its bytes (``<metadata> <length> PAR1``) and their parsed form;
    ``tail``: the last bytes of the file as read (the footer's, and more), kept while the file
    is planned (pyarrow reads them again, to find the footer, where filters are applied)."""

    data: bytes
    metadata: Any  # pyarrow.parquet.FileMetaData
    tail: bytes | None = None

    @property
    def digest(self) -> str:
        return footer_digest(self.data)


def footer_digest(data: bytes | memoryview) -> str:
    return hashlib.blake2s(data, digest_size=16).hexdigest()


def fetcher(loc: Location, path: str) -> Callable[[int, int], bytes]:
    """``fetch(start, stop)``: bytes ``[start, stop)`` of the file at ``path``, one request."""
    if loc.is_local:
        def local(start: int, stop: int) -> bytes:
            with open(path, "rb") as f:
                return os.pread(f.fileno(), stop - start, start)
        return local

    def remote(start: int, stop: int) -> bytes:
        data = bytes(loc.fs.cat_file(path, start=start, end=stop))
        IO.fetched(len(data))
        return data
    return remote


def read_footer(ref: ParquetFileRef, loc: Location) -> Footer:
    """The footer of one file (see the module doc); errors name the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if ref.size < 12:
        raise FormatError(f"{ref.url} is not a Parquet file ({ref.size} bytes)")
    fetch = fetcher(loc, ref.path)
    try:
        start = max(0, ref.size - _TAIL)
        tail = fetch(start, ref.size)
        if len(tail) != ref.size - start:
            raise CorruptShardError(f"{ref.url}: read {len(tail)} bytes of its last {ref.size - start}; "
                                    "the file changed while it was opened")
        if tail[-4:] != _MAGIC:
            what = "an encrypted Parquet file (not supported)" if tail[-4:] == b"PARE" else "not a Parquet file"
            raise FormatError(f"{ref.url} is {what}: it does not end with the Parquet magic bytes; "
                              "remove it from the directory, or pass the Parquet files by name")
        length = int.from_bytes(tail[-8:-4], "little")
        if length + 12 > ref.size:
            raise FormatError(f"{ref.url}: its footer length ({length}) does not fit its size ({ref.size}); "
                              "the file is truncated or not a Parquet file")
        if length + 8 > len(tail):
            tail = fetch(ref.size - length - 8, ref.size - len(tail)) + tail
        data = bytes(tail[-(length + 8):])
    except FileNotFoundError:
        raise StorageError(f"{ref.url} disappeared while the source was opened") from None
    except OSError as e:
        if isinstance(e, (FormatError, CorruptShardError, StorageError)):
            raise
        raise StorageError(f"cannot read {ref.url}: {e}") from e
    try:
        metadata = pq.read_metadata(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as e:
        raise FormatError(f"{ref.url}: its Parquet footer cannot be read ({e})") from e
    return Footer(data, metadata, bytes(tail))


def read_footers(files: Sequence[ParquetFileRef], roots: Sequence[Location]) -> list[Footer]:
    """Every file's footer, in order; remote ones ``_PARALLEL`` at a time."""
    if not files:
        return []
    if all(roots[f.root].is_local for f in files):
        return [read_footer(f, roots[f.root]) for f in files]
    with ThreadPoolExecutor(min(_PARALLEL, len(files)), thread_name_prefix="petastream-footer") as pool:
        return list(pool.map(lambda f: read_footer(f, roots[f.root]), files))


class RangeFile(io.RawIOBase):
    """A read-only file of ``size`` bytes made of known ranges (``{file offset: bytes-like}``)
    and, for the rest, ``fetch(start, stop)`` (None: reading outside the ranges is an error).
    Give it to pyarrow as ``pyarrow.PythonFile(RangeFile(...), mode="r")``."""

    def __init__(self, size: int, ranges: dict[int, Any], fetch: Callable[[int, int], bytes] | None = None,
                 name: str = "<parquet file>"):
        super().__init__()
        self._size, self._fetch, self.name = size, fetch, name
        self._starts = sorted(ranges)
        self._parts = [memoryview(ranges[s]).cast("B") for s in self._starts]
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def size(self) -> int:
        return self._size

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, n: int = -1) -> bytes:
        start = self._pos
        stop = self._size if n is None or n < 0 else min(self._size, start + n)
        if stop <= start:
            return b""
        out = self._slice(start, stop)
        self._pos = stop
        return out

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def _slice(self, start: int, stop: int) -> bytes:
        k = bisect.bisect_right(self._starts, start) - 1
        pieces, pos = [], start
        while 0 <= k < len(self._starts) and pos < stop:  # known ranges, back to back, cover it?
            s, part = self._starts[k], self._parts[k]
            if not s <= pos < s + len(part):
                break
            end = min(stop, s + len(part))
            pieces.append(part[pos - s:end - s])
            pos, k = end, k + 1
        if pos >= stop:
            return pieces[0].tobytes() if len(pieces) == 1 else b"".join(pieces)
        if self._fetch is None:
            raise CorruptShardError(f"{self.name}: bytes [{start}, {stop}) are not in its cached ranges; "
                                    "the cache entry does not match the file: run `petastream cache prune --all`")
        return self._fetch(start, stop)
