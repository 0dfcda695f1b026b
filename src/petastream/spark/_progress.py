"""Progress of a materialization's write job, on classic Spark and on Spark Connect.

Quiet by default: progress is reported only when the ``petastream.spark`` logger is enabled for
INFO (``logging.getLogger("petastream").setLevel("INFO")``). Then, on a terminal (stderr is a
TTY, and tqdm is installed) it is a tqdm bar that disappears when the job ends; elsewhere (logs,
notebooks, jobs) a plain line every ``interval`` seconds. Either way the phase ends with one
summary line, logged by the materializer.

Sources: classic Spark's ``statusTracker()`` for the job group of the write (polled by a
thread); on Spark Connect (pyspark >= 4), ``spark.registerProgressHandler``, which the client
calls with the stages of the running operation while ``collect()`` waits.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

__all__ = ["Reporter", "track"]


def _tqdm_bar(desc: str) -> Any:
    if not (getattr(sys.stderr, "isatty", lambda: False)()):
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(desc=desc, unit="task", leave=False, file=sys.stderr, dynamic_ncols=True)


class Reporter:
    """Task counts of one phase -> a tqdm bar on a TTY, else a log line every ``interval`` s."""

    def __init__(self, desc: str, log: logging.Logger, interval: float):
        self.desc = desc
        self.log = log
        self.interval = interval
        self.start = self.last = time.perf_counter()
        self.bar = _tqdm_bar(desc)
        self.lock = threading.Lock()

    def update(self, done: int, total: int) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.total = total or None
                self.bar.n = done
                self.bar.refresh()
                return
            now = time.perf_counter()
            if total and now - self.last >= self.interval:
                self.last = now
                self.log.info("%s: %d/%d tasks done, %.0f s elapsed", self.desc, done, total,
                              now - self.start)

    def close(self) -> None:
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None


class _ClassicPoller(threading.Thread):
    """Polls the status tracker for the job group (classic Spark)."""

    def __init__(self, sc: Any, group: str, reporter: Reporter, period: float):
        super().__init__(name="petastream-progress", daemon=True)
        self.tracker = sc.statusTracker()
        self.group = group
        self.reporter = reporter
        self.period = period
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.period):
            try:
                done = total = 0
                for job in self.tracker.getJobIdsForGroup(self.group):
                    info = self.tracker.getJobInfo(job)
                    for stage in info.stageIds if info else []:
                        s = self.tracker.getStageInfo(stage)
                        if s:
                            done += s.numCompletedTasks
                            total += s.numTasks
            except Exception:  # the context stopped: nothing more to report
                return
            self.reporter.update(done, total)


class _ConnectHandler:
    """A Spark Connect ``ProgressHandler`` (called with keyword arguments by the client)."""

    def __init__(self, reporter: Reporter):
        self.reporter = reporter

    def __call__(self, stages: Any = None, inflight_tasks: int = 0, operation_id: Any = None,
                 done: bool = False, **_: Any) -> None:
        stages = list(stages or [])
        self.reporter.update(sum(s.num_completed_tasks for s in stages),
                             sum(s.num_tasks for s in stages))


class track:
    """``with track(df, group, desc, log, interval): df.collect()`` reports the job's progress
    (see the module docstring); a no-op when INFO is off, ``interval`` is 0, or the session
    offers no progress source (Connect before pyspark 4)."""

    def __init__(self, df: Any, sc: Any, group: str, desc: str, log: logging.Logger,
                 interval: float):
        self.df, self.sc, self.group = df, sc, group
        self.enabled = bool(interval) and log.isEnabledFor(logging.INFO)
        self.reporter = Reporter(desc, log, interval) if self.enabled else None
        self.poller: _ClassicPoller | None = None
        self.handler: _ConnectHandler | None = None
        self.session: Any = None

    def __enter__(self) -> track:
        if self.reporter is None:
            return self
        if self.sc is not None:
            period = 0.5 if self.reporter.bar is not None else min(self.reporter.interval, 2.0)
            self.poller = _ClassicPoller(self.sc, self.group, self.reporter, period)
            self.poller.start()
        else:
            session = getattr(self.df, "sparkSession", None)
            register = getattr(session, "registerProgressHandler", None)
            if register is not None:
                try:
                    self.handler = _ConnectHandler(self.reporter)
                    register(self.handler)
                    self.session = session
                except Exception:  # pyspark 3.5 Connect: no progress API
                    self.handler = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.poller is not None:
            self.poller.stopped.set()
        if self.handler is not None:
            try:
                self.session.removeProgressHandler(self.handler)
            except Exception:
                pass
        if self.reporter is not None:
            self.reporter.close()
