"""``petastream.index.arrow``: index.json's shards as columns, written beside it.

Parsing ``index.json`` costs O(shards) Python objects (1M shards: ~14 s, 3.4 GB). Writers of
petastream datasets also write this file: the :class:`~petastream.mds.shard_table.ShardTable`
of the same shards as one Arrow IPC record batch, which opens in milliseconds and is mapped,
not copied. ``index.json`` stays exactly Mosaic's and remains the truth:

* the sidecar records the xxh3-128 digest and size of the ``index.json`` bytes it describes;
  a sidecar for other bytes (stale: the index was rewritten; or missing) is ignored and the
  JSON parsed instead;
* its own bytes are covered by an xxh3-128 digest in its header: a damaged file is ignored;
* it is written only when every shard's dict rebuilt from it equals the one written, and
  before ``index.json`` (the commit point), so a crash leaves at worst an ignored stale file.

File: ``MAGIC`` (8 bytes), xxh3-128 digest of the rest (16 bytes), then an Arrow IPC stream.
The schema's metadata holds the index digest and size, its blake2s fingerprint (what
:attr:`MDSDataset.fingerprint` is) and the shard templates as JSON.

Remote datasets read ``index.json`` (and the sidecar) through the node's shard cache, under a
key naming the URL and the object's ETag and size: one download per node, not per rank, and
a rewritten index is fetched again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from petastream.errors import CorruptShardError, DatasetNotFoundError, FormatError
from petastream.mds.index import parse_index
from petastream.mds.shard_table import ShardTable
from petastream.mds.storage import Location

__all__ = ["INDEX_SIDECAR", "dump_index_sidecar", "encode_index_sidecar", "load_index_sidecar", "write_index_files",
           "open_index", "OpenedIndex", "index_fingerprint"]

log = logging.getLogger(__name__)

INDEX_SIDECAR = "petastream.index.arrow"
MAGIC = b"PSIDX\x00\x01\n"  # format version 1
_DIGEST = 16


def index_fingerprint(index_bytes: Any) -> str:
    """:attr:`MDSDataset.fingerprint`: blake2s-128 of the index.json bytes."""
    return hashlib.blake2s(index_bytes, digest_size=16).hexdigest()


def _index_digest(index_bytes: Any) -> str:
    return xxhash.xxh3_128(index_bytes).hexdigest()


# -- writing ---------------------------------------------------------------------------------
def dump_index_sidecar(shards: list[dict[str, Any]], index_bytes: bytes) -> bytes | None:
    """The sidecar for ``shards`` written as ``index_bytes``; None when the columns cannot
    rebuild every shard exactly (then readers parse the JSON, as Mosaic's datasets)."""
    table = ShardTable.from_shards(shards)
    if any(table._build(i) != shard for i, shard in enumerate(shards)):
        return None
    return encode_index_sidecar(table, index_bytes)


def encode_index_sidecar(table: ShardTable, index_bytes: bytes) -> bytes:
    """The sidecar bytes of ``table``, for the index.json ``index_bytes`` (which the caller
    guarantees ``table`` describes exactly)."""
    fields: dict[str, Any] = {
        "samples": pa.array(table.samples), "raw_bytes": pa.array(table.raw_bytes),
        "zip_bytes": pa.array(table.zip_bytes), "template": pa.array(table.template_ids),
        "raw_name": table.raw_names, "zip_name": table.zip_names,
    }
    fields.update({f"raw_hash:{a}": v for a, v in table.raw_hashes.items()})
    fields.update({f"zip_hash:{a}": v for a, v in table.zip_hashes.items()})
    meta = {
        "index_xxh3_128": _index_digest(index_bytes), "index_size": str(len(index_bytes)),
        "fingerprint": index_fingerprint(index_bytes),
        "templates": json.dumps(table.templates),
    }
    batch = pa.record_batch(list(fields.values()), names=list(fields))
    batch = batch.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    payload = sink.getvalue().to_pybytes()
    return MAGIC + xxhash.xxh3_128(payload).digest() + payload


def write_index_files(location: Location, shards: list[dict[str, Any]], index_bytes: bytes) -> None:
    """Write the sidecar, then ``index.json`` (the commit point), both atomically. A sidecar
    that cannot describe these shards is removed, so no stale one stays beside the index."""
    sidecar = dump_index_sidecar(shards, index_bytes)
    if sidecar is not None:
        location.write_bytes_atomic(INDEX_SIDECAR, sidecar)
    elif location.exists(INDEX_SIDECAR):
        location.remove(INDEX_SIDECAR)
    location.write_bytes_atomic("index.json", index_bytes)


# -- reading ---------------------------------------------------------------------------------
def load_index_sidecar(data: Any, index_digest: str, index_size: int) -> tuple[ShardTable, str] | None:
    """(table, fingerprint) from sidecar bytes, or None (logged) unless they are intact and
    describe the index.json whose xxh3-128 is ``index_digest``."""
    view = memoryview(data)
    head = len(MAGIC) + _DIGEST
    if len(view) < head or bytes(view[: len(MAGIC)]) != MAGIC:
        log.info("%s: not a version-1 index sidecar; parsing index.json", INDEX_SIDECAR)
        return None
    payload = view[head:]
    if xxhash.xxh3_128(payload).digest() != bytes(view[len(MAGIC):head]):
        log.warning("%s is damaged (digest mismatch); parsing index.json", INDEX_SIDECAR)
        return None
    try:
        batch = pa.ipc.open_stream(pa.py_buffer(payload)).read_next_batch()
        meta = {k.decode(): v.decode() for k, v in (batch.schema.metadata or {}).items()}
        if meta.get("index_xxh3_128") != index_digest or meta.get("index_size") != str(index_size):
            log.info("%s describes another index.json (stale); parsing index.json", INDEX_SIDECAR)
            return None
        cols = {name: batch.column(i) for i, name in enumerate(batch.schema.names)}
        table = ShardTable(
            samples=_ints(cols["samples"]), raw_bytes=_ints(cols["raw_bytes"]),
            zip_bytes=_ints(cols["zip_bytes"]),
            raw_names=cols["raw_name"], zip_names=cols["zip_name"],
            templates=json.loads(meta["templates"]),
            template_ids=_ints(cols["template"], np.int32),
            raw_hashes={k.split(":", 1)[1]: v for k, v in cols.items() if k.startswith("raw_hash:")},
            zip_hashes={k.split(":", 1)[1]: v for k, v in cols.items() if k.startswith("zip_hash:")},
        )
        return table, meta["fingerprint"]
    except (pa.ArrowException, KeyError, ValueError, TypeError) as e:
        log.warning("%s is unreadable (%s); parsing index.json", INDEX_SIDECAR, e)
        return None


def _ints(column: pa.Array, dtype: Any = np.int64) -> np.ndarray:
    """A zero-copy numpy view of an integer column without nulls (``to_numpy`` may import
    pandas: 0.8 s)."""
    dtype = np.dtype(dtype)
    if column.type != pa.from_numpy_dtype(dtype) or column.null_count:
        raise FormatError(f"column of {column.type} with {column.null_count} nulls; expected {dtype}")
    return np.frombuffer(column.buffers()[1], dtype=dtype, count=len(column),
                         offset=column.offset * dtype.itemsize)


@dataclass
class OpenedIndex:
    table: ShardTable
    fingerprint: str
    from_sidecar: bool


def open_index(location: Location, cache: Any, cache_limit: int | None) -> OpenedIndex:
    """The dataset's shards: from the sidecar when it describes index.json's bytes, else from
    the JSON. Raises FileNotFoundError without an index.json."""
    if location.is_local:
        # Hashed as read in pieces: the JSON is held in memory only when it is parsed.
        path = location.local_file("index.json")
        assert path is not None
        digest, size = _hash_file(path)
        index: Any = None
    else:
        index = _read(location, "index.json", cache, cache_limit)
        if index is None:
            raise DatasetNotFoundError(f"no index.json at {location.child_url('index.json')}")
        digest, size = _index_digest(index), len(index)
    sidecar = _read(location, INDEX_SIDECAR, cache, cache_limit)
    if sidecar is not None:
        loaded = load_index_sidecar(sidecar, digest, size)
        if loaded is not None:
            _close(index)
            return OpenedIndex(loaded[0], loaded[1], True)
    if index is None:
        index = _read(location, "index.json", cache, cache_limit)
        if index is None:  # removed since it was hashed
            raise DatasetNotFoundError(f"no index.json at {location.child_url('index.json')}")
    text = bytes(index)
    _close(index)
    shards = parse_index(text, source=location.child_url("index.json"))
    fingerprint = index_fingerprint(text)
    del text
    return OpenedIndex(ShardTable.from_shards(shards), fingerprint, False)


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


def _close(buf: Any) -> None:
    if isinstance(buf, mmap.mmap):
        buf.close()


def _read(location: Location, name: str, cache: Any, cache_limit: int | None) -> Any | None:
    """``name``'s bytes (mapped where possible), or None if absent. Remote files come through
    the node's cache under a key naming their URL, size and ETag: fetched once per node."""
    if location.is_local:
        path = location.local_file(name)
        assert path is not None
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < 1 << 20:
                    return f.read()
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            return None
    try:
        size, tag = location.file_tag(name)
    except FileNotFoundError:
        return None
    ident = f"{location.child_url(name)}\0{tag}".encode()
    key = "idx-" + hashlib.blake2s(ident, digest_size=16).hexdigest()

    def fill(out: Any) -> None:
        data = location.read_bytes(name)
        if len(data) != size:
            raise CorruptShardError(f"{location.child_url(name)}: {len(data)} bytes read, "
                                    f"{size} listed; it changed while read: open the dataset again")
        out.write(data)

    return cache.get(key, size, fill, limit=cache_limit)
