"""``BatchLoader``: a loader as a composition of values.

A loader is ``(source, planner, work, executor, stages)`` (see :mod:`petastream.pipeline`):

* a :class:`~petastream.source.Source` (an MDS dataset, Parquet files, an Arrow table);
* a :class:`~petastream.stream.StreamPlanner` for order and position, driven by an
  :class:`~petastream.pipeline.driver.EpochDriver` (what an iteration means);
* per pass, a :class:`~petastream.pipeline.work.PassWork` (decode → ``transform`` →
  ``convert``), sized by the :class:`~petastream.stream.budget.LoaderBudget` and passed
  through ``work_stages`` (``PassWork -> PassWork``, in the iterating thread: e.g. torch's
  pinning for the device current there);
* an :class:`~petastream.pipeline.executor.Executor` that runs it (threads by default);
* consumer-side ``stages`` (``PassRun -> PassRun``, in order: device staging, Petastorm's
  collate, compat's stop check), a list adapters append to.

The torch, TensorFlow and compat adapters build their loaders from these values; none of them
overrides a method of this class.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from petastream.capabilities import CachePeers, Composite, Pinned
from petastream.errors import InvalidArgumentError
from petastream.mix.source import open_source
from petastream.pipeline.driver import EpochDriver, PassRun
from petastream.pipeline.executor import Executor
from petastream.pipeline.onerror import ErrorPolicy, OnError, SkipLedger
from petastream.pipeline.pacing import Pacer
from petastream.pipeline.stateful import gather_states, restore_states
from petastream.pipeline.stats import LoaderStats, ReportRun, StatsRun
from petastream.pipeline.threads import ThreadExecutor
from petastream.pipeline.work import PassWork
from petastream.source import Source, is_source
from petastream.stream import CacheFit, EpochPlan, StreamPlanner
from petastream.stream.budget import LoaderBudget, local_readers, refit_advice

__all__ = ["BatchLoader", "RunStage", "WorkStage", "checked_columns", "checked_workers", "check_snapshot",
           "source_snapshot"]

log = logging.getLogger("petastream.pipeline")

WorkStage = Callable[[PassWork], PassWork]
RunStage = Callable[[PassRun], PassRun]


def _positive(name: str, value: Any, what: str, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"{name} must be an int >= {minimum} ({what}), got {value!r}")


def checked_workers(num_workers: int, prefetch: int, readahead: int) -> None:
    _positive("num_workers", num_workers, "decode workers")
    _positive("prefetch", prefetch, "batches ready per worker")
    _positive("readahead", readahead, "chunks announced ahead", minimum=0)


def source_snapshot(source: Any) -> Any:
    """What a source reads when it is pinned to one snapshot of a changing table (its optional
    :class:`~petastream.capabilities.Pinned` capability; a mixture's: its streams'), or None."""
    if isinstance(source, Composite):
        found = [source_snapshot(s) for s in source.component_sources()]
        return {"format": "mixture", "streams": found} if any(f is not None for f in found) else None
    return dict(source.snapshot) if isinstance(source, Pinned) else None


def check_snapshot(state: Any, source: Any) -> None:
    """Refuse to resume a position saved on another snapshot of the table: the rows, and so
    what the position means, differ. The fix is to open the state's snapshot."""
    saved = state.get("snapshot") if isinstance(state, dict) else None
    if saved is None:
        return
    mine = source_snapshot(source)
    if saved != mine:
        raise InvalidArgumentError(
            f"state was saved reading {saved}, this loader reads {mine}: the table changed in between. "
            "Open the state's snapshot to resume (for a Delta table: dataset_options={'version': "
            "state['snapshot']['version']}, or DeltaSource(url, version=...)), or start afresh")


def _pacer(source: Source) -> Pacer | None:
    peers = source.cache_peers() if isinstance(source, CachePeers) else None
    return Pacer(peers, source, local_readers() - 1) if peers is not None else None


def checked_columns(source: Source, columns: Sequence[str] | None,
                    transform: Callable[..., Any] | None = None) -> list[str]:
    """The columns a loader reads (``columns``, or all of the source's), checked against the
    source; and ``transform`` checked callable (before anything runs it)."""
    if transform is not None and not callable(transform):
        raise InvalidArgumentError(f"transform must be a callable batch -> batch, got {transform!r}")
    if columns is None:
        return list(source.columns)
    unknown = sorted(set(columns) - set(source.columns))
    if unknown:
        raise InvalidArgumentError(f"columns {unknown} are not in the dataset; it has {sorted(source.columns)}")
    return list(columns)


