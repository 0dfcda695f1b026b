"""Keep migrated imports the way isort / ``ruff check --select I`` wants them.

Rewriting ``from petastorm.spark import a`` and ``from petastorm import B`` gives two
``from petastream.compat import ...`` lines, and ``petastream`` sorts after ``petastorm``, so a
file that passed ``ruff check --select I`` would fail it after the migration. This pass, run
only over files whose imports the migration changed, works on each group of import
statements (consecutive import lines; a blank line starts a new group, as isort's sections):

- ``from petastream... import`` statements of one module are merged into the first (names in
  isort's order when they were in it; one per line, with their comments, when any has a
  comment or the line would be longer than the configured line length);
- when the group's other statements are in isort's order (ruff's defaults: ``import x``
  before ``from x import``, case-insensitive natural order, names constants-classes-rest),
  the petastream statements move to their place in it; otherwise the order is left alone.

Settings come from the nearest ruff/isort configuration (:func:`style_for`): ``line-length``,
``force-single-line`` (then nothing is merged) and ``force-sort-within-sections``.

LibCST's ``AddImportsVisitor`` also merges into an existing ``from`` import, but only at
module level and appending names in arrival order at the end of the first import block, so
it would neither keep a function's local imports in place nor keep isort's order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import libcst as cst

from petastream.errors import InternalError

from .edits import full_name

__all__ = ["ImportStyle", "style_for", "tidy_imports", "module_name"]

_CONFIG_FILES = ("pyproject.toml", "ruff.toml", ".ruff.toml", "setup.cfg", ".isort.cfg", "tox.ini")


@dataclass(frozen=True)
class ImportStyle:
    line_length: int = 88
    force_single_line: bool = False
    force_sort_within_sections: bool = False


def style_for(path: Path) -> ImportStyle:
    """The import style of the nearest configuration above ``path`` (defaults without one)."""
    return _style_in(path.resolve().parent)


@lru_cache(maxsize=256)
def _style_in(folder: Path) -> ImportStyle:
    for directory in (folder, *folder.parents):
        for name in _CONFIG_FILES:
            style = _read_style(directory / name)
            if style is not None:
                return style
        if (directory / ".git").exists():
            break
    return ImportStyle()


def _read_style(path: Path) -> ImportStyle | None:
    """An ImportStyle when ``path`` configures ruff or isort, else None."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    sections = re.findall(r"(?m)^\s*\[(tool\.ruff[^\]]*|tool\.isort|isort|tool:isort|lint[^\]]*)\]", text)
    if not sections and path.name not in ("ruff.toml", ".ruff.toml", ".isort.cfg"):
        return None

    def flag(*keys: str) -> bool:
        pattern = "|".join(re.escape(k) for k in keys)
        return re.search(rf"(?im)^\s*(?:{pattern})\s*[=:]\s*true\b", text) is not None

    length = re.search(r"(?im)^\s*(?:line-length|line_length)\s*[=:]\s*(\d+)", text)
    google = re.search(r"""(?im)^\s*profile\s*[=:]\s*["']?google""", text) is not None
    return ImportStyle(
        line_length=int(length.group(1)) if length else 88,
        force_single_line=google or flag("force-single-line", "force_single_line"),
        force_sort_within_sections=google or flag("force-sort-within-sections", "force_sort_within_sections"),
    )


# -- isort's order --------------------------------------------------------------------------------


def _natural(text: str) -> tuple[tuple[int, Any], ...]:
    return tuple((1, int(part)) if part.isdigit() else (0, part) for part in re.split(r"(\d+)", text) if part)


def _member_key(alias: cst.ImportAlias) -> tuple[Any, ...]:
    name = full_name(alias.name) or ""
    kind = 0 if len(name) > 1 and name.isupper() else 1 if name[:1].isupper() else 2
    return (kind, _natural(name.lower()), _natural(name))


def module_name(statement: cst.BaseSmallStatement) -> str:
    """What an import statement imports (``from .a import b`` -> ``.a``); "" otherwise."""
    if isinstance(statement, (cst.Import, cst.ImportFrom)):
        return _module(statement)
    return ""


def _module(statement: cst.Import | cst.ImportFrom) -> str:
    if isinstance(statement, cst.Import):
        return full_name(statement.names[0].name) or ""
    dots = "." * len(statement.relative)
    return dots + (full_name(statement.module) or "") if statement.module is not None else dots


def _statement_key(statement: cst.Import | cst.ImportFrom, style: ImportStyle) -> tuple[Any, ...]:
    from_import = isinstance(statement, cst.ImportFrom)
    module = _module(statement)
    first = None
    if isinstance(statement, cst.ImportFrom) and not isinstance(statement.names, cst.ImportStar):
        first = _member_key(statement.names[0])  # ties (force-single-line): by the name
    name_key = (_natural(module.lower()), _natural(module), first or ())
    if style.force_sort_within_sections:
        return (name_key, from_import)
    return (from_import, name_key)


