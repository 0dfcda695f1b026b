"""``make_reader(filters=...)`` as Petastorm 0.13.1 applies them.

Petastorm hands ``filters`` to the legacy ``pyarrow.parquet.ParquetDataset`` (pyarrow < 15),
which keeps the files whose Hive partition keys pass them (disjunctive normal form: a list of
conjunctions of ``(column, op, value)``; one conjunction may be given bare) and reads every
row of the files it keeps. A partition key is compared as the filter value's type (the key
``'5'`` is ``5`` for an int value), after being read as an int when every key of its level is
made of digits, as pyarrow's legacy partition dictionary does.

A term on a column that is not a partition key kept every row in Petastorm, silently; here it
is an error naming the column and what to use instead (``predicate``).
"""

from __future__ import annotations

import operator
from collections.abc import Collection
from typing import Any

from petastream.compat.etl.metadata_files import RowGroupPiece
from petastream.errors import InvalidArgumentError

__all__ = ["filter_pieces"]

_COMPARE = {"=": operator.eq, "==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt,
            "<=": operator.le, ">=": operator.ge}


def _normalize(filters: Any) -> list[list[tuple[Any, str, Any]]]:
    """pyarrow's ``_check_filters``: DNF, one level of nesting added to a bare conjunction."""
    if len(filters) == 0 or any(len(f) == 0 for f in filters):
        raise ValueError("Malformed filters")
    if isinstance(filters[0][0], str):
        filters = [filters]
    return [[tuple(term) for term in conjunction] for conjunction in filters]


def _check(term: tuple[Any, str, Any], partition_names: set[str]) -> None:
    column, op, value = term
    if column not in partition_names:
        keys = ", ".join(sorted(partition_names)) or "none"
        raise InvalidArgumentError(
            f"make_reader(filters=...): {column!r} is not a partition key of the dataset (its keys: {keys}); "
            "Petastorm 0.13.1 applies filters to partition directories only, so a term on another column kept "
            f"every row there: drop the term, or keep the rows you want with predicate=in_lambda([{column!r}], ...) "
            "(petastream.compat.predicates)")
    if op in ("in", "not in"):
        if not isinstance(value, Collection):
            raise TypeError(f"'{type(value).__name__}' object is not a collection")
        if not value:
            raise ValueError("Cannot use empty collection as filter value")
        if len({type(item) for item in value}) != 1:
            raise ValueError(f"All elements of the collection '{value}' must be of same type")
    elif op not in _COMPARE:
        raise ValueError(f"'{op}' is not a valid operator in predicates.")
    elif not isinstance(value, str) and isinstance(value, Collection):
        raise ValueError(f"Op '{op}' not supported with a collection value")


def _typed_keys(pieces: list[RowGroupPiece]) -> dict[str, bool]:
    """Per partition name: whether pyarrow's legacy dictionary reads its keys as ints."""
    keys: dict[str, set[str]] = {}
    for piece in pieces:
        for name, value in piece.partition_keys:
            keys.setdefault(name, set()).add(value)
    return {name: all(v.isdigit() for v in values) for name, values in keys.items()}


def _accepts(term: tuple[Any, str, Any], key: Any) -> bool:
    _, op, value = term
    if op in ("in", "not in"):
        typed = type(next(iter(value)))(key)
        return (typed in value) == (op == "in")
    return bool(_COMPARE[op](type(value)(key), value))


def filter_pieces(pieces: list[RowGroupPiece], filters: Any) -> list[RowGroupPiece]:
    """The row groups of the files whose partition keys pass ``filters``."""
    dnf = _normalize(filters)
    as_int = _typed_keys(pieces)
    for conjunction in dnf:
        for term in conjunction:
            _check(term, set(as_int))

    def key(name: str, raw: str) -> Any:
        return int(raw) if as_int[name] else raw

    def kept(piece: RowGroupPiece) -> bool:
        values = {name: key(name, raw) for name, raw in piece.partition_keys}
        return any(all(_accepts(term, values[term[0]]) for term in conjunction if term[0] in values)
                   for conjunction in dnf)

    return [p for p in pieces if kept(p)]
