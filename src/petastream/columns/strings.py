"""How a loader hands out ``str``/``bytes`` columns: ``"objects"`` or ``"jagged"``.

``"objects"`` (the default) is a Python ``str``/``bytes`` per value, as ever. ``"jagged"`` is the
column's bytes back to back (``values``, uint8) and ``offsets`` (int64, one more than the rows;
row ``i`` is ``values[offsets[i]:offsets[i+1]]``): Arrow's binary layout, and what PyTorch calls
the jagged layout (``torch.nested.nested_tensor_from_jagged(values, offsets)``). It costs no
Python object per value, which is most of what a batch of short strings costs to read.

This module is framework-free: which columns a loader makes jagged (:func:`jagged_columns`,
checked once when the loader is built) and a column's values as :class:`Ragged` bytes
(:func:`as_ragged_bytes`, in the decode workers). The torch and TensorFlow values built from
them are :class:`petastream.torch.JaggedBytes` and ``tf.RaggedTensor`` (uint8).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from petastream.columns.ragged import Ragged
from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = ["STRING_FORMS", "as_ragged_bytes", "jagged_columns"]

STRING_FORMS = ("objects", "jagged")
#: MDS encodings (Parquet sources name theirs alike) of the columns that may come jagged.
_KINDS = {"str": "str", "bytes": "bytes"}
#: Parquet null policies under which a str/bytes column keeps its nulls (as None or 'None'):
#: the jagged form has no validity mask, and a null would silently read as an empty value.
_NULLS_KEPT = {"rows": ("str", "bytes"), "petastorm": ("bytes",)}


def jagged_columns(strings: str | Mapping[str, str], encodings: Mapping[str, str], names: list[str],
                   null_policy: str | None = None) -> dict[str, str]:
    """``{column: "str" | "bytes"}`` of the columns ``strings`` makes jagged, among ``names``
    (the columns read), from their ``encodings`` (``source.columns``).

    ``strings``: ``"objects"`` / ``"jagged"`` for every str/bytes column, or ``{column: form}``
    (the columns not named stay objects). Raises naming the column and the fix for a form that
    is not one, a named column that is not read or not str/bytes, and a source whose
    ``null_policy`` keeps nulls (the jagged form cannot tell a null from an empty value)."""
    if isinstance(strings, str):
        _check_form("strings", strings)
        chosen = {n: strings for n in names if encodings.get(n) in _KINDS}
    elif isinstance(strings, Mapping):
        chosen = {}
        for name, form in strings.items():
            _check_form(f"strings[{name!r}]", form)
            if name not in names:
                raise InvalidArgumentError(
                    f"strings names column {name!r}, which is not read (columns read: {names}); "
                    "drop it from strings= or add it to columns=")
            if encodings.get(name) not in _KINDS:
                raise InvalidArgumentError(
                    f"strings[{name!r}]={form!r}: column {name!r} is {encodings.get(name)!r}, not str or "
                    "bytes; only str/bytes columns have a jagged form (drop it from strings=)")
            chosen[name] = form
    else:
        raise InvalidArgumentTypeError(
            f"strings must be 'objects', 'jagged' or a dict {{column: form}}, got {strings!r}")
    jagged = {n: _KINDS[encodings[n]] for n, form in chosen.items() if form == "jagged"}
    kept = _NULLS_KEPT.get(null_policy or "", ())
    nullable = sorted(n for n, kind in jagged.items() if kind in kept)
    if nullable:
        raise InvalidArgumentError(
            f"columns {nullable}: null_policy={null_policy!r} keeps their nulls, and strings='jagged' "
            "has no way to mark one (it would read as an empty value); open the source with "
            "null_policy='fill' (nulls as empty values) or 'error', or read these columns as "
            "strings='objects'")
    return jagged


def _check_form(what: str, form: Any) -> None:
    if form not in STRING_FORMS:
        raise InvalidArgumentError(f"{what}={form!r}: use one of {STRING_FORMS}")


def as_ragged_bytes(name: str, col: Any, kind: str) -> Ragged:
    """A decoded str/bytes column (``Ragged`` uint8 as sources read it with
    ``strings="ragged"``, or an array/list of ``str``/``bytes``, as after a ``transform``) as
    ``Ragged`` uint8 with offsets from 0. Objects go through Arrow (no per-value Python here);
    a None, or a value of another type, raises naming the column."""
    if isinstance(col, Ragged):
        offsets = col.offsets.astype(np.int64, copy=False)
        if len(offsets) and offsets[0] != 0:
            return Ragged(col.values[offsets[0]:offsets[-1]], offsets - offsets[0])
        return col
    import pyarrow as pa

    from petastream.columns.text import binary_as_ragged

    items = col.tolist() if isinstance(col, np.ndarray) else list(col)
    try:
        arr = pa.array(items, type=pa.large_string() if kind == "str" else pa.large_binary())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise InvalidArgumentTypeError(
            f"column {name!r}: strings='jagged' takes {kind} values, got {type(items[0]).__name__ if items else '?'} "
            f"({e}); return {kind} values from transform or read the column as strings='objects'") from None
    if arr.null_count:
        raise InvalidArgumentError(
            f"column {name!r}: {arr.null_count} None value(s), which strings='jagged' cannot mark; "
            "replace them in transform (e.g. with '') or read the column as strings='objects'")
    return binary_as_ragged(arr)