# -- the pass ------------------------------------------------------------------------------------------


def tidy_imports(
    module: cst.Module,
    style: ImportStyle | None = None,
    *,
    origins: Mapping[cst.CSTNode, cst.Import | cst.ImportFrom] | None = None,
    barrier: Callable[[str], bool] | None = None,
) -> cst.Module:
    """``module`` with its petastream imports merged and in order (see the module docstring).

    ``origins``: for each rewritten import statement, the statement it replaces (a group is
    re-sorted only if it was in order before the rewrite); ``barrier``: a comment
    for which this returns True starts a new group (notebook cell markers).
    """
    tidy = _Tidy(style or ImportStyle(), module, origins or {}, barrier)
    return cst.ensure_type(module.visit(tidy), cst.Module)


def _import_of(line: cst.CSTNode) -> cst.Import | cst.ImportFrom | None:
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        statement = line.body[0]
        if isinstance(statement, (cst.Import, cst.ImportFrom)):
            return statement
    return None


def _statement(line: cst.SimpleStatementLine) -> cst.Import | cst.ImportFrom:
    """The import of a line in an import group (groups hold import lines only)."""
    statement = _import_of(line)
    if statement is None:  # pragma: no cover - _tidy_body groups import lines only
        raise InternalError("not an import line")
    return statement


def _aliases(statement: cst.ImportFrom) -> list[cst.ImportAlias]:
    return [] if isinstance(statement.names, cst.ImportStar) else list(statement.names)


def _is_ours(statement: cst.Import | cst.ImportFrom) -> bool:
    module = _module(statement)
    return module == "petastream" or module.startswith("petastream.")


