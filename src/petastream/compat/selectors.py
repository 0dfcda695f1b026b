"""``petastorm.selectors``: choose row groups from a dataset's row-group indexes.

``make_reader(rowgroup_selector=...)`` reads only the row groups a selector returns from the
indexes :func:`petastream.compat.etl.rowgroup_indexing.build_rowgroup_index` stored (Petastorm's
or ours). :func:`select_row_groups` is what a reader calls.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import Any

__all__ = ["RowGroupSelectorBase", "SingleIndexSelector", "IntersectIndexSelector", "UnionIndexSelector",
           "select_row_groups"]


class RowGroupSelectorBase(abc.ABC):
    """Selects row groups (their positions) from a dict of row-group indexes."""

    @abc.abstractmethod
    def get_index_names(self) -> list[str]:
        """The indexes the selector needs."""

    @abc.abstractmethod
    def select_row_groups(self, index_dict: dict[str, Any]) -> set[int]:
        """The selected row groups."""


class SingleIndexSelector(RowGroupSelectorBase):
    """The row groups holding any of ``values_list`` in index ``index_name``."""

    def __init__(self, index_name: str, values_list: Iterable[Any]) -> None:
        self._index_name = index_name
        self._values_to_select = values_list

    def get_index_names(self) -> list[str]:
        return [self._index_name]

    def select_row_groups(self, index_dict: dict[str, Any]) -> set[int]:
        indexer = index_dict[self._index_name]
        selected: set[int] = set()
        for value in self._values_to_select:
            selected |= indexer.get_row_group_indexes(value)
        return selected


class IntersectIndexSelector(RowGroupSelectorBase):
    """The row groups every one of ``single_index_selectors`` selects."""

    def __init__(self, single_index_selectors: list[SingleIndexSelector]) -> None:
        self._single_index_selectors = single_index_selectors

    def get_index_names(self) -> list[str]:
        return [s.get_index_names()[0] for s in self._single_index_selectors]

    def select_row_groups(self, index_dict: dict[str, Any]) -> set[int]:
        selected = set(self._single_index_selectors[0].select_row_groups(index_dict))
        for selector in self._single_index_selectors[1:]:
            selected &= selector.select_row_groups(index_dict)
        return selected


class UnionIndexSelector(RowGroupSelectorBase):
    """The row groups any one of ``single_index_selectors`` selects."""

    def __init__(self, single_index_selectors: list[SingleIndexSelector]) -> None:
        self._single_index_selectors = single_index_selectors

    def get_index_names(self) -> list[str]:
        return [s.get_index_names()[0] for s in self._single_index_selectors]

    def select_row_groups(self, index_dict: dict[str, Any]) -> set[int]:
        selected: set[int] = set()
        for selector in self._single_index_selectors:
            selected |= selector.select_row_groups(index_dict)
        return selected


def select_row_groups(rowgroup_selector: Any, index_dict: dict[str, Any], row_group_indexes: Iterable[int]) -> list[int]:
    """The positions in ``row_group_indexes`` (kept in their order) that the selector selects,
    with Petastorm's errors for a non-selector and for indexes the dataset lacks."""
    if not isinstance(rowgroup_selector, RowGroupSelectorBase):
        raise ValueError("rowgroup_selector parameter is expected to be derived from RowGroupSelectorBase")
    required = rowgroup_selector.get_index_names()
    if not set(required).issubset(index_dict):
        raise ValueError(f"Some of required indexes {required} are not available in {list(index_dict)}")
    selected = rowgroup_selector.select_row_groups(index_dict)
    return [i for i in row_group_indexes if i in selected]
