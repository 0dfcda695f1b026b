"""Column layout of an MDS dataset: names (sorted), encodings, fixed sizes, shard config.

Shared by writer and reader. ``config_json`` is the exact text Mosaic embeds in every shard
(``json.dumps(cfg, sort_keys=True)``): its length is part of the shard-size rule.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from petastream.errors import FormatError, InternalError, UnknownEncodingError
from petastream.mds.encodings import Encoding, get_encoding

__all__ = ["ColumnLayout", "parse_size_limit"]

_UNITS = ["b", "kb", "mb", "gb", "tb", "pb", "eb", "zb", "yb"]


def parse_size_limit(value: int | str | None) -> int | None:
    """Mosaic's ``bytes_to_int``: an int, or ``"100kb"``/``"1.5mb"`` (binary units); falsy = None."""
    if value is None or value == 0 or value == "":
        return None
    if isinstance(value, bool):
        raise FormatError(f"size_limit must be an int or a string like '64mb', got {value!r}")
    if isinstance(value, (int, np.integer)):
        limit = int(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        for power in range(len(_UNITS) - 1, -1, -1):
            unit = _UNITS[power]
            if text.endswith(unit) and (power > 0 or not text[:-1].endswith(tuple("kmgtpezy"))):
                number = text[: -len(unit)]
                break
        else:
            number, power = text, 0
        try:
            limit = int(float(number) * 1024**power)
        except ValueError as e:
            raise FormatError(f"size_limit {value!r} is not a size; use e.g. 67108864 or '64mb'") from e
    else:
        raise FormatError(f"size_limit must be an int or a string like '64mb', got {value!r}")
    # Mosaic's sentences (its tests match on them), then the fix
    if limit < 0:
        raise FormatError(f"`size_limit` must be greater than zero, instead, found as {limit}. Pass "
                          "bytes (67108864) or a size ('64mb'), or None for one shard")
    if limit >= 1 << 32:
        raise FormatError(f"`size_limit` must be less than 2**32, instead, found as {limit}. This is "
                          "because sample byte offsets are stored with uint32; use e.g. '64mb'")
    return limit or None


@dataclass(frozen=True)
class ColumnLayout:
    names: tuple[str, ...]  # sorted
    encoding_names: tuple[str, ...]
    encodings: tuple[Encoding, ...] = field(repr=False, compare=False)

    @classmethod
    def from_columns(cls, columns: Mapping[str, str], *, allow_unsafe: bool = True) -> ColumnLayout:
        if not columns:
            raise FormatError("columns must name at least one column, e.g. {'id': 'int64'}")
        for name in columns:
            if not isinstance(name, str):
                raise FormatError(f"column names must be strings, got {name!r}")
        names = tuple(sorted(columns))
        enc_names = tuple(columns[n] for n in names)
        encs = []
        for name, enc in zip(names, enc_names):
            try:
                encs.append(get_encoding(enc, allow_unsafe=allow_unsafe))
            except UnknownEncodingError as e:  # Mosaic's TypeError and sentence, then ours
                raise UnknownEncodingError(
                    f"MDSWriter passed column `{name}` with encoding `{enc}` is unsupported. {e}") from e
        return cls(names, enc_names, tuple(encs))

    @classmethod
    def from_shard(cls, shard: Mapping[str, Any], *, allow_unsafe: bool = False) -> ColumnLayout:
        names, enc_names = shard["column_names"], shard["column_encodings"]
        if len(names) != len(enc_names):
            raise FormatError("index.json: column_names and column_encodings differ in length")
        layout = cls(tuple(names), tuple(enc_names),
                     tuple(get_encoding(e, allow_unsafe=allow_unsafe) for e in enc_names))
        sizes = shard.get("column_sizes")
        if sizes is not None and list(sizes) != list(layout.sizes):
            raise FormatError(
                f"index.json: column_sizes {list(sizes)} do not match the encodings {list(enc_names)}"
            )
        return layout

    @property
    def columns(self) -> dict[str, str]:
        return dict(zip(self.names, self.encoding_names))

    @property
    def sizes(self) -> tuple[int | None, ...]:
        return tuple(e.size for e in self.encodings)

    @property
    def all_fixed(self) -> bool:
        return all(s is not None for s in self.sizes)

    @property
    def var_positions(self) -> tuple[int, ...]:
        """Indices (in column order) of the variable-size columns, which carry a uint32 length."""
        return tuple(i for i, s in enumerate(self.sizes) if s is None)

    def fixed_dtype(self) -> np.dtype:
        """A packed structured dtype for one sample of an all-fixed-size layout."""
        fixed = [(e.dtype, e.size) for e in self.encodings if e.dtype is not None and e.size is not None]
        if len(fixed) != len(self.encodings):
            raise InternalError(f"fixed_dtype() of a layout with variable-size columns {self.columns}; "
                                "check all_fixed first")
        sizes = [size for _, size in fixed]
        return np.dtype({
            "names": list(self.names),
            "formats": [dtype for dtype, _ in fixed],
            "offsets": [int(o) for o in np.cumsum([0, *sizes[:-1]])],
            "itemsize": sum(sizes),
        })

    def config(self, compression: str | None, hashes: list[str], size_limit: int | None) -> dict:
        return {
            "column_encodings": list(self.encoding_names),
            "column_names": list(self.names),
            "column_sizes": list(self.sizes),
            "compression": compression,
            "format": "mds",
            "hashes": list(hashes),
            "size_limit": size_limit,
            "version": 2,
        }

    def config_json(self, compression: str | None, hashes: list[str], size_limit: int | None) -> bytes:
        return json.dumps(self.config(compression, hashes, size_limit), sort_keys=True).encode("utf-8")
