"""``str``/``bytes`` columns of MDS shards decoded in bulk through Arrow: byte ranges (or
offsets and data) to object arrays of ``bytes``/``str`` (UTF-8 checked), or to
:class:`~petastream.columns.ragged.Ragged` uint8 for consumers that cut the values themselves.
The encode side, which needs the encoding registry, is in :mod:`petastream.mds.encodings`."""

from __future__ import annotations

from typing import Any

import numpy as np

from petastream.errors import EncodingError

__all__ = ["kind_name", "arrow_decode", "ranges_to_objects", "ranges_as_ragged", "arrow_to_objects",
           "binary_as_ragged"]


def kind_name(kind: str) -> str:
    return "str" if kind == "string" else "bytes"


def arrow_decode(offsets: np.ndarray, data: np.ndarray, kind: str) -> np.ndarray:
    import pyarrow as pa

    n = len(offsets) - 1
    arr = pa.Array.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(offsets.astype(np.int64, copy=False)), pa.py_buffer(data)]
    )
    try:
        arr.validate(full=True)  # offsets inside the data, before anything reads through them
    except pa.ArrowInvalid as e:
        raise EncodingError(f"'{kind_name(kind)}' column: offsets do not fit the data: {e}") from e
    return arrow_to_objects(arr, kind)


def ranges_to_objects(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray, kind: str) -> np.ndarray:
    """Byte ranges of a shard -> object array of ``bytes`` or ``str``: values of one length
    through one gather of whole rows; others through zero-copy Arrow views where this pyarrow
    has them, else through one Arrow take."""
    from petastream.columns.gather import gather_ranges_arrow, gather_ranges_views

    lengths = np.asarray(lengths, dtype=np.int64)
    same = len(lengths) > 0 and lengths.min() == lengths.max()
    arr = None if same else gather_ranges_views(buffer, starts, lengths)
    if arr is None:
        arr = gather_ranges_arrow(buffer, starts, lengths)
    return arrow_to_objects(arr, kind)


def ranges_as_ragged(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray, utf8: bool) -> Any:
    """Byte ranges of a shard -> :class:`~petastream.columns.ragged.Ragged` uint8 (the values back
    to back, and their offsets): a ``str``/``bytes`` column with no Python object per value,
    for consumers that cut the values apart themselves (``strings="jagged"``; TensorFlow from
    worker processes). ``utf8``: checked as ``str`` columns are when decoded to objects.

    The values come from :func:`~petastream.columns.gather.gather_ranges` (whole rows in one
    gather where the lengths agree; short values through a byte index, long ones through Arrow):
    1024 random short strings gathered through Arrow's take (the objects path's choice, which
    then wants an Arrow array) cost more than their objects did."""
    import pyarrow as pa

    from petastream.columns.gather import gather_ranges
    from petastream.columns.ragged import Ragged

    lengths = np.asarray(lengths, dtype=np.int64)
    values = gather_ranges(buffer, starts, lengths)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if utf8 and len(values) and int(values.max()) >= 0x80:  # (ASCII is UTF-8 however cut: 3 us a batch)
        arr = pa.Array.from_buffers(pa.large_string(), len(lengths),
                                    [None, pa.py_buffer(offsets), pa.py_buffer(values)])
        try:
            arr.validate(full=True)  # UTF-8, value by value (half the cost of a checked cast)
        except pa.ArrowInvalid as e:
            raise EncodingError(f"'str' column holds bytes that are not valid UTF-8: {e}") from e
    return Ragged(values, offsets)


def binary_as_ragged(arr: Any) -> Any:
    """A ``large_binary`` (or ``large_string``) Arrow array's values as
    :class:`~petastream.columns.ragged.Ragged` uint8: views of its buffers, no copy."""
    from petastream.columns.ragged import Ragged

    _, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64, count=len(arr) + 1, offset=8 * arr.offset)
    first, last = int(offsets[0]), int(offsets[-1])
    values = (np.frombuffer(data_buf, dtype=np.uint8, count=last - first, offset=first)
              if last > first else np.zeros(0, np.uint8))
    return Ragged(values, offsets - first)


def arrow_to_objects(arr: Any, kind: str) -> np.ndarray:
    """A ``large_binary`` or ``binary_view`` Arrow array -> object array of ``bytes``, or of
    ``str`` (UTF-8 checked)."""
    import pyarrow as pa

    if kind == "string":
        # binary_view arrays (pyarrow 17+) cast to string_view, large_binary to large_string
        view = getattr(pa, "binary_view", None) is not None and arr.type == pa.binary_view()
        try:  # zero-copy; validates UTF-8
            arr = arr.cast(pa.string_view() if view else pa.large_string())
        except pa.ArrowInvalid as e:
            raise EncodingError(f"'str' column holds bytes that are not valid UTF-8: {e}") from e
    if len(arr) == 0:
        return np.empty(0, dtype=object)
    return arr.to_numpy(zero_copy_only=False)
