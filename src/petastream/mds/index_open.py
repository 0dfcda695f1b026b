"""Opening a dataset's index: parsed once per node, mapped by every other open.

An index of a million shards is ~420 MB of JSON: parsing it costs seconds even as columns
(:mod:`petastream.mds.index_columns`), and ``json.loads`` 26 s and 3 GB, on every rank. So
the first open of an index on a node parses it and keeps its shards in the node's index cache
as a :mod:`petastream.mds.index_sidecar` file (one Arrow record batch); every later open,
by any process of the node, maps that file instead. Where::

    <cache_dir>/indexes/v1/data/ix1-<xxh3-128 of index.json>-<its size>

``cache_dir`` is the dataset's (``$PETASTREAM_CACHE_DIR``, else ``~/.cache/petastream/shards``),
for local datasets too. The cache (:class:`~petastream.storage.cache.ShardCache`) gives its
rules: one build per key on the node (the other processes wait on the key's lock, then map
the result), atomic entries, the disk's free-space budget. The key names the index's bytes,
so a rewritten index.json is a new key (never a stale table), and a cached file is used only
when its own digest and the index digest it records check out: a damaged one is removed and
built again. Where the cache cannot take it (unwritable, full), the index is parsed in
memory, as before, and a warning says why.

Remote ``index.json`` files come through the same cache under a key naming their URL, ETag
and size: one download per node, not per rank, and a rewritten index is fetched again. A
sidecar beside ``index.json`` (written by earlier petastream versions) is read when it
describes the index.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import mmap
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import xxhash

from petastream.errors import CorruptShardError, DatasetNotFoundError
from petastream.mds.index import parse_index
from petastream.mds.index_columns import table_from_json
from petastream.mds.index_sidecar import (
    INDEX_SIDECAR,
    encode_index_sidecar,
    index_digest,
    index_fingerprint,
    load_index_sidecar,
)
from petastream.mds.shard_table import ShardTable
from petastream.storage.cache import ShardCache
from petastream.storage.location import Location

__all__ = ["open_index", "OpenedIndex", "sidecar_key", "parse_shards"]

log = logging.getLogger(__name__)

_SMALL = 1 << 20  # index files below this are read, not mapped
# Cached sidecars below this are copied into memory and their mapping closed: a mapping holds
# a descriptor (and the cache's pin) for as long as the dataset lives, and a job that opens a
# small dataset per evaluation would run out of descriptors before the garbage collector ran
# (tests/pipeline/test_resources.py); the million-shard indexes the cache is for stay mapped.
_MAP_FROM = 16 << 20
_KEY_PREFIX = "ix1-"  # 1: the sidecar format's version (index_sidecar.MAGIC)


@dataclass
class OpenedIndex:
    table: ShardTable
    fingerprint: str
    #: Where the shards came from: "built" (parsed here, kept in the node's cache), "cache"
    #: (built by an earlier open on this node), "dataset" (a valid sidecar beside index.json,
    #: written by an earlier petastream) or "parsed" (parsed here; the cache could not keep it).
    origin: str
    #: The index cache's entries of this index (its sidecar; a remote index.json's copy).
    keys: tuple[str, ...] = ()


def sidecar_key(digest: str, size: int) -> str:
    """The index cache's key of the sidecar of the index.json with xxh3-128 ``digest``."""
    return f"{_KEY_PREFIX}{digest}-{size}"


def open_index(location: Location, cache: ShardCache) -> OpenedIndex:
    """The dataset's shards: mapped from the node's cached sidecar, else from one beside
    index.json, else parsed once for the node (see the module docstring). Raises
    DatasetNotFoundError without an index.json."""
    copies: list[str] = []  # the key of a remote index.json's copy
    index, digest, size = _index(location, cache, copies)
    key = sidecar_key(digest, size)
    keys = (key, *copies)
    where = cache.path(key)
    found = _small_in_memory(_cached(cache, key))
    if found is not None:
        loaded = load_index_sidecar(found, digest, size, where)
        if loaded is not None:
            return OpenedIndex(loaded[0], loaded[1], "cache", keys)
        with contextlib.suppress(OSError):
            cache.remove([key])  # damaged: built again below, never served
    beside = _read(location, INDEX_SIDECAR, cache)
    if beside is not None:
        loaded = load_index_sidecar(beside, digest, size, location.child_url(INDEX_SIDECAR))
        if loaded is not None:
            return OpenedIndex(loaded[0], loaded[1], "dataset", tuple(copies))
    made: list[tuple[ShardTable, str]] = []
    making = False

    def make() -> Any:
        nonlocal index, making
        making = True
        if index is None:
            index = _local_index(location, digest)
        table, fingerprint = parse_shards(index, location)
        made.append((table, fingerprint))
        sidecar = encode_index_sidecar(table, digest, size, fingerprint)
        making = False
        return sidecar

    try:
        built = cache.get_made(key, make, wait=False)
    except OSError as e:
        if making:  # the index's error (unreadable, changed), not the cache's
            raise
        # An unwritable or stuck cache directory: parse without keeping it.
        log.warning("index cache %s unusable (%s); parsing %s in memory", cache.root, e,
                    location.child_url("index.json"))
        built = None
    if built is not None:
        loaded = load_index_sidecar(_small_in_memory(built), digest, size, where)
        if loaded is not None:
            return OpenedIndex(loaded[0], loaded[1], "built" if made else "cache", keys)
    if not made:
        made.append(parse_shards(_local_index(location, digest) if index is None else index, location))
    return OpenedIndex(made[0][0], made[0][1], "parsed", tuple(copies))


