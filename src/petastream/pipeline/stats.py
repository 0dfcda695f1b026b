"""``loader.stats()``: where an input pipeline's time goes, always on.

Two sources, both cheap (a few clock reads per batch, nothing per row):

* **the workers** (:class:`WorkerMeter`, in :class:`~petastream.pipeline.work.PassWork`): the
  seconds each spends decoding (reads, fetch waits, decompression) and in ``transform`` and
  conversion, the samples it left out (``on_error``), and, from a worker process, what that
  process fetched. Reports ride on the items themselves (:class:`Reported`, so they cross
  every executor: threads, our process pool, DataLoader workers): on the batch that lost rows,
  on a worker's last item of a pass, and at most about once a second otherwise.
* **the consumer** (:class:`StatsRun`, outermost on the pass): batches and rows handed out, the
  seconds the loop waited inside ``next()`` for a batch (input-bound) and the seconds between
  handing a batch out and being asked for the next one (the loop's own work: ready batches
  wait for it then); :class:`ReportRun` (innermost) takes the reports off the items.

Cache and storage figures are this process's (:mod:`petastream.storage.counters`) since the loader
started, plus those its worker processes report.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from petastream.pipeline.onerror import BadSample, SkipLedger
from petastream.storage.counters import FIELDS, IO

__all__ = ["LoaderStats", "Reported", "ReportRun", "StatsRun", "WorkerMeter", "WorkerReport"]

log = logging.getLogger("petastream.pipeline")

_REPORT_S = 1.0  # a worker reports at least this often (on the next item after it)


@dataclass
class WorkerReport:
    worker: int
    pid: int
    decode_s: float = 0.0  # since the worker's last report
    transform_s: float = 0.0
    dropped: int = 0  # rows the carrying batch lost (skipped now, or skipped before: resumed)
    bads: list[BadSample] = field(default_factory=list)
    io: dict[str, int] | None = None  # the worker process's fetches since its last report


class Reported:
    """An item with its worker's report (taken off by :class:`ReportRun`)."""

    __slots__ = ("item", "report")

    def __init__(self, item: Any, report: WorkerReport):
        self.item, self.report = item, report

    def __reduce__(self) -> tuple[Any, ...]:
        return Reported, (self.item, self.report)


class WorkerMeter:
    """A worker's side: times its stages, and attaches a report to an item when it is due."""

    def __init__(self, worker: int, owed: int):
        self.worker, self.owed, self.handed = worker, owed, 0
        self.pid = os.getpid()
        self.decode_s = self.transform_s = 0.0
        self.last = time.perf_counter()
        self.io = IO.snapshot()

    def item(self, item: Any, dropped: int = 0, bads: list[BadSample] | None = None) -> Any:
        self.handed += 1
        now = time.perf_counter()
        if not (dropped or bads or self.handed >= self.owed or now - self.last >= _REPORT_S):
            return item
        io = IO.snapshot()
        report = WorkerReport(self.worker, self.pid, self.decode_s, self.transform_s, dropped, bads or [],
                              {k: io[k] - self.io[k] for k in FIELDS})
        self.decode_s = self.transform_s = 0.0
        self.last, self.io = now, io
        return Reported(item, report)


