"""What a reused pyspark Python worker pays around every task, made cheap by the first task of
ours it runs (:func:`lighten_worker`).

A pyspark worker runs task after task (``spark.python.worker.reuse``, on by default), and
around each one pyspark does two things whose cost grows with what the worker holds:

* **Before the task**, ``importlib.invalidate_caches()`` (``worker_util.setup_spark_files``).
  On CPython 3.10 and 3.11 that re-reads the central directory of every zip archive on
  ``sys.path``, once per importer (python/cpython#103200, fixed in 3.12 by re-reading lazily).
  A worker has pyspark.zip, py4j's zip and Spark's core jar there, and an importer for each
  package imported from them: 121-133 ms per task on this project's 2-core machine, against
  ~0.5 s for a task writing 500k tabular rows. :func:`reread_zips_only_when_changed` gives
  every zip importer an invalidation that re-reads its archive only when the file's inode,
  size or modification time changed, which is what an invalidation is for (0.1 ms).
* **After the task**, a full ``gc.collect()`` (``daemon.py``), which walks every object the
  worker tracks: 17-28 ms in a fresh worker, 51 ms once pyarrow and petastream are imported.
  :func:`freeze_what_is_loaded` moves what is alive at the start of our first task (modules,
  classes, functions: what lives as long as the worker) out of the collector's way with
  ``gc.freeze()``, as CPython documents for long-lived processes; objects are still freed by
  reference counting, and the later tasks' objects are collected as before.

The next tasks in that worker, ours or anybody's, skip both costs. Hand-written: no library
carries these; both act on state the interpreter already made, the import system and the
collector themselves untouched.
"""

from __future__ import annotations

import gc
import os
import sys
import zipimport
from typing import Any

__all__ = ["lighten_worker", "reread_zips_only_when_changed", "freeze_what_is_loaded"]

_AFFECTED = (3, 10) <= sys.version_info[:2] < (3, 12)
_frozen_in: int | None = None  # the pid that froze (a forked child starts over)


def lighten_worker() -> None:
    """Both, for the tasks that follow in this worker."""
    reread_zips_only_when_changed()
    freeze_what_is_loaded()


def freeze_what_is_loaded() -> bool:
    """``gc.freeze()`` once per process; True when it froze now."""
    global _frozen_in
    if _frozen_in == os.getpid():
        return False
    _frozen_in = os.getpid()
    gc.freeze()
    return True


def reread_zips_only_when_changed() -> int:
    """Guard every zip importer in ``sys.path_importer_cache`` not guarded yet; returns how
    many were guarded now (0 on Pythons without the slow invalidation)."""
    if not _AFFECTED:
        return 0
    guarded = 0
    for finder in list(sys.path_importer_cache.values()):
        if isinstance(finder, zipimport.zipimporter) and "invalidate_caches" not in vars(finder):
            # an instance attribute over the class method, on purpose: this finder only
            finder.invalidate_caches = _InvalidateIfChanged(finder)  # type: ignore[method-assign]
            guarded += 1
    return guarded


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class _InvalidateIfChanged:
    """``zipimporter.invalidate_caches`` that runs only when the archive changed since the
    importer last read it (a vanished archive always runs it: the importer then forgets it).
    Installed right after pyspark's invalidation re-read every archive, so the stamp taken
    now describes what the importer holds."""

    def __init__(self, importer: Any):
        self.importer = importer
        self.stamp = _stamp(importer.archive)

    def __call__(self) -> None:
        stamp = _stamp(self.importer.archive)
        if stamp is None or stamp != self.stamp:
            self.stamp = stamp
            type(self.importer).invalidate_caches(self.importer)
