"""``make_reader``'s NGram windows, made in the reader from the loader's batches.

Petastorm forms windows within one row group (a worker's item), never across two. Here the
loader reads whole row groups in order (``window=1``, blocks of whole shards), so each row
group's rows arrive as one contiguous run; which row group a row came from is told by its sample
id (the pass's plan: ``plan.batch(t)``, narrowed to the rows the work stage kept,
:data:`~petastream.compat._row_work.KEPT`) against the source's shard offsets. A run's windows
are made when the run ends (the next row group starts, the pass or the read ends).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from petastream.compat._row_work import KEPT

__all__ = ["NGramWindows"]


class NGramWindows:
    def __init__(self, ngram: Any, schema: Any, shard_offsets: np.ndarray, shuffle_rows: bool = False,
                 seed: int | None = None):
        self.ngram, self.schema = ngram, schema
        #: ``shuffle_rows``: each row group's rows permuted before its windows are made, as
        #: Petastorm's worker does (and, as Petastorm, refused by the NGram's order check).
        self._rng = np.random.default_rng(seed) if shuffle_rows else None
        self._offsets = np.asarray(shard_offsets)
        self._fields = list(schema.fields)
        self._plans: deque[Any] = deque()  # passes started, in order (the loader's work stage adds them)
        self._plan: Any = None
        self._t = 0  # the next batch of the current pass
        self._shard = -1
        self._pending: list[dict[str, Any]] = []  # the rows of the current run

    def add_plan(self, plan: Any) -> None:
        self._plans.append(plan)

    def take(self, batch: dict[str, Any]) -> list[Any]:
        """The windows completed by this batch's rows (see the module doc)."""
        out: list[Any] = []
        if self._plan is None or self._t >= self._plan.num_batches:
            out = self.flush()  # a new pass: no window spans two
            self._plan, self._t = self._plans.popleft(), 0
        ids = np.asarray(self._plan.batch(self._t))[batch[KEPT]]
        self._t += 1
        shards = np.searchsorted(self._offsets, ids, side="right") - 1
        columns = [batch[k] for k in self._fields]
        for shard, values in zip(shards.tolist(), zip(*columns)):
            if shard != self._shard:
                out += self.flush()
                self._shard = shard
            self._pending.append(dict(zip(self._fields, values)))
        return out

    def flush(self) -> list[Any]:
        """The windows of the current run, which ends here."""
        rows, self._pending, self._shard = self._pending, [], -1
        if not rows:
            return []
        if self._rng is not None:
            rows = [rows[i] for i in self._rng.permutation(len(rows))]
        return [self.ngram.make_namedtuple(self.schema, w) for w in self.ngram.form_ngram(rows, self.schema)]
