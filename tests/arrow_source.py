"""A second :class:`petastream.source.Source`, tiny and in memory: an Arrow table cut into shards.

It exists to prove the seam: every loader and the contract property tests run over it
unchanged, so the pipeline depends on the protocol and on nothing MDS-specific. Numeric
columns only (that is all the contract tests need); their MDS encoding names are the numpy
dtype names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from petastream.columns.ops import scatter_columns
from petastream.source import Source, read_ids
from petastream.stream.grouping import shard_offsets


class ArrowSource:
    """``table`` in shards of ``shard_sizes`` rows (which must add up to its length)."""

    cache_limit = None
    reads_in_place = True

    def __init__(self, table: pa.Table, shard_sizes: Sequence[int]):
        if sum(shard_sizes) != table.num_rows:
            raise ValueError(f"shard sizes add up to {sum(shard_sizes)}, the table has {table.num_rows} rows")
        self.table = table
        self.url = f"arrow-table({table.num_rows} rows)"
        self.shard_sizes = np.asarray(shard_sizes, dtype=np.int64)
        self.shard_offsets = shard_offsets(self.shard_sizes)
        self._columns = {f.name: np.dtype(f.type.to_pandas_dtype()).name for f in table.schema}
        self.closed = 0  # passes ended (close() calls)

    def __len__(self) -> int:
        return self.table.num_rows

    @property
    def num_shards(self) -> int:
        return len(self.shard_sizes)

    @property
    def columns(self) -> Mapping[str, str]:
        return self._columns

    @property
    def logical_dtypes(self) -> Mapping[str, str]:
        return {}

    @property
    def stored_bytes(self) -> int:
        return int(self.table.nbytes)

    def read(self, ids: np.ndarray, columns: Sequence[str] | None = None) -> dict[str, Any]:
        return read_ids(self, ids, columns)

    def read_shard(self, shard: int, ids: np.ndarray | None = None,
                   columns: Sequence[str] | None = None) -> dict[str, Any]:
        start, stop = int(self.shard_offsets[shard]), int(self.shard_offsets[shard + 1])
        rows = np.arange(start, stop) if ids is None else start + np.asarray(ids, dtype=np.int64)
        names = list(self._columns) if columns is None else list(columns)
        part = self.table.select(names).take(pa.array(rows, pa.int64()))
        return {n: part.column(n).to_numpy().copy() for n in names}  # writable, as decoded columns are

    def read_parts(self, groups: Iterable[Any], n: int, columns: Sequence[str] | None = None) -> dict[str, Any]:
        parts, positions = [], []
        for g in groups:
            parts.append(self.read_shard(g.shard, g.local_ids, columns))
            positions.append(g.positions)
        return scatter_columns(parts, positions, n)

    def prefetch(self, shards: Sequence[int]) -> None:
        pass  # nothing to fetch

    def is_loaded(self, shard: int) -> bool:
        return True

    def cached_shard_bytes(self) -> np.ndarray:
        return np.zeros(self.num_shards, dtype=np.int64)

    def close(self) -> None:
        self.closed += 1

    def for_epoch(self, seed: int, epoch: int) -> ArrowSource:
        return self  # an epoch reads the same samples (the Source protocol)

    def reopener(self) -> Callable[[], Source]:
        return functools.partial(_same, self)  # pickled with its table by whoever sends it


def _same(source: ArrowSource) -> ArrowSource:
    return source


def arrow_source(columns: dict[str, np.ndarray], shard_sizes: Sequence[int]) -> ArrowSource:
    return ArrowSource(pa.table(columns), shard_sizes)
