"""The :class:`~petastream.tf.TFLoader` behind ``make_tf_dataset``: Petastorm's elements and
its stopped reader (imports TensorFlow; :mod:`petastream.compat._tf` loads it on first use)."""

from __future__ import annotations

from typing import Any

from petastream.compat.reader import _STOPPED
from petastream.pipeline import MappedRun
from petastream.tf import TFLoader

__all__ = ["ReaderLoader"]


class ReaderLoader(TFLoader):
    """Reads ``reader``'s plan; elements are its ``Row`` namedtuples, and a batch read after
    the reader stopped (its context exited) raises Petastorm's error."""

    def __init__(self, reader: Any, **kwargs: Any):
        self.reader = reader
        super().__init__(reader.dataset, **kwargs)

    def _stage(self, run: Any) -> Any:
        return MappedRun(super()._stage(run), self._unless_stopped)

    def _unless_stopped(self, batch: Any) -> Any:
        if self.reader.stopped:
            raise RuntimeError(_STOPPED)
        return batch

    def _element(self, columns: dict[str, Any]) -> Any:
        return self.reader.Row(**columns)  # once per hand-over (a group of batches), not a .map per batch
