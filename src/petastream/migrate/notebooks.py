"""Jupyter notebooks (.ipynb) and Databricks source notebooks (.py).

Jupyter: only code cells change, and only their ``source``; outputs, execution counts,
metadata and markdown are kept, and the JSON is written back in the file's own layout
(indent, key order, trailing newline). Cells share one namespace, so the Python cells are
migrated together, as one module: an ``import petastorm`` in the first cell and its uses in
the fifth are seen together. If that module does not parse, each cell is migrated on its own
and the cells that do not parse are reported.

Databricks source notebooks (``# Databricks notebook source``, cells split by
``# COMMAND ----------``, other languages and magics as ``# MAGIC`` comment lines) are Python
files already; their ``# MAGIC %pip install petastorm`` lines are rewritten as well. Exported
by hand or by other tools, their cells may also hold what a Jupyter cell may: bare magics
(``%pip install``, ``!pip install``) and leading indentation. Such a file does not parse as
one module, so it is migrated as its cells are in a Jupyter notebook (magics masked, each cell
dedented, all cells as one module, then re-indented), keeping the file's line numbers.

``%pip install`` is notebook-scoped (Databricks) or installs into the notebook's kernel, so a
notebook decides for itself: while its own code still imports Petastorm, its ``pip install``
keeps petastorm and installs petastream beside it. Pins on the same line that conflict with
petastream are reported (:mod:`.pins`).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from petastream.errors import FormatError, InternalError

from .import_order import ImportStyle
from .magics import (
    MaskedCell,
    cell_language,
    conda_item,
    dedent_cell,
    mask_cell,
    reindent_cell,
    rewrite_magics,
    rewrite_shell,
    unmask,
)
from .pep508 import pip_requirements, rewrite_pip_command
from .pins import parse_pep508, review_pin
from .python import describe_parse_error, migrate_python
from .report import ManualItem

__all__ = ["is_databricks_source", "migrate_databricks", "migrate_ipynb", "NotebookResult"]

_DATABRICKS_HEADER = "# Databricks notebook source"
_MAGIC_LINE = re.compile(r"#\s*MAGIC\b")


@dataclass
class NotebookResult:
    text: str
    items: list[ManualItem] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


# -- Databricks source ----------------------------------------------------------------------------


def is_databricks_source(text: str) -> bool:
    return text.lstrip("\ufeff").startswith(_DATABRICKS_HEADER)


_COMMAND = re.compile(r"^# COMMAND -+[ \t]*$", re.M)


def migrate_databricks(
    text: str, *, todo: bool = False, style: ImportStyle | None = None
) -> NotebookResult:
    """Raises ``libcst.ParserSyntaxError`` when the Python in it does not parse, even with
    its bare magics masked and its cells dedented."""
    try:
        result = migrate_python(text, todo=todo, style=style)
        code, items = result.code, list(result.items)
    except cst.ParserSyntaxError:
        code, items = _migrate_databricks_cells(text, todo, style)
    lines = code.split("\n")
    keep = any(item.keeps_petastorm for item in items)
    for i, line in enumerate(lines):
        if _MAGIC_LINE.match(line):
            lines[i] = rewrite_pip_command(line, keep_petastorm=keep) or line
            items += pip_pin_items(lines[i], i + 1, None, keep)
            conda = conda_item(line, i + 1)
            if conda is not None:
                items.append(conda)
    return NotebookResult("\n".join(lines), sorted(items, key=lambda it: it.line))


def _migrate_databricks_cells(
    text: str, todo: bool, style: ImportStyle | None
) -> tuple[str, list[ManualItem]]:
    """The file with bare magics masked and every cell dedented (line for line, so the
    parser's line numbers are the file's), migrated as one module, then put back."""
    masked = mask_cell(text)
    cells = _split_commands(masked.code)
    dedented = [dedent_cell(cell) for cell in cells]
    result = migrate_python(_join_commands(masked.code, [d[0] for d in dedented]), todo=todo,
                            style=style)
    migrated = _split_commands(result.code)
    if len(migrated) != len(cells):  # a separator went with a removed statement
        raise InternalError("the migration moved a '# COMMAND' cell separator")
    body = [reindent_cell(cell, code, new, prefix)
            for cell, (code, prefix), new in zip(cells, dedented, migrated, strict=True)]
    keep = any(item.keeps_petastorm for item in result.items)
    code = unmask(_join_commands(result.code, body), rewrite_magics(masked, keep_petastorm=keep))
    return code, list(result.items)


def _split_commands(text: str) -> list[str]:
    """The cells' texts between the ``# COMMAND ----------`` lines (the lines excluded)."""
    return _COMMAND.split(text)


