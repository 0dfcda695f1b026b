"""What a migration found: manual items, notes, per-file results, the run's report.

The JSON report (``--report FILE``) is :meth:`Report.to_json`; the human summary printed after
every run is :meth:`Report.summary_lines`. Line numbers are 1-based and refer to the file as it
was read (for a Jupyter notebook: the line within the code cell, with the cell's index).

Exit codes (:meth:`Report.exit_code`, documented in ``--help`` and docs/migrate-tool.md), in
the spirit of ruff: 0 nothing left to do; 1 ``--check`` only: files would change; 2 errors;
3 nothing to rewrite, but manual items remain. Notes (severity ``info``) never change the exit
code: they describe a rewrite that was made and is worth knowing about.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

__all__ = [
    "ManualItem",
    "FileResult",
    "Report",
    "TODO_PREFIX",
    "EXIT_OK",
    "EXIT_PENDING",
    "EXIT_ERROR",
    "EXIT_MANUAL",
]

REPORT_VERSION = 2
TODO_PREFIX = "# TODO(petastream): "
EXIT_OK, EXIT_PENDING, EXIT_ERROR, EXIT_MANUAL = 0, 1, 2, 3

# Items whose code means a Petastorm import (or a patch target that imports Petastorm) is
# still in the file after the migration, so the project must keep depending on petastorm.
KEEPS_PETASTORM = frozenset(
    {
        "unsupported-import",
        "unsupported-use",
        "unsupported-patch-target",
        "shadowed-import",
        "kept-with-petastorm-reader",
    }
)


@dataclass(frozen=True)
class ManualItem:
    """Something the tool left as it was and a person has to migrate.

    ``code`` is a stable short identifier (``unsupported-import``, ``unsupported-use``,
    ``unsupported-patch-target``, ``shadowed-import``, ``conf-key-bug``,
    ``unsupported-requirement``, ``unsupported-install``, ``kept-with-petastorm-reader``,
    ``cache-layout``, ``petastorm-kept``, ``conflicting-pin``, ``regenerate-lock``; notes:
    ``custom-collate-fn``, ``loader-reader-unchecked``, ``petastorm-pin``, ``pin-rewritten``,
    ``dependencies-unchecked``);
    ``uses`` lists where else in the file the same name is used (``"14"``, or ``"cell 3:2"``
    in a notebook). ``cell`` is the 1-based index of a Jupyter notebook's cell (all cells
    counted), None elsewhere. ``severity`` is ``manual`` (a person has to act) or ``info``.
    """

    line: int
    code: str
    message: str
    suggestion: str
    column: int = 0
    cell: int | None = None
    uses: tuple[str, ...] = ()
    severity: str = "manual"

    @property
    def is_manual(self) -> bool:
        return self.severity == "manual"

    @property
    def keeps_petastorm(self) -> bool:
        """True when the file still imports Petastorm because of this item."""
        return self.code in KEEPS_PETASTORM

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
        data["keeps_petastorm"] = self.keeps_petastorm
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
    def manual_items(self) -> list[ManualItem]:
        return [i for i in self.items if i.is_manual]

    @property
    def notes(self) -> list[ManualItem]:
        return [i for i in self.items if not i.is_manual]

    @property
    def flagged(self) -> bool:
        return any(i.is_manual for i in self.items)

    def petastorm_uses(self) -> list[str]:
        """Where this file still imports Petastorm after the migration (``path:line``)."""
        return [i.location(self.path) for i in self.items if i.keeps_petastorm]

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
        return sum(len(r.manual_items) for r in self.results)

    @property
    def note_count(self) -> int:
        return sum(len(r.notes) for r in self.results)

    def exit_code(self) -> int:
        """2 errors; 1 ``--check`` and files would change; 3 manual items remain; else 0."""
        if self.errors:
            return EXIT_ERROR
        if self.mode == "check" and self.changed:
            return EXIT_PENDING
        if self.flagged:
            return EXIT_MANUAL
        return EXIT_OK

    def petastorm_uses(self) -> list[str]:
        return [use for r in self.results for use in r.petastorm_uses()]

    def summary(self) -> dict[str, int]:
        return {
            "files_scanned": len(self.results),
            "files_changed": len(self.changed),
            "files_flagged": len(self.flagged),
            "files_errored": len(self.errors),
            "manual_items": self.item_count,
            "notes": self.note_count,
            "petastorm_uses_left": len(self.petastorm_uses()),
        }

    def to_json(self) -> str:
        data = {
            "version": REPORT_VERSION,
            "tool": "petastream migrate",
            "mode": self.mode,
            "exit_code": self.exit_code(),
            "summary": self.summary(),
            "files": [
                r.to_dict() for r in self.results if r.changed or r.items or r.error is not None
            ],
        }
        return json.dumps(data, indent=2) + "\n"

    def summary_lines(self) -> list[str]:
        """The human summary: errors, manual items per file, then the counts."""
        lines: list[str] = []
        for r in self.errors:
            lines.append(f"error: {r.path}: {r.error}")
        for r in self.results:
            if not r.items:
                continue
            manual, notes = len(r.manual_items), len(r.notes)
            head = [f"{manual} item(s) to migrate by hand"] if manual else []
            head += [f"{notes} note(s)"] if notes else []
            lines.append(f"{r.path}: {', '.join(head)}")
            for item in r.items:
                also = f" (also used at {', '.join(item.uses)})" if item.uses else ""
                kind = "" if item.is_manual else "note: "
                lines.append(f"  {item.location(r.path)}: {kind}{item.message}{also}")
                lines.append(f"      suggestion: {item.suggestion}")
        uses = self.petastorm_uses()
        if uses:
            files = len({r.path for r in self.results if r.petastorm_uses()})
            lines.append(
                f"petastorm stays a dependency: {len(uses)} usage(s) in {files} file(s) still "
                "import it (see the items above); migrate them and run again to drop it"
            )
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
        notes = f", {s['notes']} note(s)" if s["notes"] else ""
        return (
            f"petastream migrate: {s['files_scanned']} file(s) scanned, "
            f"{s['files_changed']} {verb}, {s['files_flagged']} flagged "
            f"({s['manual_items']} manual item(s)), {s['files_errored']} error(s){notes}{tail}"
        )
