"""``Ragged``: a column of 1-D arrays of one dtype (variable-length lists), as every source's
reads return them (MDS ``ndarray:<dtype>`` columns, Parquet list columns, ``str``/``bytes``
columns read as bytes), with no Python object per value."""

from __future__ import annotations

import numpy as np

from petastream.columns.gather import gather_ranges
from petastream.columns.pool import pooled_empty

__all__ = ["Ragged"]


class Ragged:
    """A column of 1-D arrays of one dtype: ``values`` concatenated, ``offsets[i]:offsets[i+1]``.

    ``column[i]`` is the i-th array (a view); ``to_list()`` gives them all.
    """

    __slots__ = ("values", "offsets")

    def __init__(self, values: np.ndarray, offsets: np.ndarray):
        self.values = values
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def take(self, ids: np.ndarray) -> Ragged:
        ids = np.asarray(ids, dtype=np.int64)
        n = len(ids)
        if n and ids[0] >= 0 and ids[-1] - ids[0] == n - 1 and (n == 1 or bool((np.diff(ids) == 1).all())):
            # A run of consecutive rows (whole row groups in stored order, compat's default):
            # one copy of the values instead of a range per row.
            part = self.slice(int(ids[0]), int(ids[-1]) + 1)
            values = pooled_empty(part.values.shape, part.values.dtype)  # (a read's temporary, mostly)
            values[...] = part.values
            return Ragged(values, part.offsets.astype(np.int64, copy=True))
        starts = self.offsets[ids]
        # The ids' own lengths, not the whole column's: a batch of 1024 from a row group of
        # 65k rows would otherwise diff 65k offsets per take.
        lengths = self.offsets[ids + 1] - starts
        values = gather_ranges(self.values.view(np.uint8), starts * self.values.itemsize,
                         lengths * self.values.itemsize).view(self.values.dtype)
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Ragged(values, offsets)

    def slice(self, start: int, stop: int) -> Ragged:
        """Rows ``start:stop`` (``0 <= start <= stop <= len``) as views, without a copy."""
        offsets = self.offsets[start : stop + 1]
        return Ragged(self.values[offsets[0] : offsets[-1]], offsets - offsets[0])

    def to_list(self) -> list[np.ndarray]:
        return [self[i] for i in range(len(self))]

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    def __repr__(self) -> str:
        return f"Ragged(n={len(self)}, dtype={self.values.dtype}, values={self.values.size})"