class _Tidy(cst.CSTTransformer):
    def __init__(
        self,
        style: ImportStyle,
        module: cst.Module,
        origins: Mapping[cst.CSTNode, cst.Import | cst.ImportFrom],
        barrier: Callable[[str], bool] | None,
    ) -> None:
        super().__init__()
        self._style = style
        self._origins = origins
        self._barrier = barrier or (lambda comment: False)
        self._indents = [""]
        self._default_indent = module.default_indent

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        return False  # lines are kept as objects: origins are keyed by their statements

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        indent = node.indent if node.indent is not None else self._default_indent
        self._indents.append(self._indents[-1] + indent)

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> Any:
        body = self._tidy_body(list(updated_node.body))
        self._indents.pop()
        return updated_node.with_changes(body=body)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> Any:
        return updated_node.with_changes(body=self._tidy_body(list(updated_node.body)))

    # groups of import lines -----------------------------------------------------------------------

    def _tidy_body(self, body: list[Any]) -> list[Any]:
        out: list[Any] = []
        group: list[cst.SimpleStatementLine] = []
        for line in body:
            statement = _import_of(line)
            if statement is not None and group and not self._starts_group(line):
                group.append(line)
                continue
            out += self._tidy_group(group)
            group = [line] if statement is not None else []
            if statement is None:
                out.append(line)
        return out + self._tidy_group(group)

    def _starts_group(self, line: cst.SimpleStatementLine) -> bool:
        for empty in line.leading_lines:
            if empty.comment is None or self._barrier(empty.comment.value):
                return True
        return False

    def _tidy_group(self, group: list[cst.SimpleStatementLine]) -> list[cst.SimpleStatementLine]:
        if not any(_is_ours(_statement(line)) for line in group):
            return group
        was_in_order = self._in_order_before(group)
        group = self._merged(group, was_in_order)
        if not was_in_order:  # not isort's layout: only undo the duplication the rewrite made
            return group
        group = self._sorted(group)
        return [self._wrapped(line) if _is_ours(_statement(line)) else line for line in group]

    def _in_order_before(self, group: list[cst.SimpleStatementLine]) -> bool:
        """Was the group in isort's order before the rewrite (original module names)?"""
        keys = []
        for line in group:
            statement = _statement(line)
            keys.append(_statement_key(self._origins.get(statement, statement), self._style))
        return keys == sorted(keys)

    def _sorted(self, group: list[cst.SimpleStatementLine]) -> list[cst.SimpleStatementLine]:
        ordered = sorted(group, key=lambda line: _statement_key(_statement(line), self._style))
        if ordered == group:
            return group
        # The group's first line carries the blank lines above the group: they stay on top.
        head = list(group[0].leading_lines)
        cut = next((i for i, e in enumerate(head) if e.comment is not None), len(head))
        out = []
        for line in ordered:
            # compare the lines as they were: ``line`` is a new object once its leading lines
            # change, and the group's first line is often still first (its blank line stays)
            new = line
            if line is group[0]:
                new = new.with_changes(leading_lines=head[cut:])
            if line is ordered[0]:
                new = new.with_changes(leading_lines=[*head[:cut], *new.leading_lines])
            out.append(new)
        return out

    def _merged(self, group: list[cst.SimpleStatementLine], isort_layout: bool) -> list[cst.SimpleStatementLine]:
        """Same-module petastream from-imports merged: all of them in an isort layout, else
        only those the rewrite made from different modules (the file's own duplicates stay)."""
        if self._style.force_single_line:
            return group
        by_module: dict[str, list[int]] = {}
        for i, line in enumerate(group):
            statement = _import_of(line)
            if isinstance(statement, cst.ImportFrom) and _is_ours(statement) and not isinstance(statement.names, cst.ImportStar):
                by_module.setdefault(_module(statement), []).append(i)
        drop: set[int] = set()
        replaced: dict[int, cst.SimpleStatementLine] = {}
        for module, indices in by_module.items():
            if not isort_layout:  # one statement per original module
                first: dict[str, int] = {}
                for i in indices:
                    first.setdefault(self._origin(group[i]), i)
                indices = sorted(first.values())
            if len(indices) < 2:
                continue
            lines = [group[i] for i in indices]
            replaced[indices[0]] = self._merge(module, lines, wrap=isort_layout)
            drop.update(indices[1:])
        return [replaced.get(i, line) for i, line in enumerate(group) if i not in drop]

    def _origin(self, line: cst.SimpleStatementLine) -> str:
        statement = _statement(line)
        return module_name(self._origins.get(statement, statement))

    def _merge(
        self, module: str, lines: Sequence[cst.SimpleStatementLine], *, wrap: bool
    ) -> cst.SimpleStatementLine:
        names: list[tuple[cst.ImportAlias, str]] = []
        seen: set[str] = set()
        in_order = True
        multiline = False
        for line in lines:
            statement = cst.ensure_type(_import_of(line), cst.ImportFrom)
            aliases = _aliases(statement)
            in_order &= [_member_key(a) for a in aliases] == sorted(_member_key(a) for a in aliases)
            multiline |= _is_multiline(statement)
            for alias, comment in zip(aliases, _alias_comments(line, statement), strict=True):
                code = _alias_code(alias)
                if code not in seen:
                    seen.add(code)
                    names.append((alias, comment))
        if in_order:
            names.sort(key=lambda pair: _member_key(pair[0]))
        # comments above the other merged lines (a TODO, a note) stay above the merged one
        leading = [*lines[0].leading_lines, *(e for line in lines[1:] for e in line.leading_lines if e.comment)]
        entries = [(_alias_code(a), c) for a, c in names]
        merged = _render(module, entries, leading, multiline or any(c for _, c in entries))
        return self._wrapped(merged) if wrap else merged

    def _wrapped(self, line: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        statement = _import_of(line)
        if not isinstance(statement, cst.ImportFrom) or isinstance(statement.names, cst.ImportStar) or _is_multiline(statement):
            return line
        comment = line.trailing_whitespace.comment
        width = len(self._indents[-1]) + len(cst.Module([]).code_for_node(statement))
        width += len(comment.value) + 2 if comment is not None else 0
        if width <= self._style.line_length:
            return line
        entries = [(_alias_code(a), c) for a, c in zip(statement.names, _alias_comments(line, statement), strict=True)]
        return _render(_module(statement), entries, list(line.leading_lines), True)




def _is_multiline(statement: cst.ImportFrom) -> bool:
    return statement.lpar is not None and isinstance(statement.lpar.whitespace_after, cst.ParenthesizedWhitespace)


def _alias_code(alias: cst.ImportAlias) -> str:
    name = full_name(alias.name) or ""
    if alias.asname is None:
        return name
    return f"{name} as {cst.ensure_type(alias.asname.name, cst.Name).value}"


def _alias_comments(line: cst.SimpleStatementLine, statement: cst.ImportFrom) -> list[str]:
    """The comment on each alias's line ("" for none); a one-line statement's comment goes
    with its last name, as isort puts it."""
    aliases = _aliases(statement)
    comments = []
    for alias in aliases:
        comma = alias.comma
        whitespace = comma.whitespace_after if isinstance(comma, cst.Comma) else None
        comments.append(_comment_of(whitespace))
    if statement.rpar is not None and not comments[-1]:
        comments[-1] = _comment_of(statement.rpar.whitespace_before)
    trailing = line.trailing_whitespace.comment
    if trailing is not None and not _is_multiline(statement):
        comments[-1] = trailing.value
    return comments


def _comment_of(whitespace: Any) -> str:
    if isinstance(whitespace, cst.ParenthesizedWhitespace) and whitespace.first_line.comment is not None:
        return whitespace.first_line.comment.value
    return ""


def _render(
    module: str, entries: list[tuple[str, str]], leading: list[cst.EmptyLine], multiline: bool
) -> cst.SimpleStatementLine:
    if multiline:
        body = "".join(f"    {code},{'  ' + comment if comment else ''}\n" for code, comment in entries)
        text = f"from {module} import (\n{body})\n"
    else:
        text = f"from {module} import {', '.join(code for code, _ in entries)}\n"
    line = cst.ensure_type(cst.parse_statement(text), cst.SimpleStatementLine)
    return line.with_changes(leading_lines=leading)
