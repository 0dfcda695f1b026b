"""One MDS shard's bytes: building them, and reading them per sample or in bulk.

Layout (all little-endian, Mosaic's ``MDSWriter.encode_joint_shard``)::

    offset 0           uint32 N                 number of samples
    offset 4           uint32 offsets[N+1]      absolute offset of each sample; offsets[N] = file size
    offset 4+4(N+1)    config JSON              UTF-8, not length-prefixed (never parsed on read)
    offsets[i]         sample i                 [uint32 size per variable-size column][payloads]

A sample's payloads follow the sorted column order with no padding; only variable-size columns
carry a length. Readers use the offsets table alone.

Bulk decode (``ids`` in any order, repeats allowed): in an all-fixed-size layout every sample
has the same size and samples are contiguous, so the data region *is* a packed structured array
and each column is one strided view (no copy, no loop; a selection copies whole records). Otherwise
the per-sample length headers are gathered in one call, column start positions follow by
cumulative sums and are checked against the sample sizes, fixed columns are gathered as
``(n, size)`` byte matrices and viewed as their dtype, and each variable column's ranges go to
its encoding's ``decode_ranges`` (``str``/``bytes``: one Arrow take, then Python objects), all
through :mod:`petastream.columns.gather`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from petastream.columns.gather import INLINE, gather_rows
from petastream.columns.ops import split_rows
from petastream.columns.pool import pooled_take
from petastream.columns.text import ranges_as_ragged
from petastream.errors import CorruptShardError, EncodingError, OutOfRangeError, UnknownColumnError
from petastream.mds.layout import ColumnLayout

__all__ = ["build_shard", "shard_parts", "ShardData", "Located"]

# What a value's decoder raises on damaged bytes: bad UTF-8 or JSON (ValueError), bad
# numbers (ValueError, decimal's ArithmeticError), our own checks (EncodingError).
_DECODE_ERRORS = (EncodingError, ValueError, ArithmeticError)


def build_shard(config_json: bytes, sample_sizes: np.ndarray, payload: Any) -> bytes:
    """Assemble shard bytes from the sample payloads (one buffer, or a list of buffers that
    concatenate to them: joined once, with no intermediate copy) and their sizes."""
    return b"".join(shard_parts(config_json, sample_sizes, payload))


def shard_parts(config_json: bytes, sample_sizes: np.ndarray, payload: Any) -> list[Any]:
    """The shard's bytes as buffers that concatenate to them (header, config, payloads):
    what :func:`build_shard` joins, for a writer that can write or hash them one by one."""
    n = len(sample_sizes)
    header = np.empty(n + 2, dtype="<u4")
    header[0] = n
    first = 4 * (n + 2) + len(config_json)
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = first
    np.cumsum(sample_sizes, out=offsets[1:])
    offsets[1:] += first
    if offsets[-1] >= 1 << 32:
        raise CorruptShardError(f"a shard of {offsets[-1]} bytes exceeds the 4 GiB MDS limit; lower size_limit")
    header[1:] = offsets
    parts = payload if isinstance(payload, list) else [payload]
    return [header.tobytes(), config_json, *(memoryview(p).cast("B") for p in parts)]


class Located(NamedTuple):
    """Where a set of a shard's samples keep their columns (:meth:`ShardData.locate`)."""

    head: np.ndarray
    """``(n, width)`` uint8: each sample's column-size header and leading fixed columns, and
    (where ``width`` allows) the first bytes of the first variable-size column."""
    where: dict[str, tuple[np.ndarray, np.ndarray | None, int | None]]
    """Per column: its start in the shard per sample, its lengths (variable-size columns,
    else None) and its offset in ``head`` (None past the first variable-size column)."""


