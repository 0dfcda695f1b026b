"""``petastorm.test_util.reader_mock``: a reader that makes up rows from a Unischema, for
testing training code without a dataset."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np

from petastream.compat.unischema import Unischema

__all__ = ["ReaderMock", "schema_data_generator_example"]


class ReaderMock:
    """Endless rows of ``schema``: each ``next()`` is ``schema.make_namedtuple(**generator(schema))``.

    It stands where a ``make_reader`` reader does: an iterator, a context manager, ``stop()`` and
    ``join()``, and ``tf_utils.tf_tensors``/``make_petastorm_dataset`` take it (a row reader).
    """

    def __init__(self, schema: Unischema, schema_data_generator: Callable[[Unischema], dict[str, Any]],
                 ngram: Any = None) -> None:
        if ngram is not None:
            # Petastorm parity (its text)
            raise ValueError("Sequence argument not supported for ReaderMock")
        self.schema = schema
        self.schema_data_generator = schema_data_generator
        self.ngram = ngram
        self.batched_output = False  # Petastorm's attribute
        self.is_batched_reader = False  # what compat's tf_utils asks a reader

    def fetch(self) -> Any:
        """One made-up row, the schema's namedtuple."""
        return self.schema.make_namedtuple(**self.schema_data_generator(self.schema))

    def __iter__(self) -> ReaderMock:
        return self

    def __next__(self) -> Any:
        return self.fetch()

    next = __next__

    def __enter__(self) -> ReaderMock:
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        return None

    def stop(self) -> None:
        return None

    def join(self) -> None:
        return None


def schema_data_generator_example(schema: Unischema) -> dict[str, Any]:
    """Zeros of every field's dtype and shape (a ``None`` dimension is 10); ``Decimal('0.0')``
    for decimal fields."""
    values: dict[str, Any] = {}
    for field in schema.fields.values():
        if field.numpy_dtype is Decimal:
            values[field.name] = Decimal("0.0")
        else:
            shape = tuple(10 if dim is None else dim for dim in field.shape)
            values[field.name] = np.zeros(shape, dtype=field.numpy_dtype)
    return values