class BatchLoader:
    """Iterate batches of a source (dicts of numpy columns, or what ``convert`` makes of them);
    see :mod:`petastream.pipeline` for what an iteration means (each ``iter()`` is the next
    epoch, exactly once).

    * ``dataset``: a :class:`~petastream.source.Source`, or the URL of an MDS dataset (opened
      with ``dataset_options``, see :class:`~petastream.mds.dataset.MDSDataset`).
    * ``batch_size``: rows per batch (per rank).
    * ``shuffle``, ``seed``: a seeded shuffle, the same on every rank, worker count and
      worker type; ``block_size``, ``window``: its shard blocks and shuffle window (see
      :class:`~petastream.stream.StreamPlanner`; default: fitted to a bounded cache, see below).
    * ``num_epochs``: epochs per iteration (None: forever). ``drop_last``: drop the short last
      global batch instead of padding it over the ranks.
    * ``rank``, ``world_size``: split every global batch over ranks.
    * ``columns``: the columns read (None: all).
    * ``transform(batch) -> batch``: runs in the workers, on numpy columns.
    * ``logical_types``: columns come back as their logical dtypes (``source.logical_dtypes``,
      e.g. Spark booleans as bool); False keeps the stored ones (uint8).
    * ``num_workers``, ``prefetch``: decode workers, and items each keeps ready (for the
      default executor, threads).
    * ``readahead``: chunks whose shards are announced to the source ahead of decoding.
    * ``convert(batch)``: a picklable function run in the workers after ``transform`` (torch
      tensors, TensorFlow's parts); None hands the numpy batch over.
    * ``executor``: what runs a pass (:mod:`petastream.pipeline.executor`); default
      ``ThreadExecutor(num_workers, prefetch)``.
    * ``work_stages``: ``PassWork -> PassWork`` functions applied to each pass's work, in order,
      in the iterating thread.
    * ``stages``: ``PassRun -> PassRun`` functions wrapped around each pass's run, in order, in
      the iterating thread (``loader.stages`` is a list: adapters append to it).
    * ``superseded``: what pulling an iterator does after a newer iteration took the position
      over: ``"raise"`` (:class:`~petastream.errors.SupersededError`) or ``"stop"`` (tf.data,
      which may open the next epoch's iterator before it finalizes the last).
    * ``on_error``: what a sample that fails to decode or ``transform`` does (see
      :mod:`petastream.pipeline.onerror`): ``"raise"`` (default; the error names the dataset,
      shard, row and column), ``"skip"`` (left out of its batch, counted, logged), ``"warn"``
      (and its error logged), or ``fn(BadSample) -> bool`` (True: skip). Skipped samples are
      in ``state_dict()``: a resumed loader leaves them out too.
    * ``log_every``: log :meth:`stats` at INFO every this many seconds (None: never);
      ``log_summary``: log them at the end of each epoch.

    A shuffled read of a source that goes through a shard cache with a ``cache_limit`` smaller
    than the source, with neither ``window`` nor ``block_size`` given, gets the window and
    block size that fit the limit (:class:`~petastream.stream.budget.LoaderBudget`: each shard
    is then downloaded about once per epoch); ``self.cache_fit`` says what was chosen (None:
    the defaults). Where other processes read the same order through that cache (the ranks of
    a node), the loader keeps within a few windows of the slowest of them
    (``self.pacer``, :mod:`petastream.pipeline.pacing`), so that they share each download.
    """

    def __init__(
        self,
        dataset: Source | str,
        batch_size: int = 32,
        *,
        shuffle: bool = False,
        seed: int = 0,
        num_epochs: int | None = 1,
        drop_last: bool = False,
        columns: Sequence[str] | None = None,
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
        convert: Callable[[dict[str, Any]], Any] | None = None,
        executor: Executor | None = None,
        work_stages: Sequence[WorkStage] = (),
        stages: Sequence[RunStage] = (),
        superseded: str = "raise",
        on_error: OnError = "raise",
        log_every: float | None = None,
        log_summary: bool = False,
    ):
        #: Whether this loader opened its source (from a URL): then it may reopen it at the
        #: snapshot a resumed state was saved on (see :meth:`load_state_dict`).
        self.owns_dataset = not is_source(dataset)
        self.on_error = ErrorPolicy(on_error)
        if log_every is not None and (isinstance(log_every, bool) or not isinstance(log_every, (int, float))
                                      or log_every <= 0):
            raise InvalidArgumentError(f"log_every must be a number of seconds > 0 or None, got {log_every!r}")
        self.log_every, self.log_summary = log_every, bool(log_summary)
        #: The samples skipped (``on_error``): their ids, resumed with ``state_dict``.
        self.skips = SkipLedger(on_error)
        #: The running figures behind :meth:`stats`.
        self.counters = LoaderStats(self.skips)
        checked_workers(num_workers, prefetch, readahead)
        if convert is not None and not callable(convert):
            raise InvalidArgumentError(f"convert must be a callable batch -> item, got {convert!r}")
        self._order_args: dict[str, Any] = dict(batch_size=batch_size, shuffle=shuffle, seed=seed, world_size=world_size, rank=rank,
                                drop_last=drop_last, window=window, block_size=block_size, readahead=readahead,
                                num_epochs=num_epochs, superseded=superseded)
        self._bind(open_source(dataset, dataset_options), columns, transform)
        self.columns = list(columns) if columns is not None else None
        self.num_workers = num_workers
        self.prefetch = prefetch
        self.transform = transform
        self.logical_types = logical_types
        self.readahead = readahead
        self.convert = convert
        self.executor: Executor = executor if executor is not None else ThreadExecutor(num_workers, prefetch)
        self.work_stages: list[WorkStage] = list(work_stages)
        self.stages: list[RunStage] = list(stages)
        #: Keeps this loader near the other readers of its order on a shared bounded cache.
        self.pacer = _pacer(self.dataset)

    def _bind(self, dataset: Source, columns: Sequence[str] | None, transform: Any) -> None:
        """Read ``dataset``: its budget, planner and driver (at open, and when a resumed state
        reopens the source at its snapshot)."""
        a = self._order_args
        checked_columns(dataset, columns, transform)
        self.dataset = dataset
        self.budget = LoaderBudget(dataset, shuffle=a["shuffle"], window=a["window"], block_size=a["block_size"],
                                   readahead=a["readahead"])
        # A window we chose (not the user) follows a resumed state's, whatever this run chose.
        self.planner = StreamPlanner(dataset.shard_sizes, a["batch_size"], shuffle=a["shuffle"], seed=a["seed"],
                                     world_size=a["world_size"], rank=a["rank"], drop_last=a["drop_last"],
                                     adopt_order=a["window"] is None and a["block_size"] is None,
                                     **self.budget.order_options(a["window"], a["block_size"]))
        # An ended iteration gives back its shard maps and descriptors: a job that builds a
        # loader per evaluation must not run out of them (the next iteration reopens).
        self.driver = EpochDriver(self.planner, self._run_pass, num_epochs=a["num_epochs"],
                                  superseded=a["superseded"], on_end=dataset.close)

    def _reopen_at(self, snapshot: Any) -> bool:
        """Reopen this loader's own source at ``snapshot`` (a Delta table's recorded version),
        where the source can (``at_snapshot``) and reads the same columns; whether it did."""
        if not self.owns_dataset or not isinstance(self.dataset, Pinned):
            return False
        source = self.dataset.at_snapshot(snapshot)
        if dict(source.columns) != dict(self.dataset.columns):
            raise InvalidArgumentError(
                f"state was saved reading {snapshot}, whose columns {dict(source.columns)} differ from "
                f"those this loader reads ({dict(self.dataset.columns)}); start afresh")
        self.driver.set_epoch(self.planner.epoch)  # supersedes a running iteration, as a state load does
        self.dataset.close()
        self._bind(source, self.columns, self.transform)
        self.pacer = _pacer(source)
        log.info("resuming at the state's snapshot %s (the table changed since)", snapshot)
        return True

    @property
    def cache_fit(self) -> CacheFit | None:
        """The window and block size fitted to a bounded cache (None: the defaults)."""
        return self.budget.fit

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
        any worker count, worker type or world size. A source read at a pinned snapshot (a Delta
        table's version) is recorded under ``"snapshot"``; ``"skipped"``: the ids of the samples
        ``on_error`` left out, as ``[start, stop)`` ranges (absent when none); ``"stages"``: the
        state of the stages that keep one, by name (:mod:`petastream.pipeline.stateful`; absent
        when none: the pacer's where the loader is paced)."""
        state = self.driver.state_dict(steps)
        snapshot = source_snapshot(self.dataset)
        if snapshot is not None:
            state["snapshot"] = snapshot
        if self.skips.ids:
            state["skipped"] = self.skips.state()
        stages = gather_states(self.stateful_stages())
        if stages:
            state["stages"] = stages
        return state

    def stateful_stages(self) -> list[Any]:
        """The stages whose state ``state_dict()`` carries (:mod:`petastream.pipeline.stateful`):
        the pacer, and the work stages and stages that keep state."""
        return [s for s in (self.pacer, *self.work_stages, *self.stages) if s is not None]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The next iteration resumes where ``state`` stands, leaving out the samples it says
        were skipped, each stateful stage given its state (its defaults where the state has
        none: one saved before the stage existed). A state saved on a snapshot of a table (a
        Delta version) other than the one read now (the table was written since) is resumed on
        its own snapshot where this loader opened the source itself from a URL; else it is
        refused (open the state's snapshot and load the state again)."""
        stage_states = None
        if isinstance(state, dict) and ("skipped" in state or "stages" in state):
            state = dict(state)
            if "skipped" in state:
                self.skips.load(state.pop("skipped"))
            stage_states = state.pop("stages", None)
        saved = state.get("snapshot") if isinstance(state, dict) else None
        if saved is None or saved == source_snapshot(self.dataset) or not self._reopen_at(saved):
            check_snapshot(state, self.dataset)
        self.driver.load_state_dict(state)
        restore_states(self.stateful_stages(), stage_states)  # after a reopen replaced the pacer
        if self.cache_fit is not None and self.dataset.cache_limit is not None:
            # The state's window replaced the one fitted to the cache (adopt_order): say so.
            p = self.planner
            advice = refit_advice(self.cache_fit, p.window, p.block_size, p.epoch, self.dataset.shard_sizes,
                                  self.dataset.cached_shard_bytes(), self.dataset.cache_limit)
            if advice is not None:
                warnings.warn(advice, UserWarning, stacklevel=2)

    def stats(self) -> dict[str, Any]:
        """How the loader has done since it was made (see
        :meth:`~petastream.pipeline.stats.LoaderStats.snapshot`): rows and batches handed out,
        rows/s, seconds the loop waited for data and batches waited for the loop, decode and
        transform seconds per worker, cache hits/misses, bytes and GETs fetched, samples
        skipped."""
        return self.counters.snapshot()

    def stats_line(self) -> str:
        """:meth:`stats` in one line (what ``log_every`` and ``log_summary`` log)."""
        return self.counters.line()

    def close(self) -> None:
        """Give up the workers the executor keeps between passes (a later iteration starts
        them anew)."""
        self.executor.close()

    # -- one pass -----------------------------------------------------------------------------
    def pass_work(self, plan: EpochPlan, num_workers: int | None = None) -> PassWork:
        """The work of one pass over ``plan``, split over ``num_workers`` workers (default: the
        executor's), after ``work_stages``."""
        workers = self.executor.num_workers if num_workers is None else num_workers
        work = PassWork(self.dataset, plan, self.columns, self.transform, self.convert,
                        self.logical_types, *self.budget.reach(plan, workers), on_error=self.on_error,
                        skip_ids=self.skips.known() if self.skips.ids else None)
        for stage in self.work_stages:
            work = stage(work)
        return work

    def _run_pass(self, plan: EpochPlan) -> PassRun:
        reports = ReportRun(self.executor.run(self.pass_work(plan)), self.counters)
        run: PassRun = reports
        if self.pacer is not None:
            run = self.pacer.wrap(run, plan)
        for stage in self.stages:
            run = stage(run)
        return StatsRun(run, self.counters, plan, reports, self.log_every, self.log_summary)
