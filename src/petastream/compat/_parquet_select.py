"""``make_batch_reader`` on Parquet: Petastorm's row-group choices applied to a source's plan.

Petastorm decides per row group: a ``rowgroup_selector`` keeps the row groups the dataset's
row-group indexes select; a shard keeps the row groups at positions ``i % shard_count ==
cur_shard``; a ``predicate`` keeps the rows whose predicate fields it accepts. Here all three
are applied once, at open, to the :class:`~petastream.parquet.plan.Plan` (as ``filters`` are),
so that every shard's size is exact before the first batch. The predicate's cost: its fields
(only those) are read for every row group kept, at open, and ``do_include`` is called as
Petastorm's batch reader calls it: once per row group with a pandas DataFrame of those columns
(a mask back), or with the partition values when it reads partition keys only; a predicate
written per row (its verdict not a mask) is called per row, with the raw values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from petastream.compat.predicates import PredicateBase, predicate_mask
from petastream.compat.selectors import select_row_groups
from petastream.errors import InvalidArgumentError
from petastream.parquet.plan import Plan, restrict
from petastream.storage.location import resolve

__all__ = ["narrow_plan"]


def narrow_plan(plan: Plan, *, predicate: Any, rowgroup_selector: Any, cur_shard: int | None,
                shard_count: int | None, dataset_url: str, storage_options: dict | None) -> Plan:
    keep: list[Any] = [True] * len(plan.units)
    if rowgroup_selector is not None:
        keep = _selected(plan, rowgroup_selector, dataset_url, storage_options)
    if shard_count is not None:
        if len(plan.units) < shard_count:
            from petastream.compat.errors import NoDataAvailableError

            raise NoDataAvailableError(
                "Number of row-groups in the dataset must be greater or equal to the number of requested shards. "
                "Otherwise, some of the shards will end up being empty.")
        keep = [k and i % shard_count == cur_shard for i, k in enumerate(keep)]
    if predicate is not None:
        if not isinstance(predicate, PredicateBase):
            raise ValueError("predicate parameter is expected to be derived from PredicateBase")
        keep = [k and _predicate_rows(plan, i, predicate, storage_options) for i, k in enumerate(keep)]
    return restrict(plan, keep) if any(k is not True for k in keep) else plan


def _selected(plan: Plan, selector: Any, dataset_url: str, storage_options: dict | None) -> list[Any]:
    from petastream.compat.etl import dataset_metadata, rowgroup_indexing

    location = resolve(dataset_url, storage_options)
    indexes = rowgroup_indexing.get_row_group_indexes(dataset_url, storage_options)
    pieces = dataset_metadata.load_row_groups(dataset_url, storage_options)
    chosen = {(pieces[i].path, pieces[i].row_group)
              for i in select_row_groups(selector, indexes, range(len(pieces)))}
    root = location.url.rstrip("/") + "/"
    return [(plan.files[u.file].ref.url.removeprefix(root), u.row_group) in chosen for u in plan.units]


def _predicate_rows(plan: Plan, i: int, predicate: PredicateBase, storage_options: dict | None) -> Any:
    """The predicate's verdict on unit ``i``'s kept rows: a mask, or False when it keeps none."""
    import pyarrow.parquet as pq

    unit = plan.units[i]
    ref = plan.files[unit.file].ref
    fields = sorted(predicate.get_fields())
    partitions = dict(zip((name for name, _ in plan.partition_fields), ref.partition))
    known = set(partitions) | {s.name for s in plan.specs} | set(plan.read_columns)
    unknown = [f for f in fields if f not in known]
    if unknown:
        raise InvalidArgumentError(f"predicate fields {unknown} are not columns of {ref.url} (its columns: "
                                   f"{sorted(known)})")
    stored = [f for f in fields if f not in partitions]
    loc = resolve(ref.url, storage_options)
    with (open(loc.path, "rb") if loc.is_local else loc.fs.open(loc.path, "rb")) as f:
        file = pq.ParquetFile(f)  # a footerless unit (row_group WHOLE_FILE, -1) is the whole file
        table = file.read(columns=stored) if unit.row_group < 0 else file.read_row_group(unit.row_group, columns=stored)
    selection = unit.selection()
    rows = unit.rows
    if fields and not stored:  # on partition keys only: once per row group, with their values, as Petastorm
        return bool(predicate.do_include({name: partitions[name] for name in fields}))
    # No field: predicate_mask raises Petastorm's ValueError.
    mask = _vectorized(predicate, table, fields, partitions, selection, rows) if fields else None
    if mask is None:
        columns = {}
        for name in fields:
            if name in partitions:
                columns[name] = np.full(rows, partitions[name], dtype=object)
            else:
                values = table.column(name).to_numpy(zero_copy_only=False)
                columns[name] = values if selection is None else values[selection]
        mask = predicate_mask(predicate, columns, rows)
    return mask if mask.any() else False


def _vectorized(predicate: PredicateBase, table: Any, fields: list[str], partitions: dict[str, Any],
                selection: np.ndarray | None, rows: int) -> np.ndarray | None:
    """Petastorm's batch reader calls ``do_include`` once per row group with a pandas DataFrame
    of the predicate's columns and takes the result as a row mask: so here, when pandas is
    there. A predicate written per row (a scalar verdict, or one that fails on a Series, as
    ``in_set`` does: Petastorm's ``TypeError``) gets None, and is then called per row, as
    compat always did."""
    try:
        import pandas  # noqa: F401  (petastream[spark]; without it predicates are called per row)
    except ImportError:
        return None
    frame = table.to_pandas()
    if selection is not None:
        frame = frame[selection].reset_index(drop=True)
    for name in fields:
        if name in partitions:
            frame[name] = partitions[name]
    try:
        mask = np.asarray(predicate.do_include(frame[fields]), dtype=bool)
    except Exception:  # a per-row predicate: its own error, if any, comes from the per-row call
        return None
    return mask if mask.shape == (rows,) else None