def _join_commands(template: str, cells: list[str]) -> str:
    """``cells`` joined by the separator lines of ``template``, as they are written there."""
    separators = _COMMAND.findall(template)
    out = [cells[0]]
    for separator, cell in zip(separators, cells[1:], strict=True):
        out += [separator, cell]
    return "".join(out)


def pip_pin_items(line: str, number: int, cell: int | None, keep: bool) -> list[ManualItem]:
    """Pins installed with petastream by one ``pip install`` line that conflict with it."""
    requirements = [r for r in (parse_pep508(t) for t in pip_requirements(line)) if r is not None]
    ours = [r for r in requirements if r.name.lower() == "petastream"]
    if not ours:
        return []
    items = []
    for req in requirements:
        if req.name.lower() in ("petastream", "petastorm"):
            continue
        review = review_pin(req.name, req.specifier, "", keep_petastorm=keep, written=str(req))
        if review is not None and review.action == "conflict":
            items.append(
                ManualItem(number, "conflicting-pin", review.message, review.suggestion, cell=cell)
            )
    return items


# -- Jupyter ------------------------------------------------------------------------------------------


@dataclass
class _Cell:
    index: int  # position among all cells, 0-based
    language: str
    source: str
    masked: MaskedCell = field(default_factory=lambda: MaskedCell(""))
    code: str = ""  # masked and dedented: what the parser sees
    indent: str = ""  # the indentation dedent_cell removed


def migrate_ipynb(text: str, *, todo: bool = False, style: ImportStyle | None = None) -> NotebookResult:
    """Raises :class:`~petastream.errors.FormatError` (a ``ValueError``) when ``text`` is not a
    notebook."""
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as err:
        raise FormatError(f"not a JSON notebook: {err}") from err
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise FormatError("not a Jupyter notebook: no 'cells' list")
    if _language(notebook) not in ("python", None):
        return NotebookResult(text)
    cells = _code_cells(notebook["cells"])
    result = NotebookResult(text)
    migrated = _migrate_cells(cells, todo, result, style)
    keep = any(item.keeps_petastorm for item in result.items)
    new_sources: dict[int, str] = {}
    for cell in cells:
        if cell.index in migrated:
            body = reindent_cell(cell.masked.code, cell.code, migrated[cell.index], cell.indent)
            new_sources[cell.index] = unmask(body, rewrite_magics(cell.masked, keep_petastorm=keep))
        elif cell.language == "shell":
            new_sources[cell.index] = rewrite_shell(cell.source, keep_petastorm=keep)
        for n, line in enumerate(new_sources.get(cell.index, cell.source).split("\n"), start=1):
            result.items += pip_pin_items(line, n, cell.index + 1, keep)
            item = conda_item(line, n, cell.index + 1)
            if item is not None:
                result.items.append(item)
    changed = False
    for cell in cells:
        new = new_sources.get(cell.index, cell.source)
        if new != cell.source:
            _set_source(notebook["cells"][cell.index], new)
            changed = True
    if changed:
        result.text = _dump_like(notebook, text)
    result.items.sort(key=lambda it: (it.cell or 0, it.line, it.column))
    return result


def _language(notebook: dict[str, Any]) -> str | None:
    metadata = notebook.get("metadata") or {}
    language = (metadata.get("kernelspec") or {}).get("language") or (
        metadata.get("language_info") or {}
    ).get("name")
    return language.lower() if isinstance(language, str) else None


