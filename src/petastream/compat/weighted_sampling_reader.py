"""``petastorm.weighted_sampling_reader``: mix several readers, each next element drawn from
one of them with the given probabilities (normalized), until one of them runs out.

The readers must all yield rows (``make_reader``) or all batches (``make_batch_reader``), of the
same fields. ``seed`` (petastream's) makes the draws reproducible; Petastorm draws from numpy's
global generator (which ``seed=None`` does too).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from petastream.errors import InvalidArgumentError

__all__ = ["WeightedSamplingReader"]


def _field_names(reader: Any) -> set[str]:
    schema = getattr(reader, "schema", None)
    if schema is not None and hasattr(schema, "fields"):
        return set(schema.fields)
    return set(reader.schema_fields)


class WeightedSamplingReader:
    def __init__(self, readers: Sequence[Any], probabilities: Sequence[float], seed: int | None = None):
        if len(readers) <= 1:
            raise ValueError(f"Two or more readers must be specified. Got {len(readers)}.")
        if len(readers) != len(probabilities):
            raise ValueError("readers and probabilities are expected to be lists of the same length")
        weights = np.asarray(probabilities, dtype=np.float64)
        if (weights < 0).any() or weights.sum() <= 0:
            raise InvalidArgumentError(f"probabilities must be >= 0 with a positive sum, got {list(probabilities)}")
        self._readers = list(readers)
        self._cum_prob = np.cumsum(weights / weights.sum())
        first = self._readers[0]
        for other in self._readers[1:]:
            if first.batched_output != other.batched_output:
                raise ValueError('All readers passed to WeightedSamplingReader should have the same value of '
                                 '"batched_output" attribute')
            if _field_names(first) != _field_names(other):
                raise ValueError("All readers passed to WeightedSamplingReader should have the same schema")
            if getattr(first, "ngram", None) != getattr(other, "ngram", None):
                raise ValueError("All readers passed to WeightedSamplingReader should have the same ngram spec")
        self.batched_output = first.batched_output
        self.is_batched_reader = getattr(first, "is_batched_reader", self.batched_output)
        self.ngram = getattr(first, "ngram", None)
        self.schema = getattr(first, "schema", None)
        self.seed = seed
        self._random = np.random.default_rng(seed) if seed is not None else None
        self._iters: list[Iterator[Any] | None] = [None] * len(self._readers)

    def __iter__(self) -> WeightedSamplingReader:
        return self

    def __next__(self) -> Any:
        r = self._random.random() if self._random is not None else np.random.random()
        index = int(np.searchsorted(self._cum_prob, r, side="right"))
        index = min(index, len(self._readers) - 1)
        it = self._iters[index]
        if it is None:
            it = self._iters[index] = iter(self._readers[index])
        return next(it)

    def next(self) -> Any:
        return self.__next__()

    @property
    def last_row_consumed(self) -> bool:
        return any(r.last_row_consumed for r in self._readers)

    @property
    def stopped(self) -> bool:
        return any(getattr(r, "stopped", False) for r in self._readers)

    def reset(self) -> None:
        for reader in self._readers:
            if reader.last_row_consumed:
                reader.reset()
        self._iters = [None] * len(self._readers)

    def stop(self) -> None:
        for reader in self._readers:
            reader.stop()

    def join(self) -> None:
        for reader in self._readers:
            reader.join()

    def __enter__(self) -> WeightedSamplingReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.join()
