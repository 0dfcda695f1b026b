"""Which row groups ``make_reader`` reads, decided once at open, as Petastorm decides them.

0. ``filters`` (pyarrow's DNF) keep the files whose Hive partition keys pass them, as the legacy
   ``pyarrow.parquet.ParquetDataset`` Petastorm opens does (:func:`filter_pieces`);
1. every row group left, in Petastorm's order (:func:`~.etl.dataset_metadata.load_row_groups`:
   the positions its row-group indexes and its shards use);
2. a predicate whose fields are exactly the (single) Hive partition key is resolved here,
   per row group, on the partition value (typed as the schema says); any other predicate is
   evaluated per row by the loading workers;
3. a ``rowgroup_selector`` keeps the positions the dataset's row-group indexes select;
4. a shard keeps the positions ``i`` with ``i % shard_count == cur_shard`` (by position, so the
   shards of any seed are the same sets; a seed only reorders), and there must be at least
   ``shard_count`` row groups.
"""

from __future__ import annotations

import random
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from petastream.compat._row_filters import filter_pieces
from petastream.compat.errors import NoDataAvailableError
from petastream.compat.etl import rowgroup_indexing
from petastream.compat.etl.metadata_files import RowGroupPiece, relative_path
from petastream.compat.predicates import PredicateBase
from petastream.compat.selectors import select_row_groups

if TYPE_CHECKING:
    from petastream.compat._row_source import RowSource
    from petastream.parquet import ParquetSource

__all__ = ["RowPlan", "plan_row_groups", "NoDataAvailableError", "filter_pieces"]


@dataclass
class RowPlan:
    location: Any
    pieces: list[RowGroupPiece]
    #: Positions (into ``pieces``) read, in Petastorm's order.
    selected: list[int]
    #: The predicate the workers evaluate per row (None: none, or resolved on partitions).
    worker_predicate: PredicateBase | None


def plan_row_groups(location: Any, pieces: list[RowGroupPiece], schema: Any, predicate: Any,
                    rowgroup_selector: Any, cur_shard: int | None, shard_count: int | None, seed: int | None,
                    filters: Any = None) -> RowPlan:
    if filters is not None:
        pieces = filter_pieces(pieces, filters)
    selected = list(range(len(pieces)))
    worker_predicate = None
    if predicate is not None:
        if not isinstance(predicate, PredicateBase):
            raise ValueError("predicate parameter is expected to be derived from PredicateBase")
        partition_names = {name for p in pieces[:1] for name, _ in p.partition_keys}
        if partition_names and set(predicate.get_fields()) == partition_names and len(partition_names) == 1:
            selected = [i for i in selected if _include_partition(predicate, schema, pieces[i])]
        else:
            worker_predicate = predicate
    if rowgroup_selector is not None:
        indexes = rowgroup_indexing.get_row_group_indexes(location)
        selected = select_row_groups(rowgroup_selector, indexes, selected)
    if cur_shard is not None or shard_count is not None:
        if not shard_count or not isinstance(cur_shard, int) or not isinstance(shard_count, int):
            raise ValueError("partition and num_partitions must be ints and both specified to use partitioning")
        if len(pieces) < shard_count:
            raise NoDataAvailableError(
                "Number of row-groups in the dataset must be greater or equal to the number of requested shards. "
                "Otherwise, some of the shards will end up being empty.")
        if seed is not None:
            random.Random(seed).shuffle(selected)
        selected = [i for i in selected if i % shard_count == cur_shard]
    if not selected:
        warnings.warn("No matching data is available for loading after rowgroup selector were applied and the data "
                      "was sharded.", UserWarning, stacklevel=3)
    return RowPlan(location, pieces, selected, worker_predicate)


def _include_partition(predicate: PredicateBase, schema: Any, piece: RowGroupPiece) -> bool:
    name, value = piece.partition_keys[0]
    field = schema.fields.get(name)
    typed = field.numpy_dtype(value) if field is not None else value
    return bool(predicate.do_include({name: typed}))


def row_source(opened: RowSource, plan: RowPlan, options: dict[str, Any]) -> ParquetSource:
    """The :class:`~petastream.parquet.ParquetSource` of ``plan``'s row groups: ``opened``'s
    source, restricted to them (its footers are not read again). Its shards are the selected
    row groups in Petastorm's order (a file named twice is read twice, as Petastorm reads it),
    so the loader's shards are exactly Petastorm's selection. ``options``: the source's
    (storage, shard cache, ``cache_limit``...)."""
    import dataclasses

    from petastream.parquet import ParquetSource
    from petastream.parquet.plan import restrict

    source = opened.source
    units = {(relative_path(opened.location, source.plan.files[u.file].ref), u.row_group): u
             for u in source.plan.units}
    found = (units.get((plan.pieces[i].path, plan.pieces[i].row_group)) for i in sorted(plan.selected))
    chosen = [u for u in found if u is not None]  # (a row group of no rows is no unit)
    if chosen == source.plan.units:
        return source
    source.close()
    ordered = restrict(dataclasses.replace(source.plan, units=chosen), [True] * len(chosen))
    return ParquetSource(source.plan.root_urls, plan=ordered, null_policy="rows", **options)
