"""Walk the given paths, migrate every file (in parallel with ``jobs > 1``), write, diff.

Directories are walked recursively, skipping version-control folders, virtual environments
(any folder holding ``pyvenv.cfg``), ``site-packages``, caches and notebook checkpoints. Files
named explicitly are always processed. Results come back in path order whatever ``jobs`` is.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TextIO

from .files import Options, file_kind, migrate_file
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
PROGRESS_MIN_FILES = 50


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
    """Migrate every file under ``paths`` in memory; nothing is written."""
    files, results = collect_files(paths, exclude)
    work = [(f, options or Options()) for f in files]
    if progress is not None:
        progress.start(len(work))
    if jobs > 1 and len(work) > 1:
        with ProcessPoolExecutor(max_workers=min(jobs, len(work))) as pool:
            done: Iterable[FileResult] = pool.map(_migrate_one, work, chunksize=max(1, len(work) // (jobs * 8)))
            results += _counted(done, progress)
    else:
        results += _counted(map(_migrate_one, work), progress)
    if progress is not None:
        progress.finish()
    return sorted(results, key=lambda r: r.path)


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
    """A one-line ``\\r`` counter on a terminal, shown only for many files."""

    def __init__(self, stream: TextIO | None = None, minimum: int = PROGRESS_MIN_FILES) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._minimum = minimum
        self._total = 0
        self._done = 0
        self._shown = False

    @property
    def enabled(self) -> bool:
        return self._total >= self._minimum

    def start(self, total: int) -> None:
        self._total, self._done = total, 0

    def advance(self) -> None:
        self._done += 1
        if self.enabled and (self._done == self._total or self._done % 10 == 0):
            self._stream.write(f"\rpetastream migrate: {self._done}/{self._total} files")
            self._stream.flush()
            self._shown = True

    def finish(self) -> None:
        if self._shown:
            self._stream.write("\r\033[K")
            self._stream.flush()
