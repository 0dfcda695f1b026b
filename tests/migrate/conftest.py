"""Helpers for the migrate tests: before/after assertions (with idempotence) and the CLI."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from petastream.cli import main as cli_main
from petastream.migrate import runner
from petastream.migrate.python import PythonResult, migrate_python


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def migrate(before: str, *, todo: bool = False) -> PythonResult:
    return migrate_python(dedent(before), todo=todo)


def assert_migrates(
    before: str, after: str, items: Sequence[str] = (), *, todo: bool = False
) -> PythonResult:
    """``before`` becomes exactly ``after``, with items (manual items and notes) of the given
    codes, and a second run over ``after`` changes nothing and reports the same manual items
    (notes describe a rewrite, so they come with the run that makes it)."""
    result = migrate(before, todo=todo)
    assert result.code == dedent(after)
    assert [i.code for i in result.items] == list(items)
    again = migrate_python(result.code, todo=todo)
    assert again.code == result.code, "second run changed the code"
    assert [i.code for i in again.items] == [i.code for i in result.items if i.is_manual]
    return result


def assert_unchanged(source: str, items: Sequence[str] = ()) -> PythonResult:
    return assert_migrates(source, source, items)


@dataclass
class CliRun:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliRun]:
    """``petastream migrate ARGS`` in-process, from ``cwd`` (default: the current directory)."""

    # Progress lines in a log are time-based: a slow machine would add them to any run's
    # stderr. The tests of progress set their own interval.
    monkeypatch.setattr(runner, "PROGRESS_INTERVAL_S", math.inf, raising=False)

    def run(*args: str, cwd: Path | None = None) -> CliRun:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        code = cli_main(["migrate", *args])
        captured = capsys.readouterr()
        return CliRun(code, captured.out, captured.err)

    return run


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dedent(text), encoding="utf-8")
    return root
