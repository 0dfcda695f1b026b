"""Petastorm's ``DataLoader(reader, collate_fn=fn)`` with a ``fn`` of your own.

Petastorm's loader cuts each batch into row dicts (numpy values, as its reader gives them) and
calls ``collate_fn`` on every ``batch_size`` rows in the iterating thread; so does this one (a
lambda works, and the function sees what it saw under Petastorm). The default collate is done
in bulk by :class:`~petastream.torch.TorchLoader` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from petastream.pipeline import MappedRun
from petastream.torch import TorchLoader

__all__ = ["collating_loader", "rows"]


def rows(batch: dict[str, Any]) -> list[dict[str, Any]]:
    """A batch of columns as the list of row dicts Petastorm hands to ``collate_fn``."""
    names = list(batch)
    n = len(batch[names[0]]) if names else 0
    return [{name: batch[name][i] for name in names} for i in range(n)]


def collating_loader(dataset: Any, collate_fn: Callable[[list[dict[str, Any]]], Any], **kwargs: Any) -> TorchLoader:
    """A :class:`~petastream.torch.TorchLoader` handing out numpy batches (as Petastorm's reader
    gives them), cut into rows and collated by ``collate_fn`` in the iterating thread."""
    loader = TorchLoader(dataset, convert=None, **kwargs)
    loader.stages.append(lambda run: MappedRun(run, lambda batch: collate_fn(rows(batch))))
    return loader