def parse_shards(index: Any, location: Location) -> tuple[ShardTable, str]:
    """(table, fingerprint) of index.json's bytes: as columns where that is exact, else by
    ``json`` (which also raises the format errors); the fingerprint hashed meanwhile."""
    if index is None:  # removed since it was hashed
        raise DatasetNotFoundError(f"no index.json at {location.child_url('index.json')}")
    with ThreadPoolExecutor(1) as pool:  # both release the GIL: overlapped on a free core
        fingerprint = pool.submit(index_fingerprint, index)
        table = table_from_json(index)
        if table is None:
            shards = parse_index(bytes(index), source=location.child_url("index.json"))
            table = ShardTable.from_shards(shards)
        return table, fingerprint.result()


def _local_index(location: Location, digest: str) -> Any:
    """A local index.json's bytes, checked against the digest it was hashed to (its sidecar
    is keyed by it): a file rewritten meanwhile is an error, not a sidecar under a wrong key."""
    index = _read(location, "index.json", None)
    if index is None or index_digest(index) != digest:
        raise CorruptShardError(f"{location.child_url('index.json')} changed while it was opened; "
                                "open the dataset again")
    return index


def _small_in_memory(buf: Any | None) -> Any | None:
    """``buf``, or a copy of it with its mapping closed where it is a small mapping."""
    if isinstance(buf, mmap.mmap) and len(buf) < _MAP_FROM:
        data = bytes(buf)
        buf.close()
        return data
    return buf


def _cached(cache: ShardCache, key: str) -> Any | None:
    try:
        return cache.open(key)
    except OSError as e:
        log.debug("index cache %s unreadable (%s)", cache.root, e)  # building says why, once
        return None


def _index(location: Location, cache: ShardCache, keys: list[str]) -> tuple[Any | None, str, int]:
    """(bytes or mapping, or None where not read yet; xxh3-128 hex; size) of index.json. A
    local one is hashed in pieces: mapped only if it is parsed."""
    if location.is_local:
        path = location.local_file("index.json")
        assert path is not None
        try:
            digest, size = _hash_file(path)
        except FileNotFoundError:
            raise DatasetNotFoundError(f"no index.json at {location.child_url('index.json')}") from None
        return None, digest, size
    index = _read(location, "index.json", cache, keys)
    if index is None:
        raise DatasetNotFoundError(f"no index.json at {location.child_url('index.json')}")
    return index, index_digest(index), len(index)


def _hash_file(path: str) -> tuple[str, int]:
    """(xxh3-128 hex, size) of a local file, read in 8 MiB pieces. FileNotFoundError if absent."""
    h = xxhash.xxh3_128()
    piece = bytearray(8 << 20)
    view = memoryview(piece)
    size = 0
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(piece):
            h.update(view[:n])
            size += n
    return h.hexdigest(), size


def _read(location: Location, name: str, cache: ShardCache | None, keys: list[str] | None = None) -> Any | None:
    """``name``'s bytes (mapped where large), or None if absent. Remote files come through the
    node's cache under a key naming their URL, size and ETag (appended to ``keys``): fetched
    once per node."""
    if location.is_local:
        path = location.local_file(name)
        assert path is not None
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < _SMALL:
                    return f.read()
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            return None
    assert cache is not None
    try:
        size, tag = location.file_tag(name)
    except FileNotFoundError:
        return None
    ident = f"{location.child_url(name)}\0{tag}".encode()
    key = "idx-" + hashlib.blake2s(ident, digest_size=16).hexdigest()
    if keys is not None:
        keys.append(key)

    def fill(out: Any) -> None:
        data = location.read_bytes(name)
        if len(data) != size:
            raise CorruptShardError(f"{location.child_url(name)}: {len(data)} bytes read, "
                                    f"{size} listed; it changed while read: open the dataset again")
        out.write(data)

    return cache.get(key, size, fill)
