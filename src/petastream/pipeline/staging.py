"""Consumer-side stages: run in the thread that iterates the loader, after the workers.

A stage wraps a pass's :class:`~petastream.pipeline.driver.PassRun` and is one too: it keeps
``close()`` reaching the workers underneath, so a ``break`` or a newer iteration stops them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["MappedRun"]


class MappedRun:
    """``fn(batch)`` for each batch of ``run``, in the consumer's thread.

    For what must not run in a worker: Petastorm's ``collate_fn`` and ``transform_fn`` (often
    lambdas, run in the main process as Petastorm runs them), checks of the consumer's state.
    """

    def __init__(self, run: Any, fn: Callable[[Any], Any]):
        self._run, self._fn = run, fn

    def __iter__(self) -> MappedRun:
        return self

    def __next__(self) -> Any:
        return self._fn(next(self._run))

    def close(self) -> None:
        self._run.close()
