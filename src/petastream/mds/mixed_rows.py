"""A block of rows of a mixed MDS layout (some column of variable size) read from one or more
shards straight into place (issue 36).

A chunk of a shuffled epoch holds rows of several shards interleaved: part ``k`` (its local
sample ids) lands at rows ``positions[k]`` of the block. Reading each shard's columns and
then scattering them copied every fixed-size value three times (the prefix gather, a column
copy, the scatter) and every ``str``/``bytes`` value of variable length three times with two
sorts (an Arrow take per shard, a concatenation, a take into the block's order). Here:

* fixed-size columns go from each part's gathered prefix (or a gather of the shard) into one
  pooled array at their rows: one copy after the gather;
* ``str``/``bytes`` read as bytes (``strings="ragged"``) whose values all have one length
  (hashes, fixed-size blobs) go into one pooled values buffer the same way;
* other ``str``/``bytes`` values are described, part by part, by Arrow ``binary_view``
  views written at their rows of one views array (a view points into its shard's buffer, or
  holds a value of up to 12 bytes itself), and one Arrow cast copies every value into
  place in the block's order: no sort, no intermediate copy. The result lands in one pooled
  buffer, so that a batch can hand it out without a copy of its own (see
  :mod:`petastream.columns.pool` for why a pooled buffer is never reused while held);
* everything else (objects, ``ndarray`` columns) is decoded per part and scattered as before
  (:func:`petastream.columns.ops.scatter_columns`).

Every range is inside its sample before anything reads through it (:meth:`ShardData.locate`
checks that the column sizes add up to the sample sizes), and ``str`` bytes are checked as
UTF-8 as the per-shard read checks them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from petastream.columns.gather import INLINE, gather_rows, range_views, views_as_binary
from petastream.columns.ops import scatter_columns
from petastream.columns.pool import pooled_empty
from petastream.columns.ragged import Ragged
from petastream.columns.text import binary_as_ragged
from petastream.errors import CorruptShardError, EncodingError

if TYPE_CHECKING:
    from petastream.mds.shard import Located, ShardData

__all__ = ["Part", "read_mixed"]


class Part(NamedTuple):
    """One shard's rows of a block."""

    shard: ShardData
    ids: np.ndarray | None
    """Local sample ids, checked (None: all the shard's samples, in order)."""
    positions: np.ndarray | None
    """Rows of the block they land at (None: the part is the whole block, in order)."""


def read_mixed(parts: Sequence[Part], n: int, wanted: Sequence[str], raw_strings: bool) -> dict[str, Any]:
    """Columns ``wanted`` of the ``n`` rows of a block made of ``parts`` (their positions
    cover ``0..n-1`` once), all of one mixed layout; ``raw_strings``: ``str``/``bytes`` as
    :class:`Ragged` uint8 (``strings="ragged"``), else as objects."""
    layout = parts[0].shard.layout
    located = [p.shard.locate(p.ids) for p in parts]
    out: dict[str, Any] = {}
    for name in wanted:
        enc = layout.encodings[layout.names.index(name)]
        if enc.size is not None:
            assert enc.dtype is not None  # a fixed-size column
            out[name] = _fixed(parts, located, name, enc.size, enc.dtype, n)
            continue
        col = None
        if raw_strings and enc.name in ("str", "bytes"):
            col = _strings(parts, located, name, n, utf8=enc.name == "str")
        out[name] = col if col is not None else _decoded(parts, located, name, n, raw_strings)
    return out


def _place(out: np.ndarray, positions: np.ndarray | None, rows: np.ndarray) -> None:
    if positions is None:
        out[...] = rows
    else:
        out[positions] = rows


def _items(a: np.ndarray, size: int) -> np.ndarray:
    """A C-contiguous uint8 array of ``n * size`` bytes (``(n, size)`` or flat) as ``n`` opaque
    ``V<size>`` items (whole rows move in one item copy each)."""
    return a.reshape(-1, size).view(np.dtype((np.void, size))).reshape(-1)


def _lengths(loc: Located, name: str) -> np.ndarray:
    lengths = loc.where[name][1]
    assert lengths is not None  # a variable-size column
    return lengths


