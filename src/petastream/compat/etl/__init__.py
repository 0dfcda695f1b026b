"""``petastorm.etl``: writing Petastorm datasets and their metadata.

Submodules as in Petastorm: :mod:`~petastream.compat.etl.dataset_metadata` (``materialize_dataset``,
``get_schema``...), :mod:`~petastream.compat.etl.rowgroup_indexers` and
:mod:`~petastream.compat.etl.rowgroup_indexing` (row-group indexes for ``rowgroup_selector``).
This module holds the indexers' base class, as Petastorm's does.
"""

from __future__ import annotations

import abc
from typing import Any

__all__ = ["RowGroupIndexerBase"]


class RowGroupIndexerBase(abc.ABC):
    """An index from values of some columns to the row groups (pieces) holding them."""

    @abc.abstractmethod
    def __add__(self, other: Any) -> Any:
        """Merge another indexer's data into this one (Spark's reduce)."""

    @property
    @abc.abstractmethod
    def index_name(self) -> str:
        """The index's unique name."""

    @property
    @abc.abstractmethod
    def column_names(self) -> list[str]:
        """The columns read to build the index."""

    @property
    @abc.abstractmethod
    def indexed_values(self) -> list[Any]:
        """The values in the index."""

    @abc.abstractmethod
    def get_row_group_indexes(self, value_key: Any) -> set[int]:
        """The row groups holding ``value_key``."""

    @abc.abstractmethod
    def build_index(self, decoded_rows: list[dict[str, Any]], piece_index: int) -> Any:
        """Add the values of ``decoded_rows`` (one row group, decoded) under ``piece_index``."""
