"""Turning the fixtures' expected.json value descriptions into Python values and back."""

from __future__ import annotations

import hashlib
import json
import os
from decimal import Decimal
from typing import Any

import numpy as np

from tests.conftest import FIXTURES

FIXTURE_NAMES = sorted(
    d for d in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, d))
)


def load_expected(name: str) -> dict[str, Any]:
    with open(os.path.join(FIXTURES, name, "expected.json")) as f:
        return json.load(f)


def to_value(v: Any) -> Any:
    """The Python value an expected.json entry describes (images excepted)."""
    if isinstance(v, dict):
        if "bytes_hex" in v:
            return bytes.fromhex(v["bytes_hex"])
        if "float" in v:
            return float(v["float"])
        if "decimal" in v:
            return Decimal(v["decimal"])
        if "numpy" in v:
            return np.dtype(v["numpy"]["dtype"]).type(v["numpy"]["value"])
        if "ndarray" in v:
            d = v["ndarray"]
            return np.array(d["values"], dtype=d["dtype"]).reshape(d["shape"])
    return v


def assert_matches(expected: Any, got: Any, where: str) -> None:
    """Assert a decoded value equals its expected.json description, type included."""
    if isinstance(expected, dict) and len(expected) == 1 and next(iter(expected)) in {
        "bytes_hex", "float", "decimal", "numpy", "ndarray", "image"
    }:
        kind, spec = next(iter(expected.items()))
        if kind == "bytes_hex":
            assert isinstance(got, bytes) and got == bytes.fromhex(spec), where
        elif kind == "float":
            assert isinstance(got, float), where
            assert repr(float(got)) == spec or (np.isnan(got) and spec == "nan"), (where, got)
        elif kind == "decimal":
            assert isinstance(got, Decimal) and str(got) == spec, where
        elif kind == "numpy":
            assert isinstance(got, np.generic) and got.dtype.name == spec["dtype"], (where, type(got))
            assert got == spec["value"] or (np.isnan(got) and np.isnan(spec["value"])), (where, got)
        elif kind == "ndarray":
            assert isinstance(got, np.ndarray) and got.dtype.name == spec["dtype"], where
            assert list(got.shape) == spec["shape"], where
            np.testing.assert_array_equal(got.ravel(), np.array(spec["values"], dtype=got.dtype))
        else:  # image: jpeg is lossy, so mode and size for all, pixels for lossless ones
            assert got.mode == spec["mode"] and list(got.size) == spec["size"], where
    else:
        assert got == expected, (where, got, expected)
        assert type(got) is type(expected) or isinstance(expected, (dict, list)), (where, type(got))


def pixel_sha1(img: Any) -> str:
    return hashlib.sha1(img.tobytes()).hexdigest()
