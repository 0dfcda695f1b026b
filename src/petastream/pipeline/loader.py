"""``BatchLoader``: the framework-free loader every adapter extends.

A loader is a short composition (see :mod:`petastream.pipeline`): a
:class:`~petastream.stream.StreamPlanner` for order and position, an
:class:`~petastream.pipeline.driver.EpochDriver` for what an iteration means, and per pass a
:class:`~petastream.pipeline.work.PassWork` (decode → transform → convert) run by an executor
(:class:`~petastream.pipeline.threads.ThreadRun` here) and wrapped by consumer-side stages.
Adapters change three hooks: ``_convert`` (a picklable function run in the workers),
``_execute`` (threads or processes) and ``_stage`` (device copies, Petastorm's collate).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from petastream.errors import InvalidArgumentError
from petastream.mds.dataset import MDSDataset
from petastream.pipeline.decode import chunk_samples
from petastream.pipeline.driver import EpochDriver, PassRun
from petastream.pipeline.threads import ThreadRun
from petastream.pipeline.work import PassWork
from petastream.stream import CacheFit, EpochPlan, StreamPlanner, fit_to_cache
from petastream.stream.budget import reach, refit_advice

__all__ = ["BatchLoader"]

log = logging.getLogger("petastream.pipeline")


class BatchLoader:
    """Iterate batches (dicts of numpy columns) of an MDS dataset; see :mod:`petastream.pipeline`
    for what an iteration means (each ``iter()`` is the next epoch, exactly once).

    ``num_epochs`` epochs per iteration (None: forever). ``rank``/``world_size`` split every
    global batch over ranks (see :class:`~petastream.stream.StreamPlanner` for padding and
    ``drop_last``). ``transform(batch) -> batch`` runs in the workers. ``logical_types``:
    columns come back as their logical dtypes (``dataset.logical_dtypes``, e.g. Spark booleans
    as bool); False keeps the stored ones (uint8). ``readahead``: chunks whose shards are
    announced to the dataset's cache ahead of decoding.

    A shuffled read of a dataset that goes through a shard cache with a ``cache_limit`` smaller
    than the dataset, with neither ``window`` nor ``block_size`` given, gets the window and
    block size that fit the limit (:func:`~petastream.stream.fit_to_cache`: each shard is then
    downloaded about once per epoch), and chunks and read-ahead that stay within one window;
    ``self.cache_fit`` says what was chosen (None: the defaults).
    """

    superseded = "raise"  # what pulling a superseded iterator does (see EpochDriver)

    def __init__(
        self,
        dataset: MDSDataset | str,
        batch_size: int = 32,
        *,
        shuffle: bool = False,
        seed: int = 0,
        num_epochs: int | None = 1,
        drop_last: bool = False,
        columns: list[str] | None = None,
        num_workers: int = 2,
        prefetch: int = 2,
        rank: int = 0,
        world_size: int = 1,
        block_size: int | None = None,
        window: int | None = None,
        transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        dataset_options: dict[str, Any] | None = None,
        logical_types: bool = True,
        readahead: int = 2,
    ):
        self.dataset = dataset if isinstance(dataset, MDSDataset) else MDSDataset(dataset, **(dataset_options or {}))
        for name, value, what in (("num_workers", num_workers, "decode workers"),
                                  ("prefetch", prefetch, "batches ready per worker")):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name} must be an int >= 1 ({what}), got {value!r}")
        if isinstance(readahead, bool) or not isinstance(readahead, int) or readahead < 0:
            raise InvalidArgumentError(f"readahead must be an int >= 0 (chunks announced ahead), got {readahead!r}")
        if transform is not None and not callable(transform):
            raise InvalidArgumentError(f"transform must be a callable batch -> batch, got {transform!r}")
        if columns is not None:
            unknown = sorted(set(columns) - set(self.dataset.columns))
            if unknown:
                raise InvalidArgumentError(
                    f"columns {unknown} are not in the dataset; it has {sorted(self.dataset.columns)}"
                )
        extra = {k: v for k, v in (("block_size", block_size), ("window", window)) if v is not None}
        self.cache_fit: CacheFit | None = None
        if shuffle and not extra and self.dataset.cache_limit is not None:
            self.cache_fit = fit_to_cache(self.dataset.shard_sizes, self.dataset.cached_shard_bytes(),
                                          self.dataset.cache_limit)
            if self.cache_fit is not None:
                extra = {"block_size": self.cache_fit.block_size, "window": self.cache_fit.window}
                log.info("shuffle window %d samples, block size %d, to fit the shard cache: %s",
                         self.cache_fit.window, self.cache_fit.block_size, self.cache_fit.reason)
        # A window we chose (not the user) follows a resumed state's, whatever this run chose.
        self.planner = StreamPlanner(self.dataset.shard_sizes, batch_size, shuffle=shuffle, seed=seed,
                                     world_size=world_size, rank=rank, drop_last=drop_last,
                                     adopt_order=window is None and block_size is None, **extra)
        # An ended iteration gives back its shard maps and descriptors: a job that builds a
        # loader per evaluation must not run out of them (the next iteration reopens).
        self.driver = EpochDriver(self.planner, self._run_pass, num_epochs=num_epochs,
                                  superseded=self.superseded, on_end=self.dataset.close)
        self.columns = columns
        self.num_workers = num_workers
        self.prefetch = prefetch
        self.transform = transform
        self.logical_types = logical_types
        self.readahead = readahead
        self._convert: Callable[[dict[str, Any]], Any] | None = None

    # -- the iteration contract (EpochDriver) -------------------------------------------------
    @property
    def num_epochs(self) -> int | None:
        return self.driver.num_epochs

    @property
    def batches_per_epoch(self) -> int:
        """Batches per epoch on this rank."""
        return self.driver.batches_per_epoch

    def __len__(self) -> int:
        """Batches a full iteration yields on this rank (``num_epochs`` epochs)."""
        return len(self.driver)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.driver)

    def set_epoch(self, epoch: int) -> None:
        """The next iteration is epoch ``epoch``, from its start (see :mod:`petastream.pipeline`)."""
        self.driver.set_epoch(epoch)

    def state_dict(self, steps: int | None = None) -> dict[str, Any]:
        """The position to resume from: after every batch handed out so far, or (``steps=k``)
        after the first ``k`` batches of the current iteration. JSON-serialisable; resumes on
        any worker count, worker type or world size."""
        return self.driver.state_dict(steps)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The next iteration resumes where ``state`` stands."""
        self.driver.load_state_dict(state)
        if self.cache_fit is not None and self.dataset.cache_limit is not None:
            # The state's window replaced the one fitted to the cache (adopt_order): say so.
            p = self.planner
            advice = refit_advice(self.cache_fit, p.window, p.block_size, p.epoch, self.dataset.shard_sizes,
                                  self.dataset.cached_shard_bytes(), self.dataset.cache_limit)
            if advice is not None:
                warnings.warn(advice, UserWarning, stacklevel=2)

    # -- one pass -----------------------------------------------------------------------------
    def _work(self, plan: EpochPlan) -> PassWork:
        return PassWork(self.dataset, plan, self.columns, self.transform, self._convert,
                        self.logical_types, *self._reach(plan, self.num_workers))

    def _reach(self, plan: EpochPlan, num_workers: int) -> tuple[int, int | None, int]:
        """``(readahead, max_chunk, ahead_windows)``: the defaults, or, fitting a bounded
        cache, chunks and read-ahead within one window, and the next window announced."""
        if self.cache_fit is None or not plan.order.shuffle:
            return self.readahead, None, 0
        window = plan.order.window
        chunk, readahead, fits = reach(window, plan.batch_size, plan.world_size, num_workers,
                                       chunk_samples(self.dataset, window), self.readahead)
        if not fits:
            log.warning("one batch per worker (%d x %d workers x %d ranks) spans more than the "
                        "shuffle window of %d samples that fits cache_limit=%d: shards may be "
                        "downloaded more than once per epoch; raise cache_limit or use fewer workers",
                        plan.batch_size, num_workers, plan.world_size, window, self.dataset.cache_limit)
        log.debug("window %d: chunks of at most %d samples per worker, read-ahead %d chunks and "
                  "the next window", window, chunk, readahead)
        return readahead, chunk, 1 if self.readahead else 0

    def _execute(self, work: PassWork) -> PassRun:
        return ThreadRun(work, work.num_items, self.num_workers, self.prefetch)

    def _stage(self, run: PassRun) -> PassRun:
        return run

    def _run_pass(self, plan: EpochPlan) -> PassRun:
        return self._stage(self._execute(self._work(plan)))
