"""Petastorm's ``DataLoader(reader, collate_fn=fn)`` with a ``fn`` of your own.

Petastorm's loader cuts each batch into row dicts (numpy values, as its reader gives them) and
calls ``collate_fn`` on every ``batch_size`` rows in the iterating thread; so does this one (a
lambda works, and the function sees what it saw under Petastorm). The default collate is done
in bulk by :class:`~petastream.torch.TorchLoader` instead.
"""

from __future__ import annotations

from typing import Any

from petastream.pipeline import MappedRun
from petastream.torch import TorchLoader

__all__ = ["CollatingLoader", "rows"]


def rows(batch: dict[str, Any]) -> list[dict[str, Any]]:
    """A batch of columns as the list of row dicts Petastorm hands to ``collate_fn``."""
    names = list(batch)
    n = len(batch[names[0]]) if names else 0
    return [{name: batch[name][i] for name in names} for i in range(n)]


class CollatingLoader(TorchLoader):
    """Numpy batches from the workers, cut into rows and collated by the user's function."""

    def __init__(self, dataset: Any, collate_fn: Any, **kwargs: Any):
        super().__init__(dataset, **kwargs)
        self._convert = None  # rows are cut from numpy columns, as Petastorm's reader gives them
        self.collate_fn = collate_fn

    def _stage(self, run: Any) -> Any:
        fn = self.collate_fn
        return MappedRun(super()._stage(run), lambda batch: fn(rows(batch)))
