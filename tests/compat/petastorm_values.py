"""Exact, typed JSON descriptions of the values a Petastorm reader yields, and back.

Shared by the fixture writer (tests/fixtures/petastorm/make_fixtures.py, run with Petastorm's own
interpreter: numpy 1.26) and the tests (numpy 2), so it imports nothing but numpy and the
standard library. Every value keeps its exact Python type: ``np.int32(3)`` and ``3`` differ, as
do ``np.str_('a')`` and ``'a'``, because a reader that changes the type breaks user code that
calls ``.item()``, ``.dtype`` or ``isinstance``.

Forms: ``null``; ``{"ndarray": {"dtype", "shape", "b64"}}`` (C-order bytes);
``{"numpy": {"dtype", "b64"}}`` (a numpy scalar's bytes); ``{"decimal": str}``;
``{"bytes_b64": ...}``; ``{"str": ...}``; ``{"int": ...}``; ``{"float": repr}``;
``{"bool": ...}``; ``{"date": iso}``; ``{"datetime": iso}``.
"""

from __future__ import annotations

import base64
import datetime
from decimal import Decimal
from typing import Any

import numpy as np


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def encode(value: Any) -> Any:
    """The JSON description of ``value``."""
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        return {"ndarray": {"dtype": arr.dtype.str, "shape": list(arr.shape), "b64": _b64(arr.tobytes())}}
    if isinstance(value, np.generic):
        return {"numpy": {"dtype": value.dtype.str, "b64": _b64(value.tobytes())}}
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes_b64": _b64(bytes(value))}
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": repr(value)}
    if isinstance(value, datetime.datetime):
        return {"datetime": value.isoformat()}
    if isinstance(value, datetime.date):
        return {"date": value.isoformat()}
    raise TypeError(f"no JSON description for {type(value)}: {value!r}")


def decode(desc: Any) -> Any:
    """The value a JSON description stands for, with its exact type."""
    if desc is None:
        return None
    (kind, body), = desc.items()
    if kind == "ndarray":
        raw = base64.b64decode(body["b64"])
        return np.frombuffer(raw, dtype=np.dtype(body["dtype"])).reshape(body["shape"]).copy()
    if kind == "numpy":
        return np.frombuffer(base64.b64decode(body["b64"]), dtype=np.dtype(body["dtype"]))[0]
    if kind == "decimal":
        return Decimal(body)
    if kind == "bytes_b64":
        return base64.b64decode(body)
    if kind == "float":
        return float(body)
    if kind == "date":
        return datetime.date.fromisoformat(body)
    if kind == "datetime":
        return datetime.datetime.fromisoformat(body)
    return body  # str, int, bool


def same(a: Any, b: Any) -> bool:
    """Identical type and value (arrays: dtype, shape and every element, NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return bool(a == b)


def as_input(value: Any) -> Any:
    """A value as an ETL script hands it to ``dict_to_spark_row``: what Petastorm decoded, with
    numpy datetimes as the ``datetime.date``/``datetime.datetime`` Spark takes."""
    if isinstance(value, np.datetime64):
        return value.item()
    return value
