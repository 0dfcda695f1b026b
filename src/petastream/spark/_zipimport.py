"""CPython 3.10/3.11 in Spark's Python workers: a zip on ``sys.path`` is re-read only when it changed.

pyspark's worker calls ``importlib.invalidate_caches()`` before every task
(``pyspark.worker_util.setup_spark_files``). On CPython 3.10 and 3.11 that re-reads the central
directory of every zip archive on ``sys.path``, once per importer (python/cpython#103200, fixed
in 3.12 by re-reading lazily). A worker has pyspark.zip, py4j's zip and Spark's core jar there,
and an importer for each package imported from them: on this project's 2-core machine every
task spent 0.13 s in that call before its first row, against ~0.5 s for a task writing 500k
tabular rows.

:func:`reread_zips_only_when_changed`, called by each materialization task (workers are reused
across tasks and jobs), gives every zip importer an invalidation that re-reads its archive only
when the file's inode, size or modification time changed, which is what an invalidation is for.
The next tasks in that worker, ours or anybody's, skip the re-reads. Nothing is done on 3.12+,
nor on 3.9 (no zip invalidation there).

Hand-written because no library carries the backport; the guard is an instance attribute on
importers the interpreter already made, so the import system itself is untouched.
"""

from __future__ import annotations

import os
import sys
import zipimport
from typing import Any

__all__ = ["reread_zips_only_when_changed"]

_AFFECTED = (3, 10) <= sys.version_info[:2] < (3, 12)


def reread_zips_only_when_changed() -> int:
    """Guard every zip importer in ``sys.path_importer_cache`` not guarded yet; returns how
    many were guarded now (0 on Pythons without the slow invalidation)."""
    if not _AFFECTED:
        return 0
    guarded = 0
    for finder in list(sys.path_importer_cache.values()):
        if isinstance(finder, zipimport.zipimporter) and "invalidate_caches" not in vars(finder):
            finder.invalidate_caches = _InvalidateIfChanged(finder)
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
    importer last read it (a vanished archive always runs it: the importer then forgets it)."""

    def __init__(self, importer: Any):
        self.importer = importer
        self.stamp = _stamp(importer.archive)

    def __call__(self) -> None:
        stamp = _stamp(self.importer.archive)
        if stamp is None or stamp != self.stamp:
            self.stamp = stamp
            type(self.importer).invalidate_caches(self.importer)
