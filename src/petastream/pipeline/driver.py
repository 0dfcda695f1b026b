"""The epoch driver: what one ``iter(loader)`` means, for every loader.

Every loader (native torch in threads or processes, TensorFlow, compat) is an
:class:`EpochDriver` over a :class:`~petastream.stream.StreamPlanner` (order and position) and a
``run_pass(plan)`` that produces one pass's batches in plan order (decode → transform →
convert → parallel execution → device staging; see :mod:`petastream.pipeline`). The driver owns
the iteration contract, as PyTorch's ``DataLoader`` and torchdata's ``StatefulDataLoader``
define it:

* **each ``iter(loader)`` is a new epoch**, complete and exactly once: the epoch after the one
  the previous iteration was in, whether that iteration finished or was broken off (the rest
  of a broken-off epoch is dropped, as a ``DataLoader`` drops it). An iteration runs
  ``num_epochs`` epochs back to back (``None``: forever).
* ``set_epoch(e)`` makes the next iteration epoch ``e`` from its start. After
  ``load_state_dict(state)`` the next iteration is the rest of the saved epoch (or the next
  epoch, if the saved one was complete); ``set_epoch`` to that same epoch keeps the position,
  so ``load_state_dict`` followed by the usual ``set_epoch`` call still resumes.
* ``len(loader)`` is the number of batches a full iteration yields (per rank); a resumed
  iteration yields the rest of it (Lightning counts the done batches itself). A loader that
  repeats forever has no length (``TypeError``, like any unsized iterable).
* ``state_dict()`` counts a batch as consumed when it is handed out; ``state_dict(steps=k)`` is
  the position after the first ``k`` batches of the current iteration, for consumers that read
  ahead of the training step (tf.data prefetch, Keras).
* one iteration at a time: a newer ``iter()``, ``set_epoch`` or ``load_state_dict`` takes the
  position over and stops the older iteration's workers; pulling from the older iterator then
  raises (``superseded="raise"``) or ends it (``"stop"``, for tf.data, which may open the next
  epoch's iterator before it finalizes the last one).
* an epoch that cannot yield a batch raises :class:`InvalidArgumentError` at ``iter()`` instead
  of looping on nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from petastream.errors import InvalidArgumentError, SupersededError, UnsizedError
from petastream.stream import EpochPlan, StreamPlanner

__all__ = ["EpochDriver", "PassRun", "SupersededError"]


class PassRun(Protocol):
    """One pass's batches in plan order; ``close()`` stops its workers (idempotent)."""

    def __iter__(self) -> Iterator[Any]: ...

    def __next__(self) -> Any: ...

    def close(self) -> None: ...


_SUPERSEDED = ("this iteration of the loader was superseded: a newer iter(), set_epoch() or "
               "load_state_dict() on the same loader took its position over. A loader runs one "
               "iteration at a time; iterate it again for the next epoch")


