"""``petastream.index.arrow``: index.json's shards as columns, for opening in milliseconds.

Parsing ``index.json`` costs O(shards) (1M shards: seconds even as columns,
:mod:`petastream.mds.index_columns`). The first open of an index on a node parses it once and
keeps the :class:`~petastream.mds.shard_table.ShardTable` in this format in the node's cache
(:mod:`petastream.mds.index_open`); every later open on the node maps it instead: one Arrow
IPC record batch, mapped, not copied. ``index.json`` stays exactly Mosaic's and remains the
truth:

* the sidecar records the xxh3-128 digest and size of the ``index.json`` bytes it describes;
  a sidecar for other bytes is never used;
* its own bytes are covered by an xxh3-128 digest in its header: a damaged file is not used.

File: ``MAGIC`` (8 bytes), xxh3-128 digest of the rest (16 bytes), then an Arrow IPC stream.
The schema's metadata holds the index digest and size, its blake2s fingerprint (what
:attr:`MDSDataset.fingerprint` is) and the shard templates as JSON.

Earlier petastream versions wrote this file beside ``index.json`` (``petastream.index.arrow``):
such a file is still read when it describes the index, and ignored otherwise. Writers no longer
leave it there: a dataset directory holds exactly the files Mosaic's writer makes.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from petastream.errors import FormatError
from petastream.mds.shard_table import ShardTable

__all__ = ["INDEX_SIDECAR", "MAGIC", "encode_index_sidecar", "load_index_sidecar", "index_fingerprint", "index_digest"]

log = logging.getLogger(__name__)

INDEX_SIDECAR = "petastream.index.arrow"
MAGIC = b"PSIDX\x00\x01\n"  # format version 1
_DIGEST = 16


def index_fingerprint(index_bytes: Any) -> str:
    """:attr:`MDSDataset.fingerprint`: blake2s-128 of the index.json bytes."""
    return hashlib.blake2s(index_bytes, digest_size=16).hexdigest()


def index_digest(index_bytes: Any) -> str:
    """The xxh3-128 hex digest of index.json's bytes: what a sidecar names them by."""
    return xxhash.xxh3_128(index_bytes).hexdigest()


# -- writing ---------------------------------------------------------------------------------
def encode_index_sidecar(table: ShardTable, digest: str, size: int, fingerprint: str) -> pa.Buffer:
    """The sidecar bytes of ``table``, for the index.json of xxh3-128 ``digest``, ``size``
    bytes and ``fingerprint`` (which the caller guarantees ``table`` describes exactly)."""
    fields: dict[str, Any] = {
        "samples": _column(table.samples), "raw_bytes": _column(table.raw_bytes),
        "zip_bytes": _column(table.zip_bytes), "template": _column(table.template_ids),
        "raw_name": table.raw_names, "zip_name": table.zip_names,
    }
    fields.update({f"raw_hash:{a}": v for a, v in table.raw_hashes.items()})
    fields.update({f"zip_hash:{a}": v for a, v in table.zip_hashes.items()})
    meta = {
        "index_xxh3_128": digest, "index_size": str(size), "fingerprint": fingerprint,
        "templates": json.dumps(table.templates),
    }
    batch = pa.record_batch(list(fields.values()), names=list(fields))
    batch = batch.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    payload = sink.getvalue()
    out = pa.allocate_buffer(len(MAGIC) + _DIGEST + payload.size)
    view = memoryview(out).cast("B")  # one copy of the payload, not three (1M shards: ~100 MB)
    view[:len(MAGIC)] = MAGIC
    view[len(MAGIC):len(MAGIC) + _DIGEST] = xxhash.xxh3_128(payload).digest()
    view[len(MAGIC) + _DIGEST:] = memoryview(payload).cast("B")
    return out


def _column(values: np.ndarray) -> pa.Array:
    """An Arrow array of a numpy one, from its buffer (``pa.array`` imports pandas: 0.5 s+)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


# -- reading ---------------------------------------------------------------------------------
def load_index_sidecar(data: Any, digest: str, size: int, source: str = INDEX_SIDECAR) -> tuple[ShardTable, str] | None:
    """(table, fingerprint) from sidecar bytes, or None (logged, naming ``source``) unless
    they are intact and describe the index.json of xxh3-128 ``digest`` and ``size`` bytes."""
    view = memoryview(data)
    head = len(MAGIC) + _DIGEST
    if len(view) < head or bytes(view[: len(MAGIC)]) != MAGIC:
        log.info("%s: not a version-1 index sidecar; not used", source)
        return None
    payload = view[head:]
    if xxhash.xxh3_128(payload).digest() != bytes(view[len(MAGIC):head]):
        log.warning("%s is damaged (digest mismatch); not used", source)
        return None
    try:
        batch = pa.ipc.open_stream(pa.py_buffer(payload)).read_next_batch()
        meta = {k.decode(): v.decode() for k, v in (batch.schema.metadata or {}).items()}
        if meta.get("index_xxh3_128") != digest or meta.get("index_size") != str(size):
            log.info("%s describes another index.json (stale); not used", source)
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
        log.warning("%s is unreadable (%s); not used", source, e)
        return None


def _ints(column: pa.Array, dtype: Any = np.int64) -> np.ndarray:
    """A zero-copy numpy view of an integer column without nulls (``to_numpy`` may import
    pandas: 0.8 s)."""
    dtype = np.dtype(dtype)
    if column.type != pa.from_numpy_dtype(dtype) or column.null_count:
        raise FormatError(f"column of {column.type} with {column.null_count} nulls; expected {dtype}")
    return np.frombuffer(column.buffers()[1], dtype=dtype, count=len(column),
                         offset=column.offset * dtype.itemsize)