class LoaderStats:
    """The running figures of one loader (see :meth:`snapshot` for what each means)."""

    def __init__(self, skips: SkipLedger):
        self.skips = skips
        self.rows = self.batches = 0
        self.left_out = 0  # rows the batches handed out lost: skipped now, or in a resumed state
        self.waited_s = self.idle_s = 0.0  # waited for data; batches waited for the consumer
        self.first: float | None = None  # when the first batch was asked for
        self.decode_s: dict[int, float] = {}
        self.transform_s: dict[int, float] = {}
        self.io_start = IO.snapshot()
        self.io_remote = dict.fromkeys(FIELDS, 0)
        self.pid = os.getpid()

    def take(self, report: WorkerReport) -> None:
        w = report.worker
        self.decode_s[w] = self.decode_s.get(w, 0.0) + report.decode_s
        self.transform_s[w] = self.transform_s.get(w, 0.0) + report.transform_s
        if report.io is not None and report.pid != self.pid:  # (this process's are counted here)
            for k in FIELDS:
                self.io_remote[k] += report.io[k]
        if report.bads:
            self.skips.record(report.bads)

    def snapshot(self) -> dict[str, Any]:
        """``rows``, ``batches`` handed out; ``seconds`` since the first batch was asked for and
        ``rows_per_s`` over them; ``waited_for_data_s`` (the loop blocked in ``next()``) and
        ``waited_for_consumer_s`` (batches handed out and the next not yet asked for: the
        loop's own time); ``decode_s`` and ``transform_s`` per worker (index); ``cache_hits``,
        ``cache_misses``, ``bytes_fetched``, ``gets``; ``row_groups_decoded`` (Parquet, from
        their files); ``skipped``: samples left out of the batches handed out (``on_error``;
        also those a resumed state says were skipped)."""
        elapsed = time.perf_counter() - self.first if self.first is not None else 0.0
        io = IO.snapshot()
        return {
            "rows": self.rows, "batches": self.batches, "seconds": elapsed,
            "rows_per_s": self.rows / elapsed if elapsed > 0 else 0.0,
            "waited_for_data_s": self.waited_s, "waited_for_consumer_s": self.idle_s,
            "decode_s": dict(sorted(self.decode_s.items())),
            "transform_s": dict(sorted(self.transform_s.items())),
            **{k: io[k] - self.io_start[k] + self.io_remote[k] for k in FIELDS},
            "skipped": self.left_out,
        }

    def line(self) -> str:
        s = self.snapshot()
        decode = sum(s["decode_s"].values())
        return (f"{s['rows']} rows in {s['batches']} batches, {s['rows_per_s']:,.0f} rows/s; waited for "
                f"data {s['waited_for_data_s']:.1f}s, batches waited for the loop {s['waited_for_consumer_s']:.1f}s; "
                f"decode {decode:.1f}s over {len(s['decode_s'])} worker(s); cache {s['cache_hits']} hits "
                f"{s['cache_misses']} misses; fetched {s['bytes_fetched']:,} bytes in {s['gets']} GETs; "
                f"{s['skipped']} skipped")


class ReportRun:
    """Innermost on a pass: takes the workers' reports off the items into ``stats``."""

    def __init__(self, run: Any, stats: LoaderStats):
        self.run = run  #: the executor's run underneath
        self._run, self._stats = run, stats
        self.dropped = 0  # rows the items handed out so far lost (the StatsRun subtracts them)

    def __iter__(self) -> ReportRun:
        return self

    def __next__(self) -> Any:
        item = next(self._run)
        if type(item) is Reported:
            report = item.report
            self._stats.take(report)
            self.dropped += report.dropped
            self._stats.left_out += report.dropped
            item = item.item
        return item

    def close(self) -> None:
        self._run.close()


class StatsRun:
    """Outermost on a pass: counts and times the hand-over of each batch (see the module doc);
    logs a line every ``log_every`` seconds and, with ``summary``, when the pass ends."""

    def __init__(self, run: Any, stats: LoaderStats, plan: Any, reports: ReportRun,
                 log_every: float | None = None, summary: bool = False):
        self._run, self._stats, self._plan, self._reports = run, stats, plan, reports
        self._log_every, self._summary = log_every, summary
        self._handed = 0  # batches of this pass handed out
        self._returned: float | None = None
        self._logged = time.perf_counter()
        # Every batch is full but an epoch's last on one rank without drop_last (several ranks
        # pad theirs): counted, not asked of the plan (its ids cost a shuffle's computation).
        full = plan.drop_last or plan.world_size > 1
        self._last_rows = plan.batch_size if full else \
            (plan.num_samples - plan.start) - (plan.num_batches - 1) * plan.batch_size

    def __iter__(self) -> StatsRun:
        return self

    def __next__(self) -> Any:
        st = self._stats
        t0 = time.perf_counter()
        if st.first is None:
            st.first = t0
        if self._returned is not None:
            st.idle_s += t0 - self._returned
        try:
            item = next(self._run)
        except StopIteration:
            if self._summary:
                log.info("epoch %d: %s", self._plan.epoch, st.line())
            raise
        t1 = time.perf_counter()
        st.waited_s += t1 - t0
        self._returned = t1
        n = getattr(item, "num_batches", 1)
        st.batches += n
        p = self._plan
        stop = self._handed + n
        last = stop >= p.num_batches
        st.rows += (n - last) * p.batch_size + (self._last_rows if last else 0) - self._reports.dropped
        self._reports.dropped = 0
        self._handed = stop
        if self._log_every is not None and t1 - self._logged >= self._log_every:
            self._logged = t1
            log.info("loader: %s", st.line())
        return item

    def close(self) -> None:
        self._run.close()