def _fixed(parts: Sequence[Part], located: list[Located], name: str, size: int, dtype: np.dtype,
           n: int) -> np.ndarray:
    """A fixed-size column: each part's values (from its prefix gather, or gathered from the
    shard) written at their rows of one pooled array."""
    if size == 0 or n == 0:
        return np.zeros((n, *dtype.shape), dtype.base)
    raw = pooled_empty((n, size), np.uint8)
    out = _items(raw, size)
    item = np.dtype((np.void, size))
    for part, loc in zip(parts, located):
        k = len(loc.head)
        if k == 0:
            continue
        at, _, offset = loc.where[name]
        if offset is not None:  # inside the prefix: a strided view of it, one copy into place
            width = loc.head.shape[1]
            head = np.ascontiguousarray(loc.head)
            rows = np.ndarray((k,), dtype=item, buffer=head, offset=offset, strides=(width,))
        else:
            rows = _items(gather_rows(part.shard.u8, at, size), size)
        _place(out, part.positions, rows)
    return raw.view(dtype.base).reshape((n, *dtype.shape))


def _strings(parts: Sequence[Part], located: list[Located], name: str, n: int, utf8: bool) -> Ragged | None:
    """A ``str``/``bytes`` column as :class:`Ragged` uint8 in a pooled buffer; None where
    this pyarrow has no ``binary_view`` arrays (or a shard is past their 2 GiB reach) and the
    lengths differ: the caller decodes per part then."""
    if len(parts) == 1 and parts[0].positions is None:
        lengths = _lengths(located[0], name)
    else:
        lengths = np.empty(n, dtype=np.int64)
        for part, loc in zip(parts, located):
            _place(lengths, part.positions, _lengths(loc, name))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return Ragged(np.zeros(0, np.uint8), offsets)
    values = pooled_empty(total, np.uint8)
    size = int(lengths[0])
    if (lengths == size).all():
        out = _items(values, size)
        for part, loc in zip(parts, located):
            if len(loc.head):
                _place(out, part.positions, _items(gather_rows(part.shard.u8, loc.where[name][0], size), size))
    else:
        views = np.empty((n, 4), dtype=np.int32)
        for k, (part, loc) in enumerate(zip(parts, located)):
            offset = loc.where[name][2]  # the first variable-size column: its first bytes in the head
            lead = (np.ascontiguousarray(loc.head[:, offset:offset + INLINE])
                    if offset is not None and loc.head.shape[1] >= offset + INLINE else None)
            got = range_views(part.shard.u8, loc.where[name][0], _lengths(loc, name), k, lead)
            if got is None:
                return None
            _place(views, part.positions, got)
        arr = views_as_binary(views, [p.shard.u8 for p in parts])
        values[...] = binary_as_ragged(arr).values
    if utf8 and int(values.max()) >= 0x80:  # (ASCII is UTF-8 however cut)
        _check_utf8(parts, located, name, values, offsets)
    return Ragged(values, offsets)


def _check_utf8(parts: Sequence[Part], located: list[Located], name: str, values: np.ndarray,
                offsets: np.ndarray) -> None:
    import pyarrow as pa

    arr = pa.Array.from_buffers(pa.large_string(), len(offsets) - 1,
                                [None, pa.py_buffer(offsets), pa.py_buffer(values)])
    try:
        arr.validate(full=True)
        return
    except pa.ArrowInvalid:
        pass
    # Which shard and sample: each part through its own decode, which raises naming them.
    for part, loc in zip(parts, located):
        at, lengths, _ = loc.where[name]
        assert lengths is not None
        part.shard.decode_var(name, at, lengths, part.ids, raw_strings=True)
    raise CorruptShardError(f"shards {sorted({p.shard.name for p in parts})}: column {name!r} holds bytes "
                            "that are not valid UTF-8; run `petastream verify` on the dataset") from EncodingError(name)


def _decoded(parts: Sequence[Part], located: list[Located], name: str, n: int, raw_strings: bool) -> Any:
    """A column through its encoding, part by part, scattered into the block's order."""
    cols = []
    for part, loc in zip(parts, located):
        at, lengths, _ = loc.where[name]
        assert lengths is not None
        cols.append(part.shard.decode_var(name, at, lengths, part.ids, raw_strings))
    if len(parts) == 1 and parts[0].positions is None:
        return cols[0]
    positions = [p.positions for p in parts]
    assert all(pos is not None for pos in positions)
    return scatter_columns([{name: c} for c in cols], positions, n)[name]  # type: ignore[arg-type]