class EpochDriver:
    def __init__(self, planner: StreamPlanner, run_pass: Callable[[EpochPlan], PassRun], *,
                 num_epochs: int | None = 1, superseded: str = "raise",
                 on_end: Callable[[], None] | None = None):
        if num_epochs is not None and (isinstance(num_epochs, bool) or not isinstance(num_epochs, int)
                                       or num_epochs < 1):
            raise InvalidArgumentError(f"num_epochs must be a positive int or None (forever), got {num_epochs!r}")
        if superseded not in ("raise", "stop"):
            raise InvalidArgumentError(f"superseded must be 'raise' or 'stop', got {superseded!r}")
        self.planner = planner
        self.num_epochs = num_epochs
        self._run_pass = run_pass
        self._on_end = on_end  # when an iteration ends (finished, broken off or superseded)
        self._superseded = superseded
        self._fresh = True  # the position was set explicitly and no iteration has used it yet
        self._generation = 0
        self._active: PassRun | None = None
        self._lock = threading.Lock()
        self._iteration_start = planner.state_dict()
        self._handed = 0  # batches the current iteration has handed out

    # -- sizes --------------------------------------------------------------------------------
    @property
    def batches_per_epoch(self) -> int:
        return self.planner.batches_per_epoch

    def __len__(self) -> int:
        if self.num_epochs is None:
            raise UnsizedError(f"this loader repeats forever (num_epochs=None), so it has no length; "
                            f"an epoch is {self.batches_per_epoch} batches (loader.batches_per_epoch)")
        return self.batches_per_epoch * self.num_epochs

    def next_iteration_len(self) -> int | None:
        """Batches the next ``iter()`` will yield (None: forever)."""
        if self.num_epochs is None:
            return None
        p = self.planner
        first = p.num_batches if self._fresh and not p.epoch_complete else p.batches_per_epoch
        return first + (self.num_epochs - 1) * p.batches_per_epoch

    # -- position -----------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        self._supersede()
        p = self.planner
        if not (self._fresh and epoch == p.epoch):  # same epoch after load_state_dict: keep it
            p.start_epoch(epoch)
        self._fresh = True

    def state_dict(self, steps: int | None = None) -> dict[str, Any]:
        if steps is None:
            return self.planner.state_dict()
        if isinstance(steps, bool) or not isinstance(steps, int) or not 0 <= steps <= self._handed:
            raise InvalidArgumentError(
                f"steps must be an int in [0, {self._handed}] (the batches this iteration has "
                f"handed out so far), got {steps!r}")
        p = self.planner
        replay = StreamPlanner(p.shard_sizes, p.batch_size, shuffle=p.shuffle, seed=p.seed,
                               block_size=p.block_size, window=p.window, world_size=p.world_size,
                               rank=p.rank, drop_last=p.drop_last)
        replay.load_state_dict(self._iteration_start)
        while steps:  # the passes this iteration made: a complete epoch moves on to the next
            if replay.epoch_complete:
                replay.start_epoch(replay.epoch + 1)
            n = min(steps, replay.num_batches)
            replay.advance(n)
            steps -= n
        return replay.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._supersede()
        self.planner.load_state_dict(state)
        self._fresh = True
        self._iteration_start, self._handed = self.planner.state_dict(), 0

    # -- iteration ----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        self.check_nonempty()
        self._supersede()
        with self._lock:
            p = self.planner
            if not self._fresh or p.epoch_complete:
                p.start_epoch(p.epoch + 1)
            self._fresh = False
            self._iteration_start, self._handed = p.state_dict(), 0
            me = self._generation
        return self._iterate(me)

    def _iterate(self, me: int) -> Iterator[Any]:
        passes, run = 0, None
        try:
            while self.num_epochs is None or passes < self.num_epochs:
                if passes:
                    self.planner.start_epoch(self.planner.epoch + 1)
                run = self._run_pass(self.planner.plan())
                with self._lock:
                    if me != self._generation:
                        break
                    self._active = run
                for batch in run:
                    n = getattr(batch, "num_batches", 1)  # a BatchGroup hands over several
                    with self._lock:
                        if me != self._generation:
                            break
                        self.planner.advance(n)  # consumed once handed out
                        self._handed += n
                    yield batch
                run.close()
                if me != self._generation:
                    break
                passes += 1
            else:
                return
            if self._superseded == "raise":
                raise SupersededError(_SUPERSEDED)
        finally:
            if run is not None:
                run.close()
            with self._lock:
                if self._active is run:
                    self._active = None
                idle = self._active is None
            if idle and self._on_end is not None:
                self._on_end()

    def _supersede(self) -> None:
        with self._lock:
            self._generation += 1
            run, self._active = self._active, None
        if run is not None:
            run.close()

    def check_nonempty(self) -> None:
        p = self.planner
        if p.batches_per_epoch:
            return
        if p.num_samples == 0:
            raise InvalidArgumentError("the dataset has no rows, so an epoch has no batch to yield")
        raise InvalidArgumentError(
            f"an epoch of {p.num_samples} rows makes no batch of batch_size={p.batch_size} x "
            f"world_size={p.world_size} ranks with drop_last={p.drop_last}; use a smaller "
            "batch_size or drop_last=False")
