"""The argument checks every petastream module uses.

One message shape everywhere: the argument's name, the value given, what the argument means,
and what to pass instead::

    batch_size must be >= 1 (rows per batch), got 0; pass batch_size=1 or more
    batch_size must be an integer, got 2.5 (float); pass a whole number such as batch_size=1
    make_torch_dataloader(batch_size=0): batch_size must be >= 1 (rows per batch), got 0; pass ...

A value of the wrong type raises :class:`~petastream.errors.InvalidArgumentTypeError` (a
``TypeError``); a value of the right type out of range raises
:class:`~petastream.errors.InvalidArgumentError` (a ``ValueError``).

Integers are anything with ``__index__`` (Python and numpy integers), never a bool: ``True``
as a batch size is a mistake, not 1. Each check returns the value as the plain Python type
(``int``/``float``), so what is stored (and put in a ``state_dict``) serialises as JSON.

``where`` (keyword) names the call the argument was given to, for messages raised far from
the user's own line (``make_torch_dataloader(batch_size=0): ...``); ``fix`` replaces the
default advice.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection
from typing import Any, SupportsIndex, TypeGuard, TypeVar

import numpy as np

from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = [
    "as_int",
    "int_at_least",
    "positive_int",
    "nonnegative_int",
    "optional_positive_int",
    "fraction",
    "one_of",
    "callable_or_none",
    "require_callable",
    "is_int",
]

T = TypeVar("T")


def _prefix(where: str, name: str, value: object) -> str:
    return f"{where}({name}={value!r}): " if where else ""


def _meaning(what: str) -> str:
    return f" ({what})" if what else ""


def is_int(value: object) -> TypeGuard[SupportsIndex]:
    """Whether ``value`` is an integer (Python or numpy), bools excluded."""
    return not isinstance(value, (bool, np.bool_)) and hasattr(type(value), "__index__")


def as_int(name: str, value: object, *, where: str = "", example: int = 1,
           fix: str | None = None) -> int:
    """``value`` as a Python int: integers (numpy's too) pass; bools, floats, strings raise."""
    if not is_int(value):
        raise InvalidArgumentTypeError(
            f"{_prefix(where, name, value)}{name} must be an integer, got {value!r} "
            f"({type(value).__name__}); {fix or f'pass a whole number such as {name}={example}'}"
        )
    return operator.index(value)


def int_at_least(name: str, value: object, low: int, what: str = "", *, where: str = "",
                 fix: str | None = None) -> int:
    """An integer ``>= low``; ``what`` says what the argument means, for the message."""
    n = as_int(name, value, where=where, example=low, fix=fix)
    if n < low:
        raise InvalidArgumentError(
            f"{_prefix(where, name, value)}{name} must be >= {low}{_meaning(what)}, got {n}; "
            f"{fix or f'pass {name}={low} or more'}"
        )
    return n


def positive_int(name: str, value: object, what: str = "", *, where: str = "",
                 fix: str | None = None) -> int:
    """An integer ``>= 1``."""
    return int_at_least(name, value, 1, what, where=where, fix=fix)


def nonnegative_int(name: str, value: object, what: str = "", *, where: str = "",
                    fix: str | None = None) -> int:
    """An integer ``>= 0``."""
    return int_at_least(name, value, 0, what, where=where, fix=fix)


def optional_positive_int(name: str, value: object, what: str = "", *, where: str = "",
                          fix: str | None = None) -> int | None:
    """None, or an integer ``>= 1``."""
    return None if value is None else positive_int(name, value, what, where=where, fix=fix)


def fraction(name: str, value: object, what: str = "", *, where: str = "",
             fix: str | None = None) -> float:
    """A real number in ``[0, 1)`` (an int or float; bools refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidArgumentTypeError(
            f"{_prefix(where, name, value)}{name} must be a fraction in [0, 1){_meaning(what)}, "
            f"got {value!r} ({type(value).__name__}); {fix or f'pass a number such as {name}=0.1'}"
        )
    x = float(value)
    if not 0.0 <= x < 1.0:
        raise InvalidArgumentError(
            f"{_prefix(where, name, value)}{name} must be a fraction in [0, 1){_meaning(what)}, "
            f"got {value!r}; {fix or f'pass a number such as {name}=0.1'}"
        )
    return x


def one_of(name: str, value: T, choices: Collection[Any], *, where: str = "") -> T:
    """``value`` if it is one of ``choices`` (compared with ``==``)."""
    try:
        ok = any(value is c or value == c for c in choices)
    except (TypeError, ValueError):  # an array compared with a string: not one of them
        ok = False
    if not ok:
        raise InvalidArgumentError(
            f"{_prefix(where, name, value)}{name} must be one of {tuple(choices)!r}, got {value!r}"
        )
    return value


def callable_or_none(name: str, value: T, what: str, *, where: str = "") -> T:
    """``value`` if it is None or callable; ``what`` says what it is called with and returns."""
    if value is not None and not callable(value):
        raise InvalidArgumentTypeError(
            f"{_prefix(where, name, value)}{name} must be callable ({what}) or None, "
            f"got {value!r} ({type(value).__name__})"
        )
    return value


def require_callable(name: str, value: object, what: str, *, where: str = "") -> Callable[..., Any]:
    """``value`` if it is callable (None refused)."""
    if not callable(value):
        raise InvalidArgumentTypeError(
            f"{_prefix(where, name, value)}{name} must be callable ({what}), "
            f"got {value!r} ({type(value).__name__})"
        )
    return value
