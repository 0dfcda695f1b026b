"""``filters``: which row groups, and which of their rows, a source reads.

Filters are pyarrow's: a DNF list (``[("year", ">=", 2020), ("label", "in", [1, 2])]``, or a
list of such lists OR-ed together; see :func:`pyarrow.parquet.filters_to_expression`) or a
:class:`pyarrow.compute.Expression`, over the files' columns and the Hive partition columns.

They are applied by pyarrow's own dataset machinery, file by file at open time:

1. row groups are pruned by their column statistics and the file's partition values
   (:meth:`pyarrow.dataset.ParquetFileFragment.split_by_row_group`): a row group that cannot
   match is never read;
2. the surviving row groups' filter columns (only those) are read and the filter evaluated on
   them, row by row, so every shard's size is exact before the first batch: the planner needs
   exact sizes to give every rank the same number of batches, each row exactly once.

Step 2 costs a read of the filter columns of the surviving row groups (over the network for
remote files: ranged reads of those column chunks only) each time a source is opened, but
not when it is reopened in a worker process or unpickled (the selection travels with it).
A row group's selection is kept as a bitmap (one bit per row).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from petastream.errors import InvalidArgumentError

__all__ = ["to_expression", "partition_expression", "select"]


def to_expression(filters: Any) -> Any:
    """``filters`` as a :class:`pyarrow.compute.Expression` (None: no filter)."""
    if filters is None:
        return None
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    if isinstance(filters, pc.Expression):
        return filters
    if isinstance(filters, Sequence) and not isinstance(filters, (str, bytes)):
        if not filters:
            return None
        try:
            return pq.filters_to_expression(list(filters))
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(
                f"filters={filters!r} is not a pyarrow DNF filter ({e}); write [(column, op, value), "
                "...] (AND), a list of such lists (OR), or a pyarrow.compute Expression") from e
    raise InvalidArgumentError(
        f"filters must be a DNF list [(column, op, value), ...] or a pyarrow.compute Expression, got {filters!r}")


def partition_expression(fields: Sequence[tuple[str, Any]], values: Sequence[Any]) -> Any:
    """What a file's Hive partition values guarantee, as an Expression (None: no partitions)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    expr = None
    for (name, t), v in zip(fields, values):
        term = ds.field(name).is_null() if v is None else ds.field(name) == pa.scalar(v, t)
        expr = term if expr is None else expr & term
    return expr


def select(source: Any, metadata: Any, schema: Any, expr: Any, partition: Any, label: str,
           ) -> list[tuple[int, np.ndarray | None]]:
    """The row groups of one file that ``expr`` keeps, each with its selection (a boolean
    mask over its rows; None: every row), row groups with no row left omitted.

    ``source``: the file for pyarrow (a local path, or a ``PythonFile`` over a
    :class:`~petastream.parquet.footer.RangeFile`); ``schema``: the file's columns and the
    partition fields; ``partition``: :func:`partition_expression` of the file."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    fs = None
    if isinstance(source, str):
        import pyarrow.fs as pafs

        fs = pafs.LocalFileSystem()
    frag = ds.ParquetFileFormat().make_fragment(source, filesystem=fs, partition_expression=partition)
    try:
        kept = frag.split_by_row_group(expr, schema=schema)
        out: list[tuple[int, np.ndarray | None]] = []
        for part in kept:
            rg = part.row_groups[0].id
            if metadata.row_group(rg).num_rows == 0:
                continue
            mask = part.to_table(columns={"m": expr}, schema=schema).column("m")
            keep = mask.to_numpy(zero_copy_only=False) if not mask.null_count else (
                mask.fill_null(False).to_numpy(zero_copy_only=False))
            keep = np.asarray(keep, dtype=bool)
            if keep.all():
                out.append((rg, None))
            elif keep.any():
                out.append((rg, keep))
        return out
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise InvalidArgumentError(
            f"filters {expr} cannot be applied to {label} ({e}); its columns are "
            f"{schema.names}") from e
