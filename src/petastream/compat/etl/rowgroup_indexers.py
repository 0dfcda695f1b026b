"""``petastorm.etl.rowgroup_indexers``: the indexers ``build_rowgroup_index`` runs.

Instance attributes keep Petastorm's names (``_index_name``, ``_column_name``, ``_index_data``):
the indexes are pickled into the dataset's metadata, and Petastorm reads ours as we read its.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from petastream.compat.etl import RowGroupIndexerBase

__all__ = ["SingleFieldIndexer", "FieldNotNullIndexer"]


def _check_same(this: Any, other: Any) -> None:
    if not isinstance(other, type(this)):
        raise TypeError("Make sure Spark map function return the same indexer type")
    if this._column_name != other._column_name:
        raise ValueError("Make sure indexers in Spark map function index the same fields")


def _column(rows: list[dict[str, Any]], column: str) -> list[Any]:
    values = [row[column] for row in rows]
    if not values:
        raise ValueError(f"Cannot build index for empty rows, column '{column}'")
    return values


class _OneField(RowGroupIndexerBase):
    """An index of one column under one name (both of Petastorm's indexers)."""

    _index_name: str
    _column_name: str

    @property
    def index_name(self) -> str:
        return self._index_name

    @property
    def column_names(self) -> list[str]:
        return [self._column_name]


class SingleFieldIndexer(_OneField):
    """Value -> row groups, for one field: a scalar (string, integer) or an array, whose every
    element is indexed."""

    def __init__(self, index_name: str, index_field: str) -> None:
        self._index_name = index_name
        self._column_name = index_field
        self._index_data: defaultdict[Any, set[int]] = defaultdict(set)

    def __add__(self, other: Any) -> SingleFieldIndexer:
        _check_same(self, other)
        for value, pieces in other._index_data.items():
            self._index_data[value].update(pieces)
        return self

    @property
    def indexed_values(self) -> list[Any]:
        return list(self._index_data.keys())

    def get_row_group_indexes(self, value_key: Any) -> set[int]:
        # defaultdict: an unknown value selects nothing (and is remembered, as in Petastorm).
        return self._index_data[value_key]

    def build_index(self, decoded_rows: list[dict[str, Any]], piece_index: int) -> Any:
        for value in _column(decoded_rows, self._column_name):
            if value is None:
                continue
            for item in (value if isinstance(value, np.ndarray) else (value,)):
                self._index_data[item].add(piece_index)
        return self._index_data


class FieldNotNullIndexer(_OneField):
    """The row groups where a field is not null in at least one row."""

    def __init__(self, index_name: str, index_field: str) -> None:
        self._index_name = index_name
        self._column_name = index_field
        self._index_data: set[int] = set()

    def __add__(self, other: Any) -> FieldNotNullIndexer:
        _check_same(self, other)
        self._index_data.update(other._index_data)
        return self

    @property
    def indexed_values(self) -> list[Any]:
        return ["Field is Not Null"]

    def get_row_group_indexes(self, value_key: Any = None) -> set[int]:
        return self._index_data

    def build_index(self, decoded_rows: list[dict[str, Any]], piece_index: int) -> Any:
        if any(value is not None for value in _column(decoded_rows, self._column_name)):
            self._index_data.add(piece_index)
        return self._index_data