class ShardData:
    """Decoded view of one shard's raw (uncompressed) bytes.

    ``buffer`` may be ``bytes``, an ``mmap`` or a numpy array; nothing is copied on open. The
    header is validated against the file size (and the expected sample count) so a truncated
    or corrupted shard fails here with the file named, not later with wrong values.
    """

    def __init__(self, buffer: Any, layout: ColumnLayout, *, name: str = "<shard>",
                 expected_samples: int | None = None):
        self.name = name
        self.layout = layout
        self.u8 = np.frombuffer(buffer, dtype=np.uint8)
        size = len(self.u8)
        if size < 4:
            raise CorruptShardError(f"shard {name}: {size} bytes is too short for a header")
        n = int(self.u8[:4].view("<u4")[0])
        if expected_samples is not None and n != expected_samples:
            raise CorruptShardError(
                f"shard {name}: holds {n} samples but index.json says {expected_samples}"
            )
        if 4 * (n + 2) > size:
            raise CorruptShardError(f"shard {name}: truncated ({size} bytes) inside its offsets table")
        self.offsets = self.u8[4 : 4 * (n + 2)].view("<u4").astype(np.int64)
        if n and (
            self.offsets[-1] != size
            or self.offsets[0] < 4 * (n + 2)
            or (np.diff(self.offsets) < 0).any()
        ):
            raise CorruptShardError(
                f"shard {name}: offsets table is inconsistent with the file size {size} "
                f"(last offset {int(self.offsets[-1])}); the file is truncated or corrupted"
            )
        self.num_samples = n

    # -- per sample --------------------------------------------------------------------------
    def sample_bytes(self, i: int) -> memoryview:
        if not 0 <= i < self.num_samples:
            raise OutOfRangeError(f"sample {i} out of range for shard {self.name} with {self.num_samples} samples")
        return self.u8[self.offsets[i] : self.offsets[i + 1]].data

    def get_item(self, i: int) -> dict[str, Any]:
        """Decode one sample to Mosaic's per-sample Python values."""
        data = self.sample_bytes(i)
        layout = self.layout
        nvar = len(layout.var_positions)
        var_sizes = np.frombuffer(data[: 4 * nvar], "<u4") if nvar else ()
        pos, k, out = 4 * nvar, 0, {}
        for name, enc, size in zip(layout.names, layout.encodings, layout.sizes):
            if size is None:
                size = int(var_sizes[k])
                k += 1
            if pos + size > len(data):
                raise CorruptShardError(f"shard {self.name}: sample {i} column {name!r} runs past the sample")
            try:
                out[name] = enc.decode(data[pos : pos + size])
            except _DECODE_ERRORS as e:
                raise self._damaged(name, i, e) from e
            pos += size
        return out

    # -- bulk ------------------------------------------------------------------------------
    def read_columns(self, ids: np.ndarray | None = None,
                     columns: Sequence[str] | None = None, strings: str = "objects") -> dict[str, Any]:
        """Decode samples ``ids`` (all, in order, when None) to one array-like per column.

        Fixed-size columns come back as numpy arrays (a zero-copy view over the shard when
        ``ids`` is None and every column is fixed-size); ``str``/``bytes`` as object arrays
        (``strings="ragged"``: as :class:`~petastream.columns.ragged.Ragged` uint8 of their
        bytes, see :func:`~petastream.mds.encodings.ranges_as_ragged`); 1-D numeric
        ``ndarray`` columns of variable length as :class:`~petastream.columns.ragged.Ragged`.
        """
        layout = self.layout
        wanted = list(layout.names) if columns is None else list(columns)
        for c in wanted:
            if c not in layout.names:
                raise UnknownColumnError(f"no column {c!r}; columns are {list(layout.names)}")
        n_all = self.num_samples
        if ids is not None:
            ids = np.asarray(ids, dtype=np.int64)
            if len(ids) and (ids.min() < 0 or ids.max() >= n_all):
                raise OutOfRangeError(f"sample ids out of range for shard {self.name} with {n_all} samples")
        if layout.all_fixed:
            return self._read_fixed(ids, wanted)
        return self._read_mixed(ids, wanted, strings == "ragged")

    def _read_fixed(self, ids: np.ndarray | None, wanted: list[str]) -> dict[str, Any]:
        table = self._fixed_table()
        if ids is None:  # the whole shard: views of its rows, no copy
            return {c: table[c] for c in wanted}
        # Rows as opaque items (a fancy index of a structured array is far slower), cut into
        # contiguous columns at once: the frameworks need contiguous batches, and one bulk copy
        # per column beats a copy per batch of strided views (1.18x on a torch epoch).
        rows = self.fixed_rows(ids)  # a pooled temporary: back in the pool once split
        return split_rows(rows, table.dtype, wanted)

    def fixed_rows(self, ids: np.ndarray) -> np.ndarray:
        """Samples ``ids`` of an all-fixed-size layout as packed rows, one opaque ``V<row
        bytes>`` item each: what a read across shards writes into one table
        (:func:`petastream.columns.ops.split_rows` cuts it into columns). The caller has
        checked ``ids`` (the dataset's read does, per dataset)."""
        table = self._fixed_table()
        return pooled_take(table.view(np.dtype((np.void, table.dtype.itemsize))), ids)

    def _fixed_table(self) -> np.ndarray:
        dtype = self.layout.fixed_dtype()
        n = self.num_samples
        start = int(self.offsets[0]) if n else 0
        if n and int(self.offsets[-1]) - start != n * dtype.itemsize:
            raise CorruptShardError(f"shard {self.name}: sample sizes do not match the fixed-size columns")
        return np.frombuffer(self.u8, dtype=dtype, count=n, offset=start) if n else np.empty(0, dtype)

    def _read_mixed(self, ids: np.ndarray | None, wanted: list[str], raw_strings: bool = False) -> dict[str, Any]:
        from petastream.mds.mixed_rows import Part, read_mixed

        return read_mixed([Part(self, ids, None)], len(self.offsets) - 1 if ids is None else len(ids),
                          wanted, raw_strings)

    def locate(self, ids: np.ndarray | None) -> Located:
        """Where every column of samples ``ids`` (all when None; checked by the caller) lies:
        the gathered prefix of each sample (its column-size header and the fixed columns before
        the first variable one) and, per column, its start positions, lengths (variable-size
        columns) and offset in the prefix (columns inside it). Raises naming the shard where
        the column sizes do not add up to the sample sizes, so that every range is inside
        its sample before anything reads through it."""
        layout = self.layout
        starts = self.offsets[:-1] if ids is None else self.offsets[ids]
        ends = self.offsets[1:] if ids is None else self.offsets[ids + 1]
        n = len(starts)
        nvar = len(layout.var_positions)
        if n and (ends - starts < 4 * nvar).any():
            raise CorruptShardError(f"shard {self.name}: a sample is shorter than its column-size header")
        # The length header and the fixed columns before the first variable one sit at fixed
        # offsets from each sample's start: one gather of that prefix for all of them (each
        # random gather costs a cache miss per sample; the prefix columns are views into it).
        prefix = 4 * nvar
        for size in layout.sizes:
            if size is None:
                break
            prefix += size
        # And the first bytes of the first variable-size column (what a binary view of its
        # values holds), where every sample's reach: the same cache lines, not another gather.
        reach = prefix + INLINE if nvar and n and int(starts.max()) + prefix + INLINE <= len(self.u8) else prefix
        head = gather_rows(self.u8, starts, reach)
        var_sizes = head[:, :4 * nvar].copy().view("<u4").astype(np.int64)
        # Where every column starts, checked against the sample sizes before anything is decoded.
        pos = starts + 4 * nvar
        where: dict[str, tuple[np.ndarray, np.ndarray | None, int | None]] = {}
        k = 0
        offset: int | None = 4 * nvar  # the column's place in the prefix, while in it
        for name, size in zip(layout.names, layout.sizes):
            if size is None:
                lengths = var_sizes[:, k]
                k += 1
                where[name] = (pos, lengths, offset)
                pos, offset = pos + lengths, None
            else:
                where[name] = (pos, None, offset)
                pos, offset = pos + size, None if offset is None else offset + size
        if n and not np.array_equal(pos, ends):
            raise CorruptShardError(f"shard {self.name}: column sizes do not add up to the sample sizes")
        return Located(head, where)

    def decode_var(self, name: str, at: np.ndarray, lengths: np.ndarray, ids: np.ndarray | None,
                   raw_strings: bool = False) -> Any:
        """Variable-size column ``name`` at byte ranges ``at``/``lengths`` (of samples ``ids``,
        for the message) through its encoding (``raw_strings``: str/bytes as ``Ragged`` uint8);
        damaged values raise naming the shard, column and sample."""
        enc = self.layout.encodings[self.layout.names.index(name)]
        try:
            if raw_strings and enc.name in ("str", "bytes"):
                return ranges_as_ragged(self.u8, at, lengths, utf8=enc.name == "str")
            return enc.decode_ranges(self.u8, at, lengths)
        except _DECODE_ERRORS as e:
            bad = self._first_bad(enc, at, lengths)
            sample = None if bad is None else int(bad if ids is None else ids[bad])
            raise self._damaged(name, sample, e) from e

    def _damaged(self, column: str, sample: int | None, error: Exception) -> CorruptShardError:
        where = f"column {column!r}" + ("" if sample is None else f", sample {sample} of the shard")
        return CorruptShardError(
            f"shard {self.name}: {where} cannot be decoded ({error}); the shard is damaged: "
            "run `petastream verify` on the dataset, rewrite or restore the file"
        )

    def _first_bad(self, enc: Any, at: np.ndarray, lengths: np.ndarray) -> int | None:
        """Which value failed (the error path only: decodes one value at a time)."""
        for j in range(len(at)):
            try:
                enc.decode(self.u8[at[j] : at[j] + lengths[j]].tobytes())
            except _DECODE_ERRORS:
                return j
        return None
