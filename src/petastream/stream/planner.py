"""The stateful planner a loader owns: epoch, progress, checkpoints.

Loader protocol (one copy of this logic for the torch and tf loaders)::

    plan = planner.begin_pass()                      # at the start of every iteration
    # each worker w of W (or thread):   for chunk in plan.chunks(w, W): decode, yield batches
    # main process, per batch handed to the user:   planner.advance(1)
    # checkpoint: planner.state_dict() / planner.load_state_dict(state)

Progress is counted in *global samples*: ``samples_consumed`` is how many positions of the
epoch's order G are done (``batches * batch_size * world_size``, capped at N). Because G does not
depend on the layout, a state resumes on any world size, batch size and worker count: the next
pass re-batches G from ``samples_consumed`` on, so no sample is lost or repeated. With the same
global batch size the batches are exactly those the uninterrupted run would have produced; with
a different one, batching restarts at that point (the grid shifts, the sample stream does not).
Padding (see :mod:`petastream.stream.partition`) is not progress: it is recomputed by each pass.

Epochs: ``set_epoch(e)`` to a new epoch starts it from the beginning; to the current epoch it
keeps the progress (so the usual ``set_epoch`` call after ``load_state_dict`` resumes).
``begin_pass`` moves to the next epoch when the current one is complete, so loops that never
call ``set_epoch`` still see a fresh epoch (with a new order) on each iteration, never an empty
one. A complete epoch stays complete in ``state_dict`` until the next pass begins.

A state records the order's keys (``block_size`` and ``window`` among them). When the caller
chose neither (``adopt_order=True``: a loader that sized the window to its shard cache, see
:mod:`petastream.stream.budget`), a state saved with other values resumes with the saved ones,
so the resumed run reads exactly the order the interrupted one would have; otherwise a
different value is an error, never a silent change of order.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from petastream.checks import as_int, nonnegative_int, positive_int
from petastream.errors import InvalidArgumentError, InvalidArgumentTypeError
from petastream.stream._checks import rank_in_world
from petastream.stream.grouping import shard_offsets
from petastream.stream.order import DEFAULT_BLOCK_SIZE, DEFAULT_WINDOW, EpochOrder
from petastream.stream.partition import count_batches
from petastream.stream.plan import Chunk, EpochPlan

__all__ = ["STATE_FORMAT", "STATE_VERSION", "StreamPlanner"]

log = logging.getLogger("petastream.stream")

STATE_FORMAT = "petastream.stream"
STATE_VERSION = 1
# Keys that define G: a state saved with other values would resume into a different order.
_ORDER_KEYS = ("num_samples", "shards_digest", "shuffle", "seed", "block_size", "window")
_ADOPTABLE = ("block_size", "window")  # chosen for the run (adopt_order): a saved state's values win


class StreamPlanner:
    """Sample order, partition and resumable progress for one rank of a streamed MDS dataset."""

    def __init__(
        self,
        shard_sizes: Sequence[int] | np.ndarray,
        batch_size: int,
        *,
        shuffle: bool = False,
        seed: int = 0,
        epoch: int = 0,
        block_size: int = DEFAULT_BLOCK_SIZE,
        window: int = DEFAULT_WINDOW,
        world_size: int = 1,
        rank: int = 0,
        drop_last: bool = False,
        adopt_order: bool = False,
    ) -> None:
        self.adopt_order = bool(adopt_order)
        self._order = EpochOrder(
            shard_sizes, shuffle=shuffle, seed=seed, epoch=epoch,
            block_size=block_size, window=window,
        )  # fmt: skip
        self.batch_size = positive_int("batch_size", batch_size, "samples per rank per batch")
        self.rank, self.world_size = rank_in_world(rank, world_size)
        self.drop_last = bool(drop_last)
        self._consumed = 0
        self._offsets = shard_offsets(self._order.shard_sizes)
        sizes = self._order.shard_sizes.astype("<i8").tobytes()
        self._digest = hashlib.blake2b(sizes, digest_size=8).hexdigest()

    def __repr__(self) -> str:
        return (
            f"StreamPlanner(num_samples={self.num_samples}, batch_size={self.batch_size}, "
            f"shuffle={self.shuffle}, seed={self.seed}, epoch={self.epoch}, "
            f"samples_consumed={self._consumed}, world_size={self.world_size}, "
            f"rank={self.rank}, drop_last={self.drop_last})"
        )

    # -- read-only facts ----------------------------------------------------------------------
    @property
    def shard_sizes(self) -> np.ndarray:
        return self._order.shard_sizes

    @property
    def shard_offsets(self) -> np.ndarray:
        """Length ``num_shards + 1``; shard i holds global ids ``[off[i], off[i+1])``."""
        return self._offsets

    @property
    def num_samples(self) -> int:
        return self._order.num_samples

    @property
    def shuffle(self) -> bool:
        return self._order.shuffle

    @property
    def seed(self) -> int:
        return self._order.seed

    @property
    def block_size(self) -> int:
        return self._order.block_size

    @property
    def window(self) -> int:
        return self._order.window

    @property
    def epoch(self) -> int:
        return self._order.epoch

    @property
    def samples_consumed(self) -> int:
        """Positions of this epoch's G already consumed, in global samples."""
        return self._consumed

    @property
    def global_batch_size(self) -> int:
        return self.batch_size * self.world_size

    @property
    def num_batches(self) -> int:
        """Batches per rank left in the current epoch (all ranks get the same number)."""
        return self._count(self._consumed)

    @property
    def batches_per_epoch(self) -> int:
        """Batches per rank in a whole epoch (what ``len(loader)`` reports)."""
        return self._count(0)

    @property
    def epoch_complete(self) -> bool:
        return self._count(self._consumed) == 0

    # -- moving -------------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Go to ``epoch``: from its start, or, if it is the current epoch, where it stands."""
        epoch = nonnegative_int("epoch", epoch, "the epoch number")
        if epoch != self.epoch:
            self._goto(epoch, 0)

    def start_epoch(self, epoch: int) -> None:
        """Go to the start of ``epoch``, also when it is the current one."""
        self._goto(nonnegative_int("epoch", epoch, "the epoch number"), 0)

    def plan(self) -> EpochPlan:
        """A snapshot of the rest of the current epoch for this rank (no side effect)."""
        return EpochPlan(
            self._order, batch_size=self.batch_size, world_size=self.world_size,
            rank=self.rank, drop_last=self.drop_last, start=self._consumed,
        )  # fmt: skip

    def begin_pass(self) -> EpochPlan:
        """Call at the start of each iteration: moves on if the epoch is complete, then plans."""
        if self.epoch_complete:
            self._goto(self.epoch + 1, 0)
        return self.plan()

    def chunks(
        self, worker_id: int = 0, num_workers: int = 1, *, max_samples: int | None = None,
        first_samples: int | None = None,
    ) -> Iterator[Chunk]:
        """``self.plan().chunks(...)``: the snapshot is taken now, not when iteration starts."""
        return self.plan().chunks(worker_id, num_workers, max_samples=max_samples,
                                  first_samples=first_samples)

    def advance(self, n_batches: int = 1) -> None:
        """Record that ``n_batches`` more batches of this rank were delivered (all ranks in step)."""
        n = nonnegative_int("n_batches", n_batches, "batches delivered since the last call")
        left = self.num_batches
        if n > left:
            raise InvalidArgumentError(
                f"advance(n_batches={n}) is past the end of epoch {self.epoch}: only {left} "
                "batches are left; count only the batches the loader has yielded"
            )
        if n == left:  # complete: the dropped tail (drop_last) is done too
            self._consumed = self.num_samples
        else:
            self._consumed += n * self.global_batch_size

    # -- checkpoints --------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """A small JSON-serialisable state; the same on every rank."""
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "epoch": self.epoch,
            "samples_consumed": self._consumed,
            **self._order_facts(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from :meth:`state_dict` output (possibly saved with another world size,
        batch size or worker count). Raises :class:`~petastream.errors.InvalidArgumentError` (a
        ``ValueError``) if it describes another order."""
        if not isinstance(state, Mapping):
            raise InvalidArgumentTypeError(f"state must be a dict from state_dict(), got {type(state).__name__}")
        if state.get("format") != STATE_FORMAT or state.get("version") != STATE_VERSION:
            raise InvalidArgumentError(
                f"state has format={state.get('format')!r} version={state.get('version')!r}; "
                f"this planner reads format={STATE_FORMAT!r} version={STATE_VERSION}: pass a "
                "dict returned by StreamPlanner.state_dict()"
            )
        mine = self._order_facts()
        keys = _ORDER_KEYS if self.shuffle else ("num_samples", "shards_digest", "shuffle")
        adopted = {}
        for key in keys:
            if self.adopt_order and key in _ADOPTABLE and state.get(key) != mine[key]:
                adopted[key] = positive_int(f"state[{key!r}]", state.get(key), "a shuffle parameter")
                continue
            if state.get(key) != mine[key]:
                raise InvalidArgumentError(
                    f"state was saved with {key}={state.get(key)!r} but this planner has "
                    f"{key}={mine[key]!r}; resuming would give a different sample order. "
                    f"Build the planner with the same dataset and {key}, or start afresh"
                )
        epoch = nonnegative_int("state['epoch']", state.get("epoch"), "the epoch number")
        consumed = as_int("state['samples_consumed']", state.get("samples_consumed"))
        if not 0 <= consumed <= self.num_samples:
            raise InvalidArgumentError(
                f"state['samples_consumed'] is {consumed}, outside [0, {self.num_samples}]; "
                "the state is corrupt or from another dataset"
            )
        if adopted:
            log.info("resuming with the state's %s (this run had chosen %s)", adopted,
                     {k: mine[k] for k in adopted})
            o = self._order
            self._order = EpochOrder(
                o.shard_sizes, shuffle=o.shuffle, seed=o.seed, epoch=o.epoch,
                block_size=adopted.get("block_size", o.block_size),
                window=adopted.get("window", o.window),
            )  # fmt: skip
        self._goto(epoch, consumed)

    # -- internals ----------------------------------------------------------------------------
    def _count(self, start: int) -> int:
        return count_batches(
            self.num_samples, self.batch_size, self.world_size, self.drop_last, start
        )

    def _goto(self, epoch: int, consumed: int) -> None:
        if epoch != self.epoch:
            o = self._order
            self._order = EpochOrder(
                o.shard_sizes, shuffle=o.shuffle, seed=o.seed, epoch=epoch,
                block_size=o.block_size, window=o.window,
            )  # fmt: skip
        self._consumed = consumed

    def _order_facts(self) -> dict[str, Any]:
        return {
            "num_samples": self.num_samples,
            "shards_digest": self._digest,
            "shuffle": self.shuffle,
            "seed": self.seed,
            "block_size": self.block_size,
            "window": self.window,
        }