def _code_cells(raw_cells: list[Any]) -> list[_Cell]:
    cells = []
    for index, raw in enumerate(raw_cells):
        if isinstance(raw, dict) and raw.get("cell_type") == "code":
            source = raw.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            cells.append(_Cell(index, cell_language(source), source))
    return cells


def _set_source(raw: dict[str, Any], new: str) -> None:
    raw["source"] = new.splitlines(keepends=True) if isinstance(raw.get("source"), list) else new


def _migrate_cells(
    cells: list[_Cell], todo: bool, result: NotebookResult, style: ImportStyle | None
) -> dict[int, str]:
    """Each Python cell's migrated code (masked and dedented, as the parser saw it)."""
    python = [c for c in cells if c.language == "python" and "petastorm" in c.source.lower()]
    if not python:
        return {}
    python = [c for c in cells if c.language == "python"]
    next_index = 0
    for cell in python:
        cell.masked = mask_cell(cell.source, next_index)
        cell.code, cell.indent = dedent_cell(cell.masked.code)
        next_index += len(cell.masked.originals)
    try:
        return _migrate_joined(python, todo, result, style)
    except cst.ParserSyntaxError:
        return _migrate_one_by_one(python, todo, result, style)


def _migrate_joined(
    cells: list[_Cell], todo: bool, result: NotebookResult, style: ImportStyle | None
) -> dict[int, str]:
    marker = f"# petastream-migrate-cell-{uuid.uuid4().hex[:12]}"
    parts, starts = [], []
    line = 1
    for cell in cells:
        body = cell.code if cell.code.endswith("\n") or not cell.code else cell.code + "\n"
        parts.append(f"{marker} {cell.index}\n{body}")
        starts.append((line + 1, cell))
        line += 1 + body.count("\n")
    migrated = migrate_python(
        "".join(parts), todo=todo, style=style, barrier=lambda c: c.startswith(marker)
    )
    pieces = re.split(rf"^{re.escape(marker)} (\d+)\n", migrated.code, flags=re.M)
    if pieces[0] or [int(p) for p in pieces[1::2]] != [c.index for c in cells]:
        raise InternalError("notebook cells were reordered by the migration")
    new: dict[int, str] = {}
    for cell, body in zip(cells, pieces[2::2], strict=True):
        if not cell.code.endswith("\n") and cell.code:
            body = body[:-1] if body.endswith("\n") else body
        new[cell.index] = body

    def locate(line: int) -> tuple[int, int]:
        start, cell = max((s, c) for s, c in starts if s <= line)
        return cell.index + 1, line - start + 1

    for item in migrated.items:
        cell_no, cell_line = locate(item.line)
        uses = tuple(f"cell {c}:{n}" for c, n in (locate(int(u)) for u in item.uses))
        result.items.append(item.moved(cell_line, cell_no, uses))
    return new


def _migrate_one_by_one(
    cells: list[_Cell], todo: bool, result: NotebookResult, style: ImportStyle | None
) -> dict[int, str]:
    new: dict[int, str] = {}
    for cell in cells:
        try:
            migrated = migrate_python(cell.code, todo=todo, style=style)
        except cst.ParserSyntaxError as err:
            result.errors.append(f"cell {cell.index + 1}: {describe_parse_error(err, cell.code)}")
            continue
        new[cell.index] = migrated.code
        for item in migrated.items:
            uses = tuple(f"cell {cell.index + 1}:{u}" for u in item.uses)
            result.items.append(item.moved(item.line, cell.index + 1, uses))
    return new


def _dump_like(notebook: dict[str, Any], original: str) -> str:
    """Serialise ``notebook`` with the layout of ``original`` (nbformat writes indent=1)."""
    indent_match = re.search(r'^( +)"', original, flags=re.M)
    indent = len(indent_match.group(1)) if indent_match else None
    ascii_only = "\\u" in original and all(ord(ch) < 128 for ch in original)
    text = json.dumps(notebook, indent=indent, ensure_ascii=ascii_only)
    return text + "\n" if original.endswith("\n") else text
