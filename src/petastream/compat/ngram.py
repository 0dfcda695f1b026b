"""``petastorm.ngram.NGram``: ``make_reader(schema_fields=NGram(...))`` yields windows of
consecutive rows instead of rows.

An n-gram is ``length`` consecutive rows of one row group (windows never cross row groups,
nor, with ``shuffle_row_drop_partitions``, the end of a partition plus ``length - 1`` rows of
the next), sorted by ``timestamp_field``, each step at most ``delta_threshold`` after the one
before; with ``timestamp_overlap=False`` a window starts after the previous one ended. An
element is ``{offset: namedtuple of the fields at that offset}`` for the offsets of ``fields``
(``{-1: [...], 0: [...]}``; an offset between them with no fields gives an empty namedtuple).
Rows out of timestamp order in a window are Petastorm's ``NotImplementedError``.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from petastream.compat.unischema import match_unischema_fields
from petastream.errors import InvalidArgumentError

__all__ = ["NGram"]


def _is_field(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(value, "name")


class NGram:
    def __init__(self, fields: Mapping[int, Sequence[Any]], delta_threshold: Any, timestamp_field: Any,
                 timestamp_overlap: bool = True):
        if fields is None or not isinstance(fields, dict):
            raise ValueError("Fields must be set and must be a dictionary.")
        for values in fields.values():
            if not isinstance(values, list):
                raise ValueError("Each field value must be a list of unischema fields/regular expression(s)")
            if not all(_is_field(f) or isinstance(f, str) for f in values):
                raise ValueError("All field values must be of type UnischemaField/regular expression")
        if delta_threshold is None or not isinstance(delta_threshold, numbers.Number):
            raise ValueError("delta_threshold must be a number.")
        if timestamp_field is None or not (_is_field(timestamp_field) or isinstance(timestamp_field, str)):
            raise ValueError("timestamp_field must be set and must be of type UnischemaField or regular expression")
        if not isinstance(timestamp_overlap, bool):
            raise ValueError("timestamp_overlap must be set and must be of type bool")
        self._fields = dict(fields)
        self._delta_threshold = delta_threshold
        self._timestamp_field = timestamp_field
        self.timestamp_overlap = timestamp_overlap

    @property
    def length(self) -> int:
        return max(self._fields) - min(self._fields) + 1

    @property
    def fields(self) -> dict[int, list[Any]]:
        return self._fields

    @property
    def delta_threshold(self) -> Any:
        return self._delta_threshold

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, NGram) and self._fields == other._fields
                and self._delta_threshold == other._delta_threshold
                and self._timestamp_field == other._timestamp_field
                and self.timestamp_overlap == other.timestamp_overlap)

    def __hash__(self) -> int:
        return hash((self.length, self._delta_threshold, self.timestamp_overlap))

    # -- resolving names against a schema --------------------------------------------------------
    def convert_fields(self, schema: Any, field_list: Sequence[Any]) -> list[Any]:
        patterns = [f for f in field_list if isinstance(f, str)]
        objects = [f for f in field_list if isinstance(f, tuple)]
        if len(patterns) + len(objects) != len(field_list):
            raise ValueError('"Elements of fields"/"timestamp field" must be either a string (regular expressions) or'
                             " an instance of UnischemaField class.")
        return objects + match_unischema_fields(schema, patterns)

    def resolve_regex_field_names(self, schema: Any) -> None:
        self._fields = {k: self.convert_fields(schema, v) for k, v in self._fields.items()}
        timestamp = self.convert_fields(schema, [self._timestamp_field])
        if len(timestamp) != 1:
            raise InvalidArgumentError("timestamp_field was matched to more than one unischema field" if timestamp
                                       else f"timestamp_field {self._timestamp_field!r} matches no field of the schema")
        self._timestamp_field = timestamp[0]

    def get_field_names_at_timestep(self, timestep: int) -> list[str]:
        return [f.name for f in self._fields.get(timestep, [])]

    def get_field_names_at_all_timesteps(self) -> list[Any]:
        seen: dict[str, Any] = {}
        for fields in self._fields.values():
            for f in fields:
                seen.setdefault(f.name, f)
        return list(seen.values())

    def get_schema_at_timestep(self, schema: Any, timestep: int) -> Any:
        names = set(self.get_field_names_at_timestep(timestep))
        return schema.create_schema_view([f for n, f in schema.fields.items() if n in names])

    # -- forming windows -------------------------------------------------------------------------
    def form_ngram(self, data: Sequence[Mapping[str, Any]], schema: Any) -> list[dict[int, dict[str, Any]]]:
        """The windows of ``data`` (row dicts of one row group, in order), as dicts of dicts."""
        ts = self._timestamp_field.name
        base, length = min(self._fields), self.length
        names = {k: set(self.get_field_names_at_timestep(k)) for k in range(base, base + length)}
        out = []
        last_end = None
        for start in range(len(data) - length + 1):
            window = data[start:start + length]
            stamps = [row[ts] for row in window]
            if any(a > b for a, b in zip(stamps, stamps[1:])):
                raise NotImplementedError(f"NGram assumes that the data is sorted by {ts} field which is not the case")
            if not self.timestamp_overlap and last_end is not None and stamps[0] <= last_end:
                continue
            if any(b - a > self._delta_threshold for a, b in zip(stamps, stamps[1:])):
                continue
            out.append({base + i: {k: v for k, v in row.items() if k in names[base + i]}
                        for i, row in enumerate(window)})
            if not self.timestamp_overlap:
                last_end = stamps[-1]
        return out

    def make_namedtuple(self, schema: Any, ngram_as_dicts: Mapping[int, Mapping[str, Any]]) -> dict[int, Any]:
        return {k: self.get_schema_at_timestep(schema, k).make_namedtuple(**v) for k, v in ngram_as_dicts.items()}
