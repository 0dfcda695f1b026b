"""How one column travels into TensorFlow: its type, its numpy parts, its tensor.

A :class:`ColumnPlan` is decided once per loader, from the column's MDS encoding (or, where the
encoding does not say, from a decoded probe batch or the user's ``output_signature``):

========================================  ===================================================
encoding                                  TensorFlow value (batch dimension first)
========================================  ===================================================
``int8`` ... ``float64``, ``int``         ``Tensor`` of that dtype; ``uint16 -> int32``,
                                          ``uint32``/``uint64 -> int64`` (:func:`widen_unsigned`)
``str_int`` / ``str_float``               ``int64`` / ``float64``
``ndarray:<dtype>:<shape>``               dense ``Tensor`` ``(batch, *shape)``
``ndarray:<dtype>``, ``ndarray``          ``RaggedTensor`` ``(batch, None)`` (1-D arrays of any
                                          length), or dense ``(batch, None)`` with
                                          ``ragged="uniform"``
``str`` / ``bytes`` / ``str_decimal``     ``tf.string`` (str as UTF-8, decimals as their text);
                                          ``str``/``bytes`` with ``strings="jagged"``:
                                          ``RaggedTensor`` uint8 ``(batch, None)`` of their bytes
``json``, ``pkl``, images                 none: drop the column or convert it in ``transform``
========================================  ===================================================

:meth:`ColumnPlan.to_parts` runs in the decode threads and produces flat numpy arrays (a
ragged column is two: values and row splits, never one Python object per row);
:meth:`ColumnPlan.from_parts` runs inside ``tf.data`` and rebuilds the tensor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import tensorflow as tf

from petastream.capabilities import reading_strings
from petastream.columns.ops import widen_unsigned
from petastream.columns.ragged import Ragged
from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError
from petastream.mds.sidecar import apply_logical
from petastream.pipeline.parts import (
    DENSE,
    RAGGED,
    STRING,
    UNIFORM,
    ColumnParts,
    NonUniformArrayError,
)

__all__ = ["ColumnPlan", "NonUniformArrayError", "jagged_read", "plan_columns", "plan_from_encoding",
           "plan_from_values", "plan_from_spec"]

_NUMERIC_KINDS = "biuf"
_PARSED = {"str_int": np.dtype("int64"), "str_float": np.dtype("float64")}
_STRINGS = {"str", "bytes", "str_decimal"}


@dataclass(frozen=True)
class ColumnPlan(ColumnParts):
    """A column's TensorFlow type and tensor; its numpy half (``to_parts``, run in the decode
    workers) is :class:`~petastream.pipeline.parts.ColumnParts`."""

    # -- types --------------------------------------------------------------------------------
    def spec(self, batch: int | None) -> tf.TypeSpec:
        if self.kind == RAGGED:
            return tf.RaggedTensorSpec((batch, None), tf.as_dtype(self.dtype), ragged_rank=1,
                                       row_splits_dtype=tf.int64)
        return tf.TensorSpec((batch, *self.shape), self._tf_dtype())

    def part_specs(self, batch: int | None, packed: bool = False) -> tuple[tf.TensorSpec, ...]:
        """The flat parts' specs; ``packed``: a string column comes as
        :class:`~petastream.pipeline.procpool.arena.Strings` (all its bytes as one scalar, then int64
        starts and lengths shaped like the column)."""
        if self.kind == STRING and packed:
            where = tf.TensorSpec((batch, *self.shape), tf.int64)
            return (tf.TensorSpec((), tf.string), where, where)
        if self.kind == RAGGED:
            splits = None if batch is None else batch + 1
            return (tf.TensorSpec((None,), tf.as_dtype(self.dtype)), tf.TensorSpec((splits,), tf.int64))
        return (tf.TensorSpec((batch, *self.shape), self._tf_dtype()),)

    def _tf_dtype(self) -> tf.DType:
        return tf.string if self.kind == STRING else tf.as_dtype(self.dtype)

    def from_parts(self, parts: tuple[Any, ...]) -> Any:
        """Flat tensors -> the column's tensor (inside ``tf.data``)."""
        if self.kind == STRING and len(parts) == 3:  # packed: cut in C++, no Python per value
            return tf.strings.substr(parts[0], parts[1], parts[2])
        if self.kind == RAGGED:
            return tf.RaggedTensor.from_row_splits(parts[0], parts[1], validate=False)
        return parts[0]


def _variable(name: str, dtype: np.dtype, ragged: str) -> ColumnPlan:
    kind = UNIFORM if ragged == "uniform" else RAGGED
    return ColumnPlan(name, kind, widen_unsigned(dtype), (None,) if kind == UNIFORM else ())


