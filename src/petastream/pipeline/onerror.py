"""``on_error``: what a loader does with a sample it cannot decode or transform.

The idioms are webdataset's ``handler=`` (reraise, warn and continue, ignore) and tf.data's
``ignore_errors``; here one value, :class:`ErrorPolicy`, made from the loader's ``on_error``:

* ``"raise"`` (default): the sample's error is raised, its own type kept (code matching on it
  keeps working), with a note naming where it was: the dataset, the shard (a Parquet source's
  row group), the row in it and the sample's id, the column where one column alone fails;
* ``"skip"``: the sample is left out of its batch (the batch comes out that much shorter),
  counted, and logged at WARNING on the first skip and every ``LOG_EVERY``-th after it;
* ``"warn"``: as ``"skip"``, and every skipped sample's error is logged at WARNING;
* a callable ``fn(bad: BadSample) -> bool``: True skips (as ``"skip"``), False raises.

The policy is applied in the workers (it pickles with the pass); what was skipped travels to
the loader with the batch it was missing from (:mod:`petastream.pipeline.reports`), where it
is counted, logged, and recorded in ``state_dict()`` so that a resumed epoch leaves the same
samples out. How a failing sample is found in a bulk read or a batch transform is
:mod:`petastream.pipeline.isolate`'s part.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from petastream.errors import InvalidArgumentError

__all__ = ["BadSample", "ErrorPolicy", "LOG_EVERY", "OnError", "SkipLedger", "ranges_of", "ids_of_ranges"]

log = logging.getLogger("petastream.pipeline")

POLICIES = ("raise", "skip", "warn")
LOG_EVERY = 100  # a skip is logged the first time and every 100th time after it


@dataclass(frozen=True)
class BadSample:
    """Where a sample failed, and how. ``ids``: the global sample ids left out (several when a
    whole shard's part of a read failed, ``whole_shard``); ``rows``: the same rows within the
    shard; ``column``: the one column whose read alone fails (None: unknown, or all)."""

    stage: str  # "decode" or "transform"
    dataset: str
    ids: tuple[int, ...]
    shard: int | None = None
    rows: tuple[int, ...] = ()
    column: str | None = None
    error_type: str = ""
    error_text: str = ""
    whole_shard: bool = False

    def where(self) -> str:
        """``dataset '...', shard 3, row 17 (sample id 317), column 'image'``."""
        out = [f"dataset {self.dataset!r}"]
        if self.shard is not None:
            out.append(f"shard (or row group) {self.shard}")
        if self.whole_shard:
            out.append(f"all {len(self.ids)} rows read from it (ids {_span(self.ids)})")
        elif self.rows:
            out.append(f"row {self.rows[0]} (sample id {self.ids[0]})")
        elif self.ids:
            out.append(f"sample id {self.ids[0]}")
        if self.column is not None:
            out.append(f"column {self.column!r}")
        return ", ".join(out)

    def describe(self) -> str:
        return f"{self.stage} failed at {self.where()}: {self.error_type}: {self.error_text}"


def _span(ids: tuple[int, ...]) -> str:
    return f"{ids[0]}..{ids[-1]}" if len(ids) > 1 else str(ids[0]) if ids else "-"


OnError = str | Callable[[BadSample], bool]


class ErrorPolicy:
    """A loader's ``on_error``, checked; :meth:`handle` applies it to one failure."""

    def __init__(self, on_error: OnError = "raise"):
        if not (on_error in POLICIES or callable(on_error)):
            raise InvalidArgumentError(
                f"on_error must be 'raise', 'skip', 'warn' or a callable BadSample -> bool "
                f"(True: skip it), got {on_error!r}")
        self.on_error = on_error

    @property
    def may_skip(self) -> bool:
        """Whether any sample may be left out (batches then may come out short)."""
        return self.on_error != "raise"

    def handle(self, bad: BadSample, error: BaseException) -> None:
        """Return if ``bad`` is to be skipped; else raise ``error`` with a note saying where."""
        fn = self.on_error
        if fn == "raise" or (callable(fn) and not fn(bad)):
            _add_note(error, f"petastream: {bad.stage} failed at {bad.where()} "
                             "(on_error='skip' or 'warn' would leave the sample out and count it)")
            raise error


def _add_note(error: BaseException, note: str) -> None:
    notes = getattr(error, "__notes__", None)
    if notes is not None and note in notes:
        return  # re-raised through several stages: once is enough
    if hasattr(error, "add_note"):
        error.add_note(note)
    else:  # Python 3.10: no add_note, the attribute alone
        error.__notes__ = [*(notes or []), note]  # type: ignore[attr-defined]


class SkipLedger:
    """The loader's record of skipped samples: their ids (for ``state_dict``), the count, and
    the log lines (in the loader's process)."""

    def __init__(self, on_error: OnError = "raise"):
        self.on_error = on_error
        self.ids: set[int] = set()
        self.count = 0  # samples skipped (a sample skipped in two epochs counts twice)

    def record(self, bads: Iterable[BadSample]) -> None:
        for bad in bads:
            self.ids.update(bad.ids)
            before, self.count = self.count, self.count + len(bad.ids)
            if self.on_error == "warn":
                log.warning("on_error='warn': skipped %d sample(s): %s", len(bad.ids), bad.describe())
            if before == 0 or before // LOG_EVERY != self.count // LOG_EVERY:
                log.warning("skipped %d sample(s) so far that failed to decode or transform (latest: %s)",
                            self.count, bad.describe())

    def known(self) -> np.ndarray:
        """The skipped ids, sorted (what a pass leaves out before reading)."""
        return np.fromiter(sorted(self.ids), np.int64, len(self.ids))

    def state(self) -> list[list[int]]:
        return ranges_of(self.known())

    def load(self, ranges: Any) -> None:
        self.ids = set(ids_of_ranges(ranges).tolist())


def ranges_of(ids: np.ndarray) -> list[list[int]]:
    """Sorted unique ids as ``[[start, stop), ...]`` (small in a JSON state)."""
    if ids.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(ids) != 1) + 1
    starts = np.concatenate([[0], breaks])
    stops = np.concatenate([breaks, [ids.size]])
    return [[int(ids[a]), int(ids[b - 1]) + 1] for a, b in zip(starts, stops)]


def ids_of_ranges(ranges: Any) -> np.ndarray:
    """The inverse of :func:`ranges_of`; checks the shape."""
    try:
        parts = [np.arange(int(a), int(b), dtype=np.int64) for a, b in ranges]
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"state['skipped'] must be a list of [start, stop) id ranges from state_dict(), got {ranges!r}") from None
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
