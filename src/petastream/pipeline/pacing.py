"""Pacing: readers of one order that share a bounded shard cache stay within a few windows of
each other, so that what the first one fetched is still cached when the last one gets there.

Ranks of a node read the same shuffled order (each its own rows of every global batch), so
they need the same shards at the same point of the epoch, and one download serves them all.
When they run free (ranks that do not synchronise every step, jobs reading the same order), a
reader far ahead fills the cache with shards the slow ones reach only after they have been
evicted, and each is downloaded again: up to 13.75x the ideal GETs measured with four free
ranks on one node. Eviction that spares every reader's announced read-ahead
(:mod:`petastream.storage.announce`) cannot help: what a fast reader passed and a slow one has not
reached is announced by nobody. Only keeping them together can, so a reader that gets more than
``lead`` windows ahead of the slowest live reader of its order waits for it.

* Who: the other processes on the same cache directory whose loaders read the same order (a
  key of the source's fingerprint, seed, window, block size, batch size and world size, the
  same on every rank of a job). Each publishes its window and a heartbeat (at most every
  :data:`HEARTBEAT` seconds while it hands out batches) through the cache's announcements.
* How far: ``lead`` = the node's readers less one, at least one, counted in windows of the
  consumer's position. The fitted window lets each of the ``readers`` readers hold two windows
  in the cache; with the read-ahead's window on top, ``lead + 2`` windows of the order are in
  use at once, within what the cache holds.
* Not waiting for the idle: a reader whose heartbeat is older than :data:`IDLE_AFTER` seconds
  (``$PETASTREAM_PACE_IDLE_S``) is not consuming (evaluating, checkpointing, abandoned without
  closing) and is not waited for; nor is one whose pass ended (it withdraws its position).
  A wait longer than a few seconds is logged once, naming the processes waited for.

Pacing is on for a loader whose source reads through a bounded cache (an optional source
capability, :class:`~petastream.capabilities.CachePeers`: MDS datasets and Parquet sources
have it, mixtures do not); alone on its cache it costs a directory listing per window and a
small file write every few seconds.
Two loaders of one order in one process do not pace each other.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from petastream.capabilities import Peers, fingerprint_of
from petastream.pipeline.driver import PassRun
from petastream.stream.plan import EpochPlan

__all__ = ["HEARTBEAT", "IDLE_AFTER", "Pacer", "Peers", "plan_key"]

log = logging.getLogger("petastream.pipeline")

HEARTBEAT = 2.0  # seconds between position rewrites while handing out batches in one window
IDLE_AFTER = float(os.environ.get("PETASTREAM_PACE_IDLE_S", "30"))  # a reader silent this long is idle
_LOG_AFTER = 5.0  # seconds of waiting before it is logged


def plan_key(source: Any, plan: EpochPlan) -> str:
    """What identifies the order ``plan`` reads, the same on every rank of a job."""
    order = plan.order
    ident = [fingerprint_of(source) if source is not None else "", order.num_samples,
             order.shuffle, order.seed, order.window, order.block_size, plan.batch_size, plan.world_size,
             plan.drop_last]
    return hashlib.blake2s(repr(ident).encode(), digest_size=12).hexdigest()


class Pacer:
    """Wraps each pass's run so that its batches are handed out at most ``lead`` windows
    ahead of the slowest live peer reading the same order (see the module doc).

    A :class:`~petastream.pipeline.stateful.StatefulStage` (``"pacer"``): its state is how
    often and how long it held this reader back (``waits``, ``waited_s``), over the whole job:
    a resumed loader goes on counting from the saved figures."""

    name = "pacer"

    def __init__(self, peers: Peers, source: Any, lead: int, *, idle_after: float | None = None,
                 poll: float = 0.05):
        self.peers, self.source, self.lead = peers, source, max(1, int(lead))
        self.idle_after = IDLE_AFTER if idle_after is None else idle_after
        self.poll = poll
        #: The processes this loader is waiting for now (empty when it is not waiting).
        self.waiting_for: list[int] = []
        #: Times it held the reader back, and the seconds it did (its state).
        self.waits = 0
        self.waited_s = 0.0

    def wrap(self, run: PassRun, plan: EpochPlan) -> PassRun:
        return PacedRun(run, plan, self)

    def state_dict(self) -> dict[str, Any]:
        return {"waits": self.waits, "waited_s": round(self.waited_s, 6)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.waits = int(state.get("waits", 0))
        self.waited_s = float(state.get("waited_s", 0.0))


class PacedRun:
    """One pass's run, paced (see :class:`Pacer`)."""

    def __init__(self, run: PassRun, plan: EpochPlan, pacer: Pacer):
        self._run, self._plan, self._pacer = run, plan, pacer
        self._key = plan_key(pacer.source, plan)
        order = plan.order
        # Paced in the units the cache holds at once: the window, or the block where blocks
        # are larger, at most the largest shard. Whole shards read in order in a window of one
        # sample (compat's default order) are paced per shard, not per sample: a listing of
        # the announcements and a file write per batch cost 0.15 s of CPU per epoch of 1M rows.
        largest = int(order.shard_sizes.max()) if len(order.shard_sizes) else 1
        self._unit = max(order.window, min(order.block_size, largest))
        self._per_epoch = -(-order.num_samples // self._unit)  # units in an epoch
        self._step = plan.batch_size * plan.world_size  # positions of the order a batch covers
        self._handed = 0
        self._window: int | None = None
        self._beat = 0.0
        self._closed = False  # set by close(), which may come from another thread mid-wait

    def __iter__(self) -> PacedRun:
        return self

    def __next__(self) -> Any:
        batch = next(self._run)
        plan = self._plan
        position = min(plan.start + self._handed * self._step, plan.order.num_samples - 1)
        window = plan.order.epoch * self._per_epoch + position // self._unit
        self._handed += getattr(batch, "num_batches", 1)
        now = time.monotonic()
        if window != self._window:
            self._window, self._beat = window, now
            self._pacer.peers.publish_position(self._key, window)
            self._wait_for_peers(window)
        elif now - self._beat > HEARTBEAT:
            self._beat = now
            self._pacer.peers.publish_position(self._key, window, beat=True)
        return batch

    def _wait_for_peers(self, window: int) -> None:
        pacer, started = self._pacer, time.monotonic()
        if self._wait(window, started):
            pacer.waits += 1
            pacer.waited_s += time.monotonic() - started

    def _wait(self, window: int, started: float) -> bool:
        """Wait until no live peer is more than ``lead`` windows behind; whether it waited."""
        pacer, logged, waited = self._pacer, False, False
        while not self._closed:
            behind = [p for p in pacer.peers.positions(self._key)
                      if window - p.window > pacer.lead and time.time() - p.seen < pacer.idle_after]
            pacer.waiting_for = [p.pid for p in behind]
            if not behind:
                return waited
            waited = True
            if time.monotonic() - started > _LOG_AFTER and not logged:
                logged = True
                log.info("waiting for %s, %d or more windows behind on the shared shard cache, to keep "
                         "it from downloading shards again (idle readers are not waited for after %.0fs)",
                         ", ".join(f"pid {p.pid} (window {p.window})" for p in behind), pacer.lead + 1,
                         pacer.idle_after)
            time.sleep(pacer.poll)
        pacer.waiting_for = []
        return waited

    def close(self) -> None:
        self._closed = True
        self._pacer.peers.withdraw_position(self._key)
        self._run.close()
