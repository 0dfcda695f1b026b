"""``petastorm.predicates``: row filters for ``make_reader(predicate=...)``.

A predicate names the fields it needs (``get_fields``) and decides per row (``do_include`` gets
``{field: decoded value}``). Classes, arguments and results are Petastorm's (the pseudorandom
split hashes ``str(value)`` with MD5, so a split is the same in both). :func:`predicate_mask`
is what a reader calls: the predicate over a decoded batch, as a boolean mask.
"""

from __future__ import annotations

import abc
import collections.abc
import hashlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["PredicateBase", "in_set", "in_intersection", "in_lambda", "in_negate", "in_reduce",
           "in_pseudorandom_split", "predicate_mask"]


class PredicateBase(abc.ABC):
    """A row filter: ``get_fields()`` names the fields ``do_include(values)`` reads."""

    @abc.abstractmethod
    def get_fields(self) -> set[str]:
        """The fields the predicate reads."""

    @abc.abstractmethod
    def do_include(self, values: Mapping[str, Any]) -> Any:
        """Whether the row with these field values is read."""


def _string_to_bucket(string: str, bucket_num: int) -> int:
    return int(hashlib.md5(string.encode("utf-8")).hexdigest(), 16) % bucket_num


class in_set(PredicateBase):  # noqa: N801 - Petastorm's name
    """The field's value is one of ``inclusion_values``."""

    def __init__(self, inclusion_values: Iterable[Any], predicate_field: str) -> None:
        self._inclusion_values = set(inclusion_values)
        self._predicate_field = predicate_field

    def get_fields(self) -> set[str]:
        return {self._predicate_field}

    def do_include(self, values: Mapping[str, Any]) -> bool:
        return values[self._predicate_field] in self._inclusion_values


class in_intersection(PredicateBase):  # noqa: N801
    """The field (an array or list) holds at least one of ``inclusion_values``."""

    def __init__(self, inclusion_values: Iterable[Any], _predicate_field: str) -> None:
        self._inclusion_values = list(inclusion_values)
        self._predicate_field = _predicate_field

    def get_fields(self) -> set[str]:
        return {self._predicate_field}

    def do_include(self, values: Mapping[str, Any]) -> bool:
        value = values[self._predicate_field]
        if not isinstance(value, collections.abc.Iterable):
            raise ValueError("Predicate field should have iterable type")
        return bool(np.isin(np.asarray(value), self._inclusion_values).any())


class in_lambda(PredicateBase):  # noqa: N801
    """``predicate_func(*field values[, state_arg])``: the fields' values in the listed order,
    then ``state_arg`` if it is not None."""

    def __init__(self, predicate_fields: list[str], predicate_func: Callable[..., Any],
                 state_arg: Any = None) -> None:
        if not isinstance(predicate_fields, list):
            raise ValueError("Predicate fields should be a list")
        self._predicate_fields = predicate_fields
        self._predicate_func = predicate_func
        self._state_arg = state_arg

    def get_fields(self) -> set[str]:
        return set(self._predicate_fields)

    def do_include(self, values: Mapping[str, Any]) -> Any:
        args = [values[field] for field in self._predicate_fields]
        if self._state_arg is not None:
            args.append(self._state_arg)
        return self._predicate_func(*args)


class in_negate(PredicateBase):  # noqa: N801
    """Not ``predicate``."""

    def __init__(self, predicate: PredicateBase) -> None:
        if not isinstance(predicate, PredicateBase):
            raise ValueError("Predicate is nor derived from PredicateBase")
        self._predicate = predicate

    def get_fields(self) -> set[str]:
        return self._predicate.get_fields()

    def do_include(self, values: Mapping[str, Any]) -> bool:
        return not self._predicate.do_include(values)


class in_reduce(PredicateBase):  # noqa: N801
    """``reduce_func([p.do_include(values) for p in predicate_list])``: ``all`` is and, ``any`` or."""

    def __init__(self, predicate_list: list[PredicateBase], reduce_func: Callable[[list[Any]], Any]) -> None:
        if not all(isinstance(p, PredicateBase) for p in predicate_list):
            raise ValueError("Predicate is nor derived from PredicateBase")
        self._predicate_list = predicate_list
        self._reduce_func = reduce_func

    def get_fields(self) -> set[str]:
        fields: set[str] = set()
        for p in self._predicate_list:
            fields |= p.get_fields()
        return fields

    def do_include(self, values: Mapping[str, Any]) -> Any:
        return self._reduce_func([p.do_include(values) for p in self._predicate_list])


class in_pseudorandom_split(PredicateBase):  # noqa: N801
    """Subset ``subset_index`` of a split in the proportions ``fraction_list``: a row belongs to
    the subset its field's MD5 hash (of ``str(value)``) falls in; the same in every run."""

    def __init__(self, fraction_list: list[float], subset_index: int, predicate_field: str) -> None:
        if subset_index >= len(fraction_list):
            raise ValueError("subset_index is out of range")
        self._predicate_field = predicate_field
        borders = [sum(fraction_list[: i + 1]) for i in range(len(fraction_list))]
        low = borders[subset_index - 1] if subset_index else 0
        self._bucket_low = low * (sys.maxsize - 1)
        self._bucket_high = borders[subset_index] * (sys.maxsize - 1)

    def get_fields(self) -> set[str]:
        return {self._predicate_field}

    def do_include(self, values: Mapping[str, Any]) -> bool:
        if self._predicate_field not in values:
            raise ValueError(f"Tested values does not have split key: {self._predicate_field}")
        bucket = _string_to_bucket(str(values[self._predicate_field]), sys.maxsize)
        return self._bucket_low <= bucket < self._bucket_high


def predicate_mask(predicate: PredicateBase, columns: Mapping[str, np.ndarray], num_rows: int) -> np.ndarray:
    """``do_include`` of each row of a decoded batch (``columns``: field -> column, as
    :func:`petastream.compat._decode.decode_table` gives them), as a boolean array.

    Raises Petastorm's ValueError when the predicate reads no field or a field not in ``columns``.
    """
    if not isinstance(predicate, PredicateBase):
        raise ValueError("predicate parameter is expected to be derived from PredicateBase")
    fields = sorted(predicate.get_fields())
    if not fields:
        raise ValueError("At least one field name must be returned by predicate's get_field() method")
    unknown = [f for f in fields if f not in columns]
    if unknown:
        raise ValueError(f"At least some column names requested by the predicate ({', '.join(unknown)}) "
                         f"are not valid schema names: ({', '.join(columns)})")
    mask = np.empty(num_rows, dtype=bool)
    for i, row in enumerate(zip(*(columns[f] for f in fields))):
        mask[i] = bool(predicate.do_include(dict(zip(fields, row))))
    return mask
