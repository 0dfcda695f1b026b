"""What a migration found: manual items, per-file results, the run's report.

The JSON report (``--report FILE``) is :meth:`Report.to_json`; the human summary printed after
every run is :meth:`Report.summary_lines`. Line numbers are 1-based and refer to the file as it
was read (for a Jupyter notebook: the line within the code cell, with the cell's index).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

__all__ = ["ManualItem", "FileResult", "Report", "TODO_PREFIX"]

REPORT_VERSION = 1
TODO_PREFIX = "# TODO(petastream): "


@dataclass(frozen=True)
class ManualItem:
    """Something the tool left as it was and a person has to migrate.

    ``code`` is a stable short identifier (``unsupported-import``, ``unsupported-use``,
    ``unsupported-patch-target``, ``shadowed-import``, ``conf-key-bug``,
    ``unsupported-requirement``, ``unsupported-install``); ``uses`` lists where else in the
    file the same name is used (``"14"``, or ``"cell 3:2"`` in a notebook). ``cell`` is the
    1-based index of a Jupyter notebook's cell (all cells counted), None elsewhere.
    """

    line: int
    code: str
    message: str
    suggestion: str
    column: int = 0
    cell: int | None = None
    uses: tuple[str, ...] = ()

    @property
    def todo_comment(self) -> str:
        return f"{TODO_PREFIX}{self.message}; {self.suggestion}"

    def moved(self, line: int, cell: int | None, uses: tuple[str, ...] = ()) -> ManualItem:
        return replace(self, line=line, cell=cell, uses=uses)

    def location(self, path: str) -> str:
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{path}:{cell}{self.line}"

    def to_dict(self, path: str) -> dict[str, Any]:
        data = asdict(self)
        data["uses"] = list(self.uses)
        data["location"] = self.location(path)
        return data


@dataclass
class FileResult:
    """The outcome for one file. ``new`` is set only when the file would change."""

    path: str
    kind: str
    original: str | None = None
    new: str | None = None
    items: list[ManualItem] = field(default_factory=list)
    error: str | None = None
    written: bool = False

    @property
    def changed(self) -> bool:
        return self.new is not None and self.new != self.original

    @property
    def flagged(self) -> bool:
        return bool(self.items)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "changed": self.changed,
            "written": self.written,
            "error": self.error,
            "items": [item.to_dict(self.path) for item in self.items],
        }


@dataclass
class Report:
    """All file results of one run, in path order."""

    mode: str
    results: list[FileResult]

    @classmethod
    def build(cls, mode: str, results: Iterable[FileResult]) -> Report:
        return cls(mode, sorted(results, key=lambda r: r.path))

    @property
    def changed(self) -> list[FileResult]:
        return [r for r in self.results if r.changed]

    @property
    def flagged(self) -> list[FileResult]:
        return [r for r in self.results if r.flagged]

    @property
    def errors(self) -> list[FileResult]:
        return [r for r in self.results if r.error is not None]

    @property
    def item_count(self) -> int:
        return sum(len(r.items) for r in self.results)

    def exit_code(self) -> int:
        """2: errors; 1: manual items remain, or changes are pending in check mode; else 0."""
        if self.errors:
            return 2
        if self.flagged or (self.mode == "check" and self.changed):
            return 1
        return 0

    def summary(self) -> dict[str, int]:
        return {
            "files_scanned": len(self.results),
            "files_changed": len(self.changed),
            "files_flagged": len(self.flagged),
            "files_errored": len(self.errors),
            "manual_items": self.item_count,
        }

    def to_json(self) -> str:
        data = {
            "version": REPORT_VERSION,
            "tool": "petastream migrate",
            "mode": self.mode,
            "exit_code": self.exit_code(),
            "summary": self.summary(),
            "files": [
                r.to_dict() for r in self.results if r.changed or r.flagged or r.error is not None
            ],
        }
        return json.dumps(data, indent=2) + "\n"

    def summary_lines(self) -> list[str]:
        """The human summary: errors, manual items per file, then the counts."""
        lines: list[str] = []
        for r in self.errors:
            lines.append(f"error: {r.path}: {r.error}")
        for r in self.flagged:
            lines.append(f"{r.path}: {len(r.items)} item(s) to migrate by hand")
            for item in r.items:
                also = f" (also used at {', '.join(item.uses)})" if item.uses else ""
                lines.append(f"  {item.location(r.path)}: {item.message}{also}")
                lines.append(f"      suggestion: {item.suggestion}")
        lines.append(self._counts_line())
        return lines

    def _counts_line(self) -> str:
        s = self.summary()
        verb = {"write": "changed", "check": "would change", "diff": "would change"}[self.mode]
        tail = {
            "write": "",
            "check": "",
            "diff": " (nothing written; run with --write to apply)",
        }[self.mode]
        return (
            f"petastream migrate: {s['files_scanned']} file(s) scanned, "
            f"{s['files_changed']} {verb}, {s['files_flagged']} flagged "
            f"({s['manual_items']} manual item(s)), {s['files_errored']} error(s){tail}"
        )
