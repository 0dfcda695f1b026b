"""petastream.checks: good values pass (as plain Python values), bad ones raise the right class
with a message naming the argument, the value and what to pass."""

from __future__ import annotations

import numpy as np
import pytest

from petastream import checks
from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError, PetastreamError


@pytest.mark.parametrize("value", [1, 7, np.int64(3), np.uint8(2), 2**70])
def test_positive_int_accepts_integers(value):
    out = checks.positive_int("batch_size", value, "rows per batch")
    assert out == int(value) and type(out) is int


@pytest.mark.parametrize(("value", "error", "match"), [
    (0, InvalidArgumentError, r"^batch_size must be >= 1 \(rows per batch\), got 0; pass batch_size=1 or more$"),
    (-3, InvalidArgumentError, r"batch_size must be >= 1 .*got -3"),
    (2.5, InvalidArgumentTypeError, r"^batch_size must be an integer, got 2.5 \(float\); pass a whole number such as batch_size=1$"),
    (True, InvalidArgumentTypeError, r"batch_size must be an integer, got True \(bool\)"),
    (np.bool_(True), InvalidArgumentTypeError, r"got (np\.)?True_? \(bool_?\)"),
    ("4", InvalidArgumentTypeError, r"got '4' \(str\)"),
    (None, InvalidArgumentTypeError, r"got None \(NoneType\)"),
])
def test_positive_int_refuses(value, error, match):
    with pytest.raises(error, match=match) as info:
        checks.positive_int("batch_size", value, "rows per batch")
    assert isinstance(info.value, PetastreamError)


def test_classes_keep_their_builtins():
    with pytest.raises(ValueError):
        checks.positive_int("n", 0)
    with pytest.raises(TypeError):
        checks.positive_int("n", 1.0)


def test_nonnegative_int():
    assert checks.nonnegative_int("seed", 0) == 0
    assert checks.nonnegative_int("seed", np.int32(5)) == 5
    with pytest.raises(InvalidArgumentError, match=r"^seed must be >= 0 \(the shuffle seed\), got -1; pass seed=0 or more$"):
        checks.nonnegative_int("seed", -1, "the shuffle seed")
    with pytest.raises(InvalidArgumentTypeError, match="seed must be an integer, got '7'"):
        checks.nonnegative_int("seed", "7")


def test_optional_positive_int():
    assert checks.optional_positive_int("num_epochs", None) is None
    assert checks.optional_positive_int("num_epochs", 2) == 2
    with pytest.raises(InvalidArgumentError, match="num_epochs must be >= 1"):
        checks.optional_positive_int("num_epochs", 0)
    with pytest.raises(InvalidArgumentTypeError, match="num_epochs must be an integer"):
        checks.optional_positive_int("num_epochs", 1.5)


def test_int_at_least_with_where_and_fix():
    assert checks.int_at_least("prefetch", -1, -1) == -1
    with pytest.raises(InvalidArgumentError, match=(
            r"^make_tf_dataset\(prefetch=-2\): prefetch must be >= -1 \(batches; -1: AUTOTUNE\), got -2; "
            r"pass prefetch=None$")):
        checks.int_at_least("prefetch", -2, -1, "batches; -1: AUTOTUNE", where="make_tf_dataset",
                            fix="pass prefetch=None")
    with pytest.raises(InvalidArgumentTypeError, match=(
            r"^make_tf_dataset\(prefetch=1.0\): prefetch must be an integer, got 1.0 \(float\); pass prefetch=None$")):
        checks.int_at_least("prefetch", 1.0, -1, where="make_tf_dataset", fix="pass prefetch=None")


def test_fraction():
    assert checks.fraction("saving", 0) == 0.0 and type(checks.fraction("saving", 0)) is float
    assert checks.fraction("saving", np.float32(0.5)) == 0.5
    for bad in (1, 1.0, -0.1, float("nan")):
        with pytest.raises(InvalidArgumentError, match=rf"saving must be a fraction in \[0, 1\), got {bad!r}"):
            checks.fraction("saving", bad)
    for bad in (True, "0.1", None):
        with pytest.raises(InvalidArgumentTypeError, match=r"saving must be a fraction in \[0, 1\), got .*\("):
            checks.fraction("saving", bad)


def test_one_of():
    assert checks.one_of("nested", "json", ("error", "json")) == "json"
    with pytest.raises(InvalidArgumentError, match=r"^nested must be one of \('error', 'json'\), got 'xml'$"):
        checks.one_of("nested", "xml", ("error", "json"))
    with pytest.raises(InvalidArgumentError, match=r"got array"):  # no ambiguous-truth error
        checks.one_of("nested", np.array([1, 2]), ("error", "json"))
    with pytest.raises(InvalidArgumentError, match=r"^f\(mode='x'\): mode must be one of"):
        checks.one_of("mode", "x", ["a"], where="f")


def test_callables():
    assert checks.callable_or_none("transform", None, "batch -> batch") is None
    assert checks.callable_or_none("transform", len, "batch -> batch") is len
    with pytest.raises(InvalidArgumentTypeError,
                       match=r"^transform must be callable \(batch -> batch\) or None, got 'x' \(str\)$"):
        checks.callable_or_none("transform", "x", "batch -> batch")
    assert checks.require_callable("collate_fn", len, "rows -> batch") is len
    for bad in (None, "stack"):
        with pytest.raises(InvalidArgumentTypeError, match=r"^collate_fn must be callable \(rows -> batch\), got"):
            checks.require_callable("collate_fn", bad, "rows -> batch")
