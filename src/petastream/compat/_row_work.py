"""``make_reader``'s work stage: a batch of a Unischema dataset's stored columns, as its
:class:`~petastream.parquet.ParquetSource` reads them, made into ``make_reader``'s decoded
columns. It is the loader's ``transform``, so it runs in whichever executor the reader uses
(decode threads, petastream's worker processes, or inline) and a sample that fails in it is
handled by the loader's ``on_error`` policy (:mod:`petastream.pipeline.onerror`).

As Petastorm's worker: a ``predicate``'s fields are decoded first and the other fields only for
the rows it keeps; then the ``TransformSpec`` runs on each row dict (``func(row) -> row``) and
its ``removed_fields`` are dropped. Each column is given back its stored Arrow type (the source
reads nulls as None, NaN or NaT: ``null_policy="rows"``) and decoded by
:func:`~petastream.compat._decode.decode_column`, as a row group read with pyarrow would be.
With an n-gram, :data:`KEPT` holds the batch positions of the rows given back, so that the
reader can tell which row group each row came from (windows never span two row groups).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from petastream.columns.ragged import Ragged
from petastream.compat._decode import decode_column, decode_values
from petastream.compat.codecs import NdarrayCodec, ScalarCodec
from petastream.compat.predicates import predicate_mask
from petastream.pipeline.isolate import batch_rows, take_rows

__all__ = ["KEPT", "RowWork", "as_arrow", "as_parts"]

#: The column of batch positions kept (n-grams only; not a field name: it holds a NUL).
KEPT = "\0kept"


def as_arrow(column: Any, arrow_type: pa.DataType) -> pa.Array:
    """A column as the source reads it (numpy, objects or :class:`Ragged`), as ``arrow_type``:
    None, NaN and NaT are nulls again (a float field's nulls decode back to NaN)."""
    if isinstance(column, Ragged):
        arr: pa.Array = pa.LargeListArray.from_arrays(pa.array(np.asarray(column.offsets, np.int64)),
                                                      pa.array(column.values))
    else:
        a = np.asarray(column)
        if a.ndim > 1:
            arr = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(a).reshape(-1)),
                                                    int(np.prod(a.shape[1:])))
        else:
            if a.dtype.kind in "iu" and (pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type)):
                a = a.view("datetime64[ns]")  # the int64 nanoseconds dates and timestamps are read as
            arr = pa.array(a, from_pandas=True)
    if arr.type != arrow_type:
        arr = arr.cast(arrow_type) if len(arr) else pa.array([], arrow_type)
    return arr


def as_parts(keys: tuple[str, ...], batch: dict[str, Any]) -> tuple[Any, ...]:
    """The loader's ``convert``: the columns ``keys`` as a tuple of arrays, what petastream's
    worker processes hand over in shared memory (a dict would travel pickled)."""
    return tuple(batch[k] for k in keys)


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):  # one by one: numpy would broadcast equal-shape arrays
        out[i] = v
    return out


@dataclass(frozen=True)
class RowWork:
    """``batch -> batch`` (picklable): the stored columns of ``read_schema``'s fields in, the
    columns of ``out_fields`` out (see the module doc)."""

    read_schema: Any
    out_fields: tuple[str, ...]
    #: Each field's stored Arrow type (a partition key's: string).
    arrow_types: dict[str, pa.DataType]
    predicate: Any = None
    transform_spec: Any = None
    ngram: bool = False

    def decode(self, name: str, column: Any) -> np.ndarray:
        field = self.read_schema.fields[name]
        codec = field.codec
        if (codec is not None and not isinstance(codec, (ScalarCodec, NdarrayCodec)) and isinstance(column, np.ndarray)
                and column.dtype == object):  # (image codecs: the stored bytes as read, no copy to Arrow)
            return decode_values(field, column)
        return decode_column(field, as_arrow(column, self.arrow_types[name]))

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        names = list(self.read_schema.fields)
        n = batch_rows(batch)
        kept = np.arange(n)
        decoded: dict[str, np.ndarray] = {}
        if self.predicate is not None:
            fields = sorted(self.predicate.get_fields())
            if not fields:
                raise ValueError("At least one field name must be returned by predicate's get_field() method")
            invalid = set(fields) - set(names)
            if invalid:
                raise ValueError(f"At least some column names requested by the predicate "
                                 f"({', '.join(sorted(invalid))}) are not valid schema names: ({', '.join(names)})")
            decoded = {f: self.decode(f, batch[f]) for f in fields}
            mask = predicate_mask(self.predicate, decoded, n)
            if not mask.all():
                kept = np.flatnonzero(mask)
                decoded = {k: v[mask] for k, v in decoded.items()}
                batch = take_rows({k: batch[k] for k in names if k not in decoded}, kept)
        columns = {k: decoded[k] if k in decoded else self.decode(k, batch[k]) for k in names}
        if self.transform_spec is not None:
            columns = self._transformed(columns, names, len(kept))
        out: dict[str, Any] = {k: columns[k] for k in self.out_fields}
        if self.ngram:
            out[KEPT] = kept
        return out

    def _transformed(self, columns: dict[str, np.ndarray], names: list[str], n: int) -> dict[str, np.ndarray]:
        spec = self.transform_spec
        rows = []
        for values in zip(*(columns[k] for k in names)):
            row = dict(zip(names, values))
            if spec.func is not None:
                row = spec.func(row)
            for name in spec.removed_fields:
                row.pop(name, None)
            rows.append(row)
        if not rows:
            return {k: np.empty(0, dtype=object) for k in self.out_fields}
        return {k: _objects([row[k] for row in rows]) for k in self.out_fields}
