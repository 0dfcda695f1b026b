"""Walk the given paths, migrate every file (in parallel), write, diff.

Directories are walked recursively, skipping version-control folders, virtual environments
(any folder holding ``pyvenv.cfg``), ``site-packages``, caches and notebook checkpoints. Files
named explicitly are always processed. Results come back in path order whatever ``jobs`` is.

Two phases make the project-wide decision: the code (Python, notebooks) is migrated first;
where it still imports Petastorm decides, for the dependency files migrated second, whether
petastorm stays beside petastream (:class:`~.depfile.Project`). A dependency file's project
is the code under its folder (under the parent of a ``requirements/`` folder); where no code
of the run is there (``docker/requirements.txt``), it is all the code of the run, so a file
is never stripped of petastorm that some scanned code still needs.

``jobs=0`` (the command's default) uses one process per CPU once enough files mention
Petastorm to pay for starting them; the others never leave this process (a byte search).

LibCST's ``parallel_exec_transform_with_prettyprint`` runs one codemod per Python file and
writes or prints each result as it comes; this runner also needs the results back (diff mode,
the JSON report), files that are not Python (notebooks, dependency files), and the second
phase that depends on the first, so it keeps its own small pool.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from .depfile import Project
from .files import DEPENDENCY_KINDS, Options, file_kind, migrate_file, needs_migration
from .report import FileResult

__all__ = ["collect_files", "migrate_paths", "write_results", "unified_diff", "Progress"]

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        ".env",
        "site-packages",
        "dist-packages",
        "__pycache__",
        "node_modules",
        ".tox",
        ".nox",
        ".eggs",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
    }
)
PROGRESS_MIN_FILES = 50  # a terminal counter for fewer files only flickers
PROGRESS_INTERVAL_S = 5.0  # seconds between progress lines when stderr is not a terminal
PARALLEL_MIN_FILES = 16  # files to parse before jobs=0 starts worker processes


def _skip_dir(path: Path) -> bool:
    return (
        path.name in SKIP_DIRS
        or path.name.endswith(".egg-info")
        or (path / "pyvenv.cfg").is_file()
    )


def _excluded(path: Path, patterns: Sequence[str]) -> bool:
    text = path.as_posix()
    return any(fnmatch.fnmatch(text, p) or fnmatch.fnmatch(path.name, p) for p in patterns)


def collect_files(
    paths: Iterable[str | os.PathLike[str]], exclude: Sequence[str] = ()
) -> tuple[list[Path], list[FileResult]]:
    """The files to migrate, and an error result for each path that does not exist."""
    found: dict[Path, None] = {}
    missing: list[FileResult] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.setdefault(path, None)
        elif path.is_dir():
            for file in _walk(path, exclude):
                found.setdefault(file, None)
        else:
            missing.append(FileResult(str(raw), "unknown", error="no such file or directory"))
    return sorted(found, key=lambda p: p.as_posix()), missing


def _walk(root: Path, exclude: Sequence[str]) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        base = Path(folder)
        dirs[:] = sorted(
            d for d in dirs if not _skip_dir(base / d) and not _excluded(base / d, exclude)
        )
        for name in sorted(files):
            path = base / name
            if file_kind(path) is not None and not _excluded(path, exclude):
                yield path


def display_path(path: Path) -> str:
    try:
        return Path(os.path.relpath(path)).as_posix() if not path.is_absolute() else str(path)
    except ValueError:  # another drive on Windows
        return str(path)


def cpu_count() -> int:
    """CPUs this process may use (a container's limit, not the host's core count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _migrate_one(args: tuple[Path, Options]) -> FileResult:
    path, options = args
    return migrate_file(path, display_path(path), options)


def migrate_paths(
    paths: Iterable[str | os.PathLike[str]],
    options: Options | None = None,
    *,
    jobs: int = 1,
    exclude: Sequence[str] = (),
    progress: Progress | None = None,
) -> list[FileResult]:
    """Migrate every file under ``paths`` in memory; nothing is written.

    ``jobs``: worker processes; 0 picks one per CPU when there is enough to parse.
    """
    files, results = collect_files(paths, exclude)
    options = options or Options()
    if progress is not None:
        progress.start(len(files))
    code = [f for f in files if file_kind(f) not in DEPENDENCY_KINDS]
    deps = [f for f in files if file_kind(f) in DEPENDENCY_KINDS]
    with _Pool(jobs) as pool:
        code_results = pool.run([(f, options) for f in code], progress)
        uses = {path: _petastorm_uses(r) for path, r in zip(code, code_results, strict=True)}
        work = [(f, replace(options, project=project_of(f, uses))) for f in deps]
        dep_results = pool.run(work, progress)
    if progress is not None:
        progress.finish()
    return sorted([*results, *code_results, *dep_results], key=lambda r: r.path)


class _Pool:
    """Runs files in this process or, for enough work, in a process pool (started once)."""

    def __init__(self, jobs: int) -> None:
        self._jobs = jobs or cpu_count()
        self._auto = jobs == 0
        self._executor: ProcessPoolExecutor | None = None

    def __enter__(self) -> _Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._executor is not None:
            self._executor.shutdown()

    def run(self, files: list[tuple[Path, Options]], progress: Progress | None) -> list[FileResult]:
        """Results in the order of ``files``."""
        work: list[tuple[int, tuple[Path, Options]]] = []
        done: dict[int, FileResult] = {}
        for i, item in enumerate(files):  # files that never mention Petastorm: settled here
            if needs_migration(item[0]):
                work.append((i, item))
            else:
                done[i] = _migrate_one(item)
        if progress is not None:
            progress.advance(len(done))
        threshold = PARALLEL_MIN_FILES if self._auto else 2
        items = [item for _, item in work]
        if self._jobs > 1 and len(work) >= threshold:
            if self._executor is None:
                self._executor = ProcessPoolExecutor(max_workers=min(self._jobs, len(work)))
            chunk = max(1, len(work) // (self._jobs * 8))
            results = _counted(self._executor.map(_migrate_one, items, chunksize=chunk), progress)
        else:
            results = _counted(map(_migrate_one, items), progress)
        done.update(zip((i for i, _ in work), results, strict=True))
        return [done[i] for i in range(len(files))]


def _petastorm_uses(result: FileResult) -> tuple[str, ...]:
    """Where a code file still imports Petastorm; a file that could not be read or parsed
    counts as one that does, so no dependency file drops petastorm on its account."""
    uses = tuple(result.petastorm_uses())
    if result.error is not None and "petastorm" in (result.original or "petastorm").lower():
        uses += (f"{result.path} (not migrated: {result.error.split(':')[0]})",)
    return uses


def project_of(dependency_file: Path, uses: dict[Path, tuple[str, ...]]) -> Project:
    """What the code of ``dependency_file``'s project still needs (see the module docstring)."""
    base = dependency_file.parent
    if base.name == "requirements":
        base = base.parent
    base = base.resolve()
    mine = [found for path, found in uses.items() if base in path.resolve().parents]
    if not mine:  # no code of the run in its folder: every file of the run counts
        mine = list(uses.values())
    return Project(tuple(u for found in mine for u in found), code_scanned=bool(uses))


def _counted(results: Iterable[FileResult], progress: Progress | None) -> list[FileResult]:
    out = []
    for result in results:
        out.append(result)
        if progress is not None:
            progress.advance()
    return out


def write_results(results: Iterable[FileResult]) -> None:
    """Write every changed file in place (UTF-8, newlines exactly as in ``new``)."""
    for result in results:
        if not result.changed or result.new is None:
            continue
        try:
            Path(result.path).write_bytes(result.new.encode("utf-8"))
        except OSError as err:
            result.error = f"cannot write: {err.strerror or err}"
        else:
            result.written = True


def unified_diff(result: FileResult) -> str:
    if not result.changed or result.original is None or result.new is None:
        return ""
    lines = difflib.unified_diff(
        result.original.splitlines(keepends=True),
        result.new.splitlines(keepends=True),
        fromfile=f"a/{result.path}",
        tofile=f"b/{result.path}",
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


class Progress:
    """How far a run is, on stderr. On a terminal: a one-line ``\\r`` counter, shown only for
    many files. Anywhere else (a CI log, a pipe): a full line every ``interval`` seconds, so a
    long run shows it is alive from its first seconds on (a ``\\r`` counter would land in a
    log as one line at the end), and a short one prints none.

    ``tty`` defaults to ``stream.isatty()``; ``clock`` (seconds) and ``interval`` default to
    ``time.monotonic`` and :data:`PROGRESS_INTERVAL_S`.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        minimum: int = PROGRESS_MIN_FILES,
        *,
        tty: bool | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._tty = self._stream.isatty() if tty is None else tty
        self._minimum = minimum
        self._interval = PROGRESS_INTERVAL_S if interval is None else interval
        self._clock = clock
        self._total = 0
        self._done = 0
        self._shown = False
        self._started = self._last = 0.0

    @property
    def enabled(self) -> bool:
        return self._total >= self._minimum

    def start(self, total: int) -> None:
        self._total, self._done = total, 0
        self._started = self._clock()
        # a log's first line comes one interval in; a terminal's counter at once
        self._last = -math.inf if self._tty else self._started

    def advance(self, count: int = 1) -> None:
        if count <= 0:
            return
        before, self._done = self._done, self._done + count
        now = self._clock()
        if not self._tty:
            if now - self._last >= self._interval:
                self._write(f"{self._counts(now)}\n", now)
            return
        # every 10 files, at most 10 times a second, and always the last one
        due = self._done == self._total or (self._done // 10 > before // 10 and now - self._last >= 0.1)
        if self.enabled and due:
            self._write(f"\r{self._counts(now)}", now)

    def _counts(self, now: float) -> str:
        return f"petastream migrate: {self._done}/{self._total} files ({now - self._started:.0f} s)"

    def _write(self, text: str, now: float) -> None:
        self._stream.write(text)
        self._stream.flush()
        self._shown, self._last = True, now

    def finish(self) -> None:
        if self._shown and self._tty:
            self._stream.write("\r\033[K")
            self._stream.flush()
