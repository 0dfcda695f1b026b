"""Petastorm's ``TransformSpec`` and ``edit_field`` (``petastorm.transform``).

With the converter, ``func`` receives a pandas DataFrame (a batch of rows) and returns one, as
with Petastorm's ``make_batch_reader``. Array cells are 1-D numpy arrays in the DataFrame and
are stacked back into a 2-D column afterwards.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["TransformSpec", "edit_field", "transform_batch"]


def edit_field(name: str, numpy_dtype: Any, shape: tuple, nullable: bool = False) -> tuple:
    return (name, numpy_dtype, shape, nullable)


class TransformSpec:
    def __init__(self, func: Callable | None = None, edit_fields: list | None = None,
                 removed_fields: list[str] | None = None, selected_fields: list[str] | None = None):
        if removed_fields and selected_fields:
            raise ValueError("User can only specify one of removed_fields and selected_fields in TransformSpec.")
        self.func = func
        self.edit_fields = list(edit_fields or [])
        self.removed_fields = list(removed_fields or [])
        self.selected_fields = list(selected_fields) if selected_fields is not None else None

    def output_columns(self, columns: list[str]) -> list[str]:
        """The post-transform column order (Petastorm's transformed schema)."""
        edited = [f[0] for f in self.edit_fields]
        for name in (self.removed_fields or []) + (self.selected_fields or []):
            if name not in columns and name not in edited:
                warnings.warn(f"field {name!r} in TransformSpec is not in the dataset", UserWarning, stacklevel=3)
        out = [c for c in columns if c not in self.removed_fields and c not in edited] + edited
        if self.selected_fields is not None:
            out = [c for c in self.selected_fields if c in out]
        return out


def _to_pandas(batch: dict[str, Any]) -> Any:  # a pandas DataFrame
    import pandas as pd

    data = {}
    for name, col in batch.items():
        if isinstance(col, np.ndarray) and col.ndim > 1:
            cells = np.empty(len(col), dtype=object)
            cells[:] = list(col)
            data[name] = cells
        elif hasattr(col, "to_list") and not isinstance(col, np.ndarray):
            cells = np.empty(len(col), dtype=object)
            cells[:] = col.to_list()
            data[name] = cells
        else:
            data[name] = col
    return pd.DataFrame(data)


def _from_pandas(frame: Any) -> dict[str, Any]:
    out = {}
    for name in frame.columns:
        values = frame[name].to_numpy()
        if values.dtype == object and len(values) and isinstance(values[0], np.ndarray):
            try:
                values = np.stack(values)
            except ValueError:
                pass  # ragged: keep one array per row
        if not values.flags.writeable:
            # pandas' copy-on-write (always on from pandas 3) gives read-only views of the frame,
            # whose memory may back another column too (df["b"] = df["a"]) or be the user's own
            # array: torch warns on them, and marking them writable would let a write to one
            # tensor show in another. A copy is ours (pandas 2 hands out writable arrays).
            values = values.copy()
        out[str(name)] = values
    return out


def transform_batch(spec: TransformSpec, batch: dict[str, Any]) -> dict[str, Any]:
    """Apply ``spec`` to a batch of numpy columns, with Petastorm's checks."""
    columns = list(batch)
    result = batch
    if spec.func is not None:
        result = _from_pandas(spec.func(_to_pandas(batch)))
    for name in spec.removed_fields:
        result.pop(name, None)
    wanted = spec.output_columns(columns)
    if spec.selected_fields is None and set(result) != set(wanted):
        raise ValueError(
            f"Transformed result columns ({sorted(result)}) do not match required schema columns({sorted(wanted)})"
        )
    missing = [c for c in wanted if c not in result]
    if missing:
        raise ValueError(
            f"Transformed result columns ({sorted(result)}) do not match required schema columns({sorted(wanted)})"
        )
    return {c: result[c] for c in wanted}


def transform_schema(schema: Any, transform_spec: TransformSpec) -> Any:
    """The Unischema of rows after ``transform_spec`` (Petastorm's ``transform_schema``): fields
    removed or edited leave, edited ones come last, ``selected_fields`` picks and orders them."""
    from petastream.compat.unischema import Unischema, UnischemaField, schema_name

    removed = set(transform_spec.removed_fields)
    unknown = removed - set(schema.fields)
    if unknown:
        warnings.warn("remove_fields specified some field names that are not part of the schema. These field "
                      f'names will be ignored "{", ".join(sorted(unknown))}". ', UserWarning, stacklevel=2)
    excluded = {f[0] for f in transform_spec.edit_fields} | removed
    fields = [f for name, f in schema.fields.items() if name not in excluded]
    fields += [UnischemaField(name=e[0], numpy_dtype=e[1], shape=e[2], codec=None, nullable=e[3])
               for e in transform_spec.edit_fields]
    selected = transform_spec.selected_fields
    if selected is not None:
        fields = sorted((f for f in fields if f.name in selected), key=lambda f: selected.index(f.name))
    return Unischema(schema_name(schema) + "_transformed", fields)
