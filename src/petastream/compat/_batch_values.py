"""Columns of a Parquet store as Petastorm's batch reader yields them (the reader's batches).

Variable-length arrays: one 2-D array when every row has the same length, else an object
array of arrays (:func:`as_petastorm_column`). Dates and timestamps:

Petastorm 0.13.1 reads a row group through pandas: a date column (date32 or date64) comes as an
object array of ``datetime.date`` (None for a null), a timestamp column as ``datetime64`` in its
Parquet unit (``s`` becomes ``ms``, as pandas 2 gives it; a time zone is dropped, the values
staying UTC), NaT for a null. petastream reads both as int64 nanoseconds since the epoch
(:mod:`petastream.parquet.convert`); this turns them back, vectorized (numpy's casts: no
per-row Python), on the reader's own batches only. The converter's MDS datasets and the torch
loaders keep int64 nanoseconds.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from petastream.compat.transform import TransformSpec, transform_batch
from petastream.parquet.source import ParquetPlanned

__all__ = ["as_petastorm_column", "as_petastorm_temporal", "cast_columns", "petastorm_batch", "temporal_units"]

_TIMESTAMP = re.compile(r"timestamp\[(s|ms|us|ns)\b")


def temporal_units(dataset: Any) -> dict[str, str]:
    """``{column: numpy unit}`` of a Parquet source's dates (``"D"``) and timestamps (their
    Parquet unit, ``s`` as ``ms``); empty for anything without a Parquet plan (MDS, mixtures)."""
    units: dict[str, str] = {}
    for spec in dataset.plan.specs if isinstance(dataset, ParquetPlanned) else ():
        if spec.kind == "date":
            units[spec.name] = "D"
        elif spec.kind == "timestamp":
            found = _TIMESTAMP.match(spec.arrow_type)
            unit = found.group(1) if found else "ns"
            units[spec.name] = "ms" if unit == "s" else unit
    return units


def as_petastorm_temporal(batch: dict[str, Any], units: dict[str, str]) -> dict[str, Any]:
    """The batch with its int64-nanosecond dates as ``datetime.date`` objects (None for NaT) and
    its timestamps as ``datetime64[unit]`` (NaT kept)."""
    if not units:
        return batch
    out = dict(batch)
    for name, unit in units.items():
        value = out.get(name)
        if not isinstance(value, np.ndarray) or value.dtype != np.int64:
            continue
        moments = value.view("datetime64[ns]").astype(f"datetime64[{unit}]")
        out[name] = moments.astype(object) if unit == "D" else moments
    return out


def cast_columns(batch: dict[str, Any], casts: dict[str, str]) -> dict[str, Any]:
    """The batch with the columns of ``casts`` (``{column: numpy dtype}``) cast, arrays of
    numbers (``Ragged``) by their values: the converter's ``dtype`` on a table it reads directly
    (double -> float32 for ``'float32'``), as the materialized path casts them in Spark."""
    from petastream.columns.ragged import Ragged

    out = dict(batch)
    for name, dtype in casts.items():
        value = out.get(name)
        if isinstance(value, Ragged):
            out[name] = Ragged(value.values.astype(dtype, copy=False), value.offsets)
        elif isinstance(value, np.ndarray):
            out[name] = value.astype(dtype, copy=False)
    return out


def petastorm_batch(spec: TransformSpec | None, batch: dict[str, Any],
                    temporal: dict[str, str] | None = None, casts: dict[str, str] | None = None) -> dict[str, Any]:
    if casts:  # before the spec: its function sees what the materialized path would serve
        batch = cast_columns(batch, casts)
    batch = {k: as_petastorm_column(v) for k, v in batch.items()}
    if temporal:  # the reader's own batches: dates and timestamps as Petastorm's (before the spec, as its)
        batch = as_petastorm_temporal(batch, temporal)
    return transform_batch(spec, batch) if spec else batch


def as_petastorm_column(column: Any) -> Any:
    """Variable-length arrays (``Ragged``) as Petastorm's batch reader gives them: one 2-D
    array when every row has the same length, else an object array of 1-D arrays."""
    from petastream.columns.ragged import Ragged

    if not isinstance(column, Ragged):
        return column
    lengths = column.lengths()
    if len(lengths) and (lengths == lengths[0]).all():
        return column.values.reshape(len(lengths), int(lengths[0]))
    out = np.empty(len(column), dtype=object)
    for i in range(len(column)):
        out[i] = column[i]
    return out
