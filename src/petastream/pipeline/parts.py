"""Columns as the flat numpy parts a framework's tensors are built from, TensorFlow-free.

A column travels as one part (dense, string, or ``uniform`` arrays of one length) or two
(``ragged``: values and int64 row splits), never one Python object per row. This half of
:class:`petastream.tf.ColumnPlan` runs in the decode workers; it lives outside
:mod:`petastream.tf` (whose import loads TensorFlow) so that worker processes
(:mod:`petastream.pipeline.procpool.pool`) can convert without importing TensorFlow.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from petastream.columns.ragged import Ragged
from petastream.columns.strings import as_ragged_bytes
from petastream.errors import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    PetastreamError,
    PipelineError,
)
from petastream.pipeline.procpool.arena import Strings

__all__ = ["DENSE", "RAGGED", "STRING", "UNIFORM", "ColumnParts", "FlatParts", "NonUniformArrayError"]

DENSE, STRING, RAGGED, UNIFORM = "dense", "string", "ragged", "uniform"


class NonUniformArrayError(PetastreamError, RuntimeError):
    """``ragged="uniform"``: a batch holds arrays of different lengths (Petastorm's error)."""


@dataclass(frozen=True)
class ColumnParts:
    """``kind`` is dense, string, ragged or uniform; ``dtype``/``shape`` describe one row."""

    name: str
    kind: str
    dtype: np.dtype | None = None
    shape: tuple[int | None, ...] = ()

    def _numeric_dtype(self) -> np.dtype:
        """The dtype of a dense, ragged or uniform column (plans always give one)."""
        if self.dtype is None:
            raise PipelineError(f"column {self.name!r}: a {self.kind} column's plan has no dtype")
        return self.dtype

    # -- values -------------------------------------------------------------------------------
    def to_parts(self, col: Any) -> tuple[np.ndarray, ...]:
        """Decoded column -> flat numpy arrays (decode threads; no per-row work for MDS types)."""
        if self.kind == STRING:
            return (self._strings(col),)
        if self.kind in (RAGGED, UNIFORM):
            values, splits = self._ragged(col)
            if self.kind == RAGGED:
                return values, splits
            return (self._uniform(values, splits),)
        return (self._dense(col),)

    def to_group_parts(self, col: Any) -> tuple[np.ndarray, ...]:
        """The rows of several batches handed over at once (a group): as :meth:`to_parts`, but
        a uniform column comes as two parts, its rows dense and their lengths. Where every row
        of the group has one length (fixed-length lists: Spark arrays of features), the rows
        are ``values`` reshaped (no copy) and the lengths part is empty; else the rows are
        padded to the longest and the lengths say where each ends, for the consumer to cut the
        group into batches and check each (``petastream.tf._graph``): a group may hold batches
        of different lengths that are each uniform (``batch_size=1``)."""
        if self.kind != UNIFORM:
            return self.to_parts(col)
        values, splits = self._ragged(col)
        lengths = np.diff(splits)
        n = len(lengths)
        if not n or (lengths == lengths[0]).all():
            return values.reshape(n, self.check_uniform(lengths[:1])), np.zeros(0, np.int64)
        padded = np.zeros((n, int(lengths.max())), values.dtype)
        padded[np.arange(padded.shape[1]) < lengths[:, None]] = values
        return padded, lengths

    def check_uniform(self, lengths: np.ndarray) -> int:
        """The one length of a batch's arrays (``lengths``: each row's), or Petastorm's error;
        where the plan declares a width (``shape == (k,)``), that one."""
        if len(lengths) and (lengths != lengths[0]).any():
            raise NonUniformArrayError(
                f"Length of all values in column '{self.name}' are expected to be the same length. "
                f"Got the following set of lengths: '{', '.join(map(str, sorted(set(lengths.tolist()))))}'")
        width = int(lengths[0]) if len(lengths) else 0
        declared = self.shape[0] if self.shape else None
        if len(lengths) and declared is not None and width != declared:
            raise NonUniformArrayError(
                f"Length of all values in column '{self.name}' are expected to be {declared} (the length "
                f"declared for it, from its first rows), got arrays of length {width}; declare no width "
                "to read arrays of several lengths")
        return width

    def _dense(self, col: Any) -> np.ndarray:
        if isinstance(col, Ragged) or (isinstance(col, np.ndarray) and col.dtype == object and len(col)
                                       and isinstance(col[0], np.ndarray)):
            raise InvalidArgumentTypeError(
                f"column {self.name!r}: got arrays of varying length where {self._describe()} was "
                "expected; declare it as ragged (tf.RaggedTensorSpec in output_signature) or make "
                "the arrays one length")
        arr = np.asarray(col)
        dtype = self._numeric_dtype()
        if arr.dtype == object:  # str_int / str_float decode to Python numbers
            arr = arr.astype(dtype)
        if not np.can_cast(arr.dtype, dtype, "same_kind"):
            raise InvalidArgumentTypeError(
                f"column {self.name!r}: got {arr.dtype} values where {self._describe()} was "
                f"expected; cast it in transform (e.g. batch[{self.name!r}].astype({dtype.name!r})) "
                "or pass output_signature")
        if not _shape_fits(arr.shape[1:], self.shape):
            raise InvalidArgumentError(
                f"column {self.name!r}: rows have shape {arr.shape[1:]}, expected {self.shape}; "
                "a transform changed it: return one row shape for every batch or pass output_signature")
        # Packed-record columns are strided, unaligned views: one contiguous copy per batch.
        return np.ascontiguousarray(arr, dtype=self.dtype)

    def _strings(self, col: Any) -> Any:
        if isinstance(col, Ragged):  # read with strings="ragged" (worker processes): stays packed
            offsets = col.offsets
            return Strings(col.values, offsets[:-1], np.diff(offsets))
        arr = col if isinstance(col, np.ndarray) else np.asarray(col, dtype=object)
        if arr.dtype.kind in "US":
            return arr
        if arr.dtype != object:
            raise InvalidArgumentTypeError(
                f"column {self.name!r}: got {arr.dtype} values where strings (tf.string) were "
                "expected; convert them in transform or pass output_signature")
        if len(arr) and not isinstance(arr.flat[0], (str, bytes)):
            if not isinstance(arr.flat[0], (Decimal, int, float)):
                raise InvalidArgumentTypeError(
                    f"column {self.name!r}: {type(arr.flat[0]).__name__} values have no TensorFlow "
                    "type; drop the column (columns=) or convert it to numpy/str in transform")
            return arr.astype(str)  # decimals as their exact text, as Petastorm
        return arr  # TF encodes str as UTF-8 and takes bytes as they are

    def _ragged(self, col: Any) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(col, Ragged):
            values, splits = col.values, col.offsets.astype(np.int64, copy=False)
            if len(splits) and splits[0] != 0:
                values, splits = values[splits[0]:splits[-1]], splits - splits[0]
        elif self.dtype == np.uint8 and _holds_text(col):  # str/bytes as their bytes (strings="jagged")
            kind = "str" if (col.dtype.kind == "U" if isinstance(col, np.ndarray) and col.dtype.kind in "US"
                             else isinstance(col[0], str)) else "bytes"
            r = as_ragged_bytes(self.name, col, kind)
            values, splits = r.values, r.offsets
        elif isinstance(col, np.ndarray) and col.dtype != object and col.ndim == 2:
            n, length = col.shape  # a dense column of one length is ragged too
            values, splits = col.reshape(-1), np.arange(n + 1, dtype=np.int64) * length
        else:
            rows = [np.asarray(v) for v in col]  # fallback (object arrays of arrays): per row
            if any(r.ndim != 1 for r in rows):
                shapes = sorted({r.shape for r in rows if r.ndim != 1})[:3]
                raise InvalidArgumentTypeError(
                    f"column {self.name!r}: holds arrays of shape {shapes}; only 1-D arrays of varying "
                    "length become a RaggedTensor: reshape them in transform or write the column "
                    "with a fixed shape (ndarray:<dtype>:<shape>)")
            splits = np.zeros(len(rows) + 1, dtype=np.int64)
            np.cumsum([len(r) for r in rows], out=splits[1:])
            values = np.concatenate(rows) if rows else np.zeros(0, self.dtype)
        if not np.can_cast(values.dtype, self._numeric_dtype(), "same_kind"):
            raise InvalidArgumentTypeError(
                f"column {self.name!r}: got {values.dtype} arrays where {self._describe()} was "
                "expected; cast them in transform or pass output_signature")
        return np.ascontiguousarray(values, dtype=self.dtype), splits

    def _uniform(self, values: np.ndarray, splits: np.ndarray) -> np.ndarray:
        return values.reshape(len(splits) - 1, self.check_uniform(np.diff(splits)))

    def _describe(self) -> str:
        if self.kind == RAGGED:
            return f"ragged {self.dtype} arrays"
        return f"{self.dtype} values of shape {self.shape}"


def _holds_text(col: Any) -> bool:
    """Whether a column of a uint8 ragged plan holds str/bytes values (to cut into bytes)."""
    if isinstance(col, np.ndarray):
        return col.dtype.kind in "US" or (col.dtype == object and len(col) > 0 and isinstance(col[0], (str, bytes)))
    return len(col) > 0 and isinstance(col[0], (str, bytes))


def _shape_fits(actual: tuple[int, ...], declared: tuple[int | None, ...]) -> bool:
    return len(actual) == len(declared) and all(d is None or d == a for a, d in zip(actual, declared))


@dataclass(frozen=True)
class FlatParts:
    """A batch (dict of decoded columns) -> the flat parts of ``columns``, in order: the
    ``convert`` the decode workers run (picklable, TensorFlow-free)."""

    columns: tuple[ColumnParts, ...]
    #: Whether hand-overs are groups of batches (:meth:`ColumnParts.to_group_parts`).
    grouped: bool = False

    def __call__(self, batch: dict[str, Any]) -> tuple[np.ndarray, ...]:
        missing = [p.name for p in self.columns if p.name not in batch]
        if missing:
            raise InvalidArgumentError(
                f"batch lacks columns {missing} (it has {sorted(batch)}); a transform must return "
                "the same columns for every batch, or fix output_signature")
        if self.grouped:
            return tuple(part for p in self.columns for part in p.to_group_parts(batch[p.name]))
        return tuple(part for p in self.columns for part in p.to_parts(batch[p.name]))
