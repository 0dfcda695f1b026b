"""``Stream``: one dataset of a mixture, and how many of its samples an epoch takes.

The per-epoch count of each stream is fixed (the same every epoch), so the mixture's sample
space has one size and the planner one order over it; which samples fill a count varies by
epoch (see :mod:`petastream.mix.source`). The counts:

* ``choose=k``: ``k`` samples.
* ``repeat=r``: ``floor(r * size + 1/2)`` samples (round half up), ``r >= 0``.
* ``weight=w``: a share of the epoch: ``E * w / sum(w)`` by the largest-remainder rule (each
  stream gets the floor of its quota, the samples left over go one each to the largest
  fractional parts, ties to the earlier stream), so the counts add up to ``E`` exactly.
  ``E`` is ``epoch_size`` if given, else the sum of the streams' sizes. Weights are on every
  stream of a mixture or on none.
* none of them: the whole stream once (``repeat=1``).

Quotas are computed in exact rational arithmetic (``fractions.Fraction`` of the floats given),
so counts are the same on every machine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from petastream.checks import nonnegative_int
from petastream.errors import InvalidArgumentError

__all__ = ["Stream", "epoch_counts", "largest_remainder"]


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InvalidArgumentError(f"Stream {name} must be a finite number >= 0, got {value!r}")
    return value


@dataclass(frozen=True)
class Stream:
    """A dataset (URL, path or :class:`~petastream.source.Source`) in a mixture, with at most
    one of ``weight``, ``repeat`` and ``choose`` (see the module doc); ``dataset_options``:
    how its URL is opened (see :class:`~petastream.mds.dataset.MDSDataset`)."""

    url_or_source: Any
    weight: float | None = None
    repeat: float | None = None
    choose: int | None = None
    dataset_options: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        given = [k for k in ("weight", "repeat", "choose") if getattr(self, k) is not None]
        if len(given) > 1:
            raise InvalidArgumentError(
                f"Stream({self.url_or_source!r}) has {' and '.join(given)}: give at most one of "
                "weight (share of the epoch), repeat (copies of the stream) and choose (samples)")
        if self.weight is not None:
            _number("weight", self.weight)
        if self.repeat is not None:
            _number("repeat", self.repeat)
        if self.choose is not None and (isinstance(self.choose, bool) or not isinstance(self.choose, int)
                                        or self.choose < 0):
            raise InvalidArgumentError(f"Stream choose must be an int >= 0 (samples per epoch), got {self.choose!r}")


def largest_remainder(total: int, quotas: Sequence[Fraction]) -> list[int]:
    """``total`` split in proportion to ``quotas`` (exact): floors, then one more each to the
    largest fractional parts (ties: the earlier one). The result adds up to ``total``."""
    whole = sum(quotas, Fraction(0))
    if whole == 0:
        return [0] * len(quotas)
    exact = [q * total / whole for q in quotas]
    counts = [math.floor(x) for x in exact]
    left = total - sum(counts)
    ranked = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in ranked[:left]:
        counts[i] += 1
    return counts


def epoch_counts(streams: Sequence[Stream], sizes: Sequence[int], epoch_size: int | None = None) -> list[int]:
    """Samples each stream contributes to every epoch (see the module doc)."""
    weighted = [s.weight is not None for s in streams]
    if any(weighted) and not all(weighted):
        raise InvalidArgumentError(
            f"streams {[i for i, w in enumerate(weighted) if not w]} have no weight while others do: "
            "give every stream of a mixture a weight, or none (use repeat/choose instead)")
    if epoch_size is not None:
        nonnegative_int("epoch_size", epoch_size, "samples per epoch")
        if not all(weighted):
            raise InvalidArgumentError(
                f"epoch_size={epoch_size} splits an epoch by weight: give every Stream a weight, or "
                "drop epoch_size (repeat/choose streams fix their own counts)")
    if all(weighted) and streams:
        weights = [Fraction(s.weight) for s in streams]  # type: ignore[arg-type]
        if sum(weights) == 0:
            raise InvalidArgumentError("Stream weights add up to 0: give at least one a weight > 0")
        return largest_remainder(sum(sizes) if epoch_size is None else epoch_size, weights)
    counts = []
    for s, n in zip(streams, sizes):
        if s.choose is not None:
            counts.append(s.choose)
        else:
            r = Fraction(1 if s.repeat is None else s.repeat)
            counts.append(math.floor(r * n + Fraction(1, 2)))
    return counts