def plan_from_encoding(name: str, encoding: str, ragged: str = "ragged") -> ColumnPlan | None:
    """The plan an encoding implies, or None when only decoded values can tell (see module doc)."""
    from petastream.mds.encodings import get_encoding

    if encoding in _STRINGS:
        return ColumnPlan(name, STRING)
    if encoding in _PARSED:
        return ColumnPlan(name, DENSE, _PARSED[encoding])
    enc = get_encoding(encoding)
    if enc.dtype is not None and enc.dtype.base.kind in _NUMERIC_KINDS:
        return ColumnPlan(name, DENSE, widen_unsigned(enc.dtype.base), tuple(enc.dtype.shape))
    value_dtype = getattr(enc, "value_dtype", None)  # only variable-shape ndarray encodings have one
    if encoding.startswith("ndarray:") and value_dtype is not None:
        return _variable(name, np.dtype(value_dtype), ragged)
    return None


def plan_from_values(name: str, col: Any, ragged: str = "ragged", source: str = "") -> ColumnPlan:
    """The plan for a decoded (or transformed) column, from its values."""
    if isinstance(col, Ragged):
        return _variable(name, col.dtype, ragged)
    arr = col if isinstance(col, np.ndarray) else np.asarray(col)
    if arr.dtype.kind in _NUMERIC_KINDS:
        if arr.ndim == 0:
            raise InvalidArgumentError(f"column {name!r}: a batch column needs a batch dimension, got a scalar")
        return ColumnPlan(name, DENSE, widen_unsigned(arr.dtype), tuple(arr.shape[1:]))
    if arr.dtype.kind in "US":
        return ColumnPlan(name, STRING, shape=tuple(arr.shape[1:]))
    first = arr.flat[0] if arr.size else None
    if isinstance(first, (str, bytes, Decimal)):
        return ColumnPlan(name, STRING, shape=tuple(arr.shape[1:]))
    if isinstance(first, np.ndarray) and first.dtype.kind in _NUMERIC_KINDS and first.ndim == 1:
        return _variable(name, first.dtype, ragged)
    if isinstance(first, np.ndarray):
        raise InvalidArgumentTypeError(
            f"column {name!r}{source}: holds {first.dtype} arrays of shape {first.shape}; only numeric "
            "1-D arrays of varying length become a RaggedTensor: reshape them in transform or write "
            "the column with a fixed shape (ndarray:<dtype>:<shape>)")
    what = type(first).__name__ if first is not None else "no"
    raise InvalidArgumentTypeError(
        f"column {name!r}{source}: {what} values have no TensorFlow type; drop the column "
        "(columns=[...]), convert it to numpy arrays or str in transform, or pass output_signature")


def plan_from_spec(name: str, spec: Any) -> ColumnPlan:
    """The plan a user's ``tf.TensorSpec`` / ``tf.RaggedTensorSpec`` declares (batch dim first)."""
    if isinstance(spec, tf.RaggedTensorSpec):
        if spec.shape.rank != 2 or spec.ragged_rank != 1:
            raise InvalidArgumentError(
                f"output_signature[{name!r}]: only RaggedTensorSpec((None, None), dtype) (1-D rows) "
                f"is supported, got {spec}")
        return ColumnPlan(name, RAGGED, np.dtype(spec.dtype.as_numpy_dtype))
    if not isinstance(spec, tf.TensorSpec):
        raise InvalidArgumentTypeError(
            f"output_signature[{name!r}] must be a tf.TensorSpec or tf.RaggedTensorSpec, got {spec!r}")
    if spec.shape.rank is None or spec.shape.rank < 1:
        raise InvalidArgumentError(
            f"output_signature[{name!r}]: give a shape with the batch dimension first, e.g. "
            f"tf.TensorSpec((None,), {spec.dtype.name}), got {spec.shape}")
    shape = tuple(spec.shape.as_list()[1:])
    if spec.dtype == tf.string:
        return ColumnPlan(name, STRING, shape=shape)
    return ColumnPlan(name, DENSE, np.dtype(spec.dtype.as_numpy_dtype), shape)


def plan_columns(source: Any, names: Sequence[str], *, ragged: str, logical_types: bool, probe_rows: int,
                 transform: Callable[[dict[str, Any]], Any] | None = None,
                 output_signature: Mapping[str, Any] | None = None,
                 jagged: Mapping[str, str] | None = None,
                 dtypes: Mapping[str, Any] | None = None,
                 widths: Mapping[str, int] | None = None) -> list[ColumnPlan]:
    """The plans of a loader's columns ``names`` of ``source`` (a :class:`petastream.source.Source`):
    from ``output_signature`` where given; else, with a ``transform``, from its output on the
    first ``probe_rows`` rows (its output types are only known from its output); else from the
    column encodings and logical dtypes, probing the rows of the columns whose encoding does not
    say (``ndarray`` without a dtype). ``jagged``: the str/bytes columns (of ``names``, or of
    the transform's output) that come as uint8 ``RaggedTensor`` s of their bytes. ``dtypes``:
    numeric columns cast to these dtypes (by :meth:`ColumnParts.to_parts`, which casts to the
    plan's dtype). ``widths``: uniform columns declared ``(batch, k)``."""
    plans = _plans(source, names, ragged=ragged, logical_types=logical_types, probe_rows=probe_rows,
                   transform=transform, output_signature=output_signature)
    declared = transform is not None or output_signature is not None
    if dtypes:
        plans = _cast(plans, dtypes, declared)
    if widths:
        plans = _widen(plans, widths, declared)
    if not jagged or output_signature is not None:  # (a signature declares its own types)
        return plans
    return [ColumnPlan(p.name, RAGGED, np.dtype(np.uint8)) if p.name in jagged else p for p in plans]


