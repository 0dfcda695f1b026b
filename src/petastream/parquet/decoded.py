"""Decoded row groups kept in the node's shard cache as Arrow IPC files (``cache_decoded``).

Once a row group's bytes are in memory, decoding them (decompression, dictionary pages, the
repetition levels of list columns) is most of what reading it costs, and a loader pays it
again every epoch. An uncompressed Arrow IPC file maps back with no copy in a fraction of a
millisecond. So the first read of a row group stores it, decoded, as one cache entry: its
fixed-size columns as the packed rows a read gathers from (one ``fixed_size_binary`` column,
``ROWS``), its other columns as Arrow decoded them; the rows kept after filtering only. Later reads (later epochs,
the other ranks and worker processes of the node) map that entry instead of decoding again.
This is the approach of Hugging Face datasets' Arrow cache or tf.data's ``cache(filename)``.
Here it lives in the shard cache, so ``cache_limit`` bounds it, the node's processes share
it, and one process fills each entry.

An entry is the IPC file followed by a trailer: the file's xxh3-64 digest (8 bytes, big-endian)
and ``_MAGIC``. Each process checks an entry's digest the first time it maps it, as MDS shards
read in place are checked (:mod:`petastream.mds.sources`). An entry that fails the check is an
error naming it and how to drop it. It is never served, and never silently decoded again
either: a damaged disk should be seen.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

import numpy as np

from petastream.errors import CorruptShardError
from petastream.parquet.plan import Plan, Unit

__all__ = ["decoded_key", "encode", "decode", "entry_size_estimate", "ROWS"]

#: The packed rows' column in an entry (a name no Parquet column of a source can have).
ROWS = "\0petastream.rows"

_MAGIC = b"PSTDEC01"
_TRAILER = struct.Struct(">Q8s")  # xxh3-64 of the IPC file, magic
_VERSION = "1"  # bump when what an entry holds changes

# Paths of the entries this process has checked (a key names an entry's content, so an entry
# filled again after an eviction holds the same bytes). A set's add and clear hold the GIL: no
# lock, so nothing to reset in a forked child.
_checked: set[str] = set()
_CHECKED_MAX = 1 << 20


def decoded_key(plan: Plan, unit: Unit, packed: np.dtype, null_policy: str) -> str:
    """The cache key of ``unit``'s decoded rows: the file's version and footer, the row group,
    the rows kept, the columns read and how the fixed-size ones are packed (another filter,
    projection, ``array_lengths`` or ``null_policy`` is another entry)."""
    f = plan.files[unit.file]
    ident = [_VERSION, f.ref.url, f.ref.tag, f.footer_digest, str(unit.row_group),
             (unit.mask or b"").hex(), ",".join(plan.read_columns), repr(packed.descr), null_policy]
    return "pqd-" + hashlib.blake2s("\0".join(ident).encode(), digest_size=16).hexdigest()


def entry_size_estimate(unit: Unit) -> int:
    """About the bytes of ``unit``'s entry: the uncompressed bytes of its columns."""
    return unit.stored + _TRAILER.size


def encode(rows: np.ndarray, table: Any) -> list[Any]:
    """Packed ``rows`` (opaque items) and the Arrow ``table`` of the other columns as one
    cache entry: its parts (the IPC file, the trailer) to write in order."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import xxhash

    width = rows.dtype.itemsize
    if width:
        packed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(rows), [None, pa.py_buffer(rows)])
        table = table.append_column(ROWS, packed)
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    body = sink.getvalue()
    trailer = _TRAILER.pack(xxhash.xxh3_64_intdigest(memoryview(body)), _MAGIC)
    return [body, trailer]


def decode(path: str, buf: Any, rows: int, item: np.dtype, columns: list[str], where: str) -> tuple[np.ndarray, Any]:
    """The packed rows (of ``item``s) and the table of the other ``columns`` of the entry at
    ``path`` (mapped as ``buf``), zero-copy, checked (see the module doc)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import xxhash

    view = memoryview(buf)

    def damaged(why: str) -> CorruptShardError:
        return CorruptShardError(f"decoded cache entry {path} of {where} is damaged ({why}); remove it with "
                                 "`petastream cache prune --all` (or cache_decoded=False) and read again")

    if len(view) < _TRAILER.size:
        raise damaged(f"{len(view)} bytes")
    digest, magic = _TRAILER.unpack(view[len(view) - _TRAILER.size:])
    body = view[:len(view) - _TRAILER.size]
    if magic != _MAGIC:
        raise damaged("no trailer")
    if path not in _checked:
        if xxhash.xxh3_64_intdigest(body) != digest:
            raise damaged("its xxh3-64 digest differs")
        if len(_checked) >= _CHECKED_MAX:
            _checked.clear()
        _checked.add(path)
    try:
        table = ipc.open_file(pa.py_buffer(body)).read_all()
    except (pa.ArrowException, OSError) as e:
        raise damaged(str(e)) from e
    expected = columns + ([ROWS] if item.itemsize else [])
    if table.num_rows != rows or table.column_names != expected:
        raise damaged(f"{table.num_rows} rows of {table.column_names}, expected {rows} of {expected}")
    if not item.itemsize:
        return np.zeros(rows, item), table
    column = table.column(ROWS)
    packed = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()  # one: no copy
    if packed.type.byte_width != item.itemsize or packed.null_count:
        raise damaged(f"its rows are {packed.type}, expected fixed_size_binary[{item.itemsize}]")
    data = packed.buffers()[1]
    out = np.frombuffer(data, dtype=item, count=rows, offset=packed.offset * item.itemsize)
    return out, table.drop_columns([ROWS])