def _cast(plans: list[ColumnPlan], dtypes: Mapping[str, Any], declared: bool) -> list[ColumnPlan]:
    if declared:
        raise InvalidArgumentError("dtypes= casts columns as read; with a transform or output_signature, "
                                   "cast in the transform or declare the types in output_signature instead")
    by_name = {p.name: p for p in plans}
    out = {}
    for name, dtype in dtypes.items():
        plan = by_name.get(name)
        want = np.dtype(dtype)
        if plan is None or plan.kind == STRING or plan.dtype is None:
            raise InvalidArgumentError(f"dtypes[{name!r}]: only numeric columns read can be cast "
                                       f"(numeric columns: {sorted(p.name for p in plans if p.kind != STRING)})")
        if want.kind not in _NUMERIC_KINDS or not np.can_cast(plan.dtype, want, "same_kind"):
            raise InvalidArgumentError(f"dtypes[{name!r}]={want.name!r}: column {name!r} is {plan.dtype}, which "
                                       "does not cast to it within its kind; cast it in transform instead")
        out[name] = dataclasses.replace(plan, dtype=want)
    return [out.get(p.name, p) for p in plans]


def _widen(plans: list[ColumnPlan], widths: Mapping[str, int], declared: bool) -> list[ColumnPlan]:
    if declared:
        raise InvalidArgumentError("widths= declares columns as read; with a transform or output_signature, "
                                   "declare the shapes in output_signature instead")
    uniform = {p.name for p in plans if p.kind == UNIFORM}
    for name, k in widths.items():
        if name not in uniform or isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise InvalidArgumentError(f"widths[{name!r}]={k!r}: give an int >= 0 for a variable-length array "
                                       f"column read with ragged='uniform' (those: {sorted(uniform)})")
    return [dataclasses.replace(p, shape=(int(widths[p.name]),)) if p.name in widths else p for p in plans]


def jagged_read(work: Any) -> Any:
    """A work stage (``PassWork -> PassWork``): the pass reads str/bytes columns as their bytes
    and offsets, through a copy of the source (for a loader whose str/bytes columns are all
    jagged; others may read the source itself as objects)."""
    return dataclasses.replace(work, dataset=reading_strings(work.dataset, "ragged"))


def _plans(source: Any, names: Sequence[str], *, ragged: str, logical_types: bool, probe_rows: int,
           transform: Callable[[dict[str, Any]], Any] | None,
           output_signature: Mapping[str, Any] | None) -> list[ColumnPlan]:
    if output_signature is not None:
        if not isinstance(output_signature, Mapping) or not output_signature:
            raise InvalidArgumentTypeError(
                "output_signature must be a non-empty dict {column: tf.TensorSpec | "
                f"tf.RaggedTensorSpec}}, got {output_signature!r}")
        return [plan_from_spec(str(n), s) for n, s in output_signature.items()]

    def probe(columns: list[str]) -> dict[str, Any]:
        k = min(len(source), probe_rows)
        if k == 0:
            raise InvalidArgumentError(
                f"the dataset is empty, so the TensorFlow types of {columns} cannot be read from "
                "its rows; pass output_signature={column: tf.TensorSpec(...)}")
        return apply_logical(source.read(np.arange(k), columns), source.logical_dtypes if logical_types else {})

    if transform is not None:
        out = transform(probe(list(names)))
        if not isinstance(out, Mapping):
            raise InvalidArgumentTypeError(f"transform must return a dict of columns, got {type(out).__name__}")
        return [plan_from_values(str(n), c, ragged, " (from transform)") for n, c in out.items()]
    encodings = source.columns
    plans = {n: plan_from_encoding(n, encodings[n], ragged) for n in names}
    for n, dtype in (source.logical_dtypes if logical_types else {}).items():  # Spark booleans -> tf.bool
        plan = plans.get(n)
        if plan is not None:
            plans[n] = dataclasses.replace(plan, dtype=np.dtype(dtype))
    unknown = [n for n, p in plans.items() if p is None]
    if unknown:  # e.g. 'ndarray' without a dtype: the first rows tell
        rows = probe(unknown)
        for n in unknown:
            plans[n] = plan_from_values(n, rows[n], ragged, f" (encoding {encodings[n]!r})")
    return [p for p in plans.values() if p is not None]
