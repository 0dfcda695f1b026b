"""The Petastorm dependency in setup.py (LibCST finds the strings, :mod:`.depfile` decides).

Only strings that are requirements are touched: those inside the values of ``setup(...)``'s
``install_requires``, ``extras_require``, ``tests_require`` and ``setup_requires`` keywords,
and inside module-level variables those values name (``install_requires=REQUIRED``, also
through ``+`` or an extras dict). ``name="petastorm"`` or package lists are never candidates.
A requirement added beside a kept petastorm goes into the same list, written like its
neighbour (its own line, or inline after it).
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .depfile import (
    Entry,
    Project,
    alone_on_line,
    apply_edits,
    attach_comments,
    inline_sibling,
    line_removal,
    line_sibling,
    plan_dependencies,
    trailing_comment,
)
from .report import ManualItem

__all__ = ["migrate_setup_py", "setup_py_entries"]

_KEYWORDS = {"install_requires", "extras_require", "tests_require", "setup_requires"}


def setup_py_entries(code: str) -> list[Entry]:
    wrapper = MetadataWrapper(cst.parse_module(code), unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    line_starts = [0]
    for line in code.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    entries: list[Entry] = []
    for root in _dependency_expressions(wrapper.module):
        for node, listed in _strings(root):
            quote, prefix = node.quote, node.prefix
            if "\n" in node.value or len(quote) != 1 or "b" in prefix.lower():
                continue
            where = positions[node].start
            start = line_starts[where.line - 1] + where.column + len(prefix) + len(quote)
            content = node.value[len(prefix) + len(quote) : -len(quote)]
            end = start + len(content)
            alone = alone_on_line(code, start, end, quote)
            comment, span = trailing_comment(code, end + len(quote)) if alone else ("", None)
            entries.append(
                Entry(
                    where.line,
                    start,
                    end,
                    content,
                    comment=comment,
                    comment_span=span,
                    add=None
                    if not listed
                    else line_sibling(code, start, end, quote=quote, comma=True)
                    if alone
                    else inline_sibling(end, quote),
                    remove=line_removal(code, start, end) if alone else None,
                )
            )
    return attach_comments(code, entries)


def migrate_setup_py(code: str, project: Project | None = None) -> tuple[str, list[ManualItem]]:
    if "petastorm" not in code.lower() and "petastream" not in code.lower():
        return code, []
    edits, items = plan_dependencies(setup_py_entries(code), project)
    return apply_edits(code, edits), items


def _dependency_expressions(module: cst.Module) -> list[cst.BaseExpression]:
    """Keyword values of the dependency arguments, plus the module-level values they name."""
    keyword_values: list[cst.BaseExpression] = []
    assigned: dict[str, list[cst.BaseExpression]] = {}

    class Finder(cst.CSTVisitor):
        def visit_Arg(self, node: cst.Arg) -> None:
            if node.keyword is not None and node.keyword.value in _KEYWORDS:
                keyword_values.append(node.value)

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    assigned.setdefault(target.target.value, []).append(node.value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if isinstance(node.target, cst.Name) and node.value is not None:
                assigned.setdefault(node.target.value, []).append(node.value)

    module.visit(Finder())
    roots, queue, seen = [], list(keyword_values), set()
    while queue:
        expr = queue.pop()
        roots.append(expr)
        for name in _names(expr):
            if name not in seen:
                seen.add(name)
                queue.extend(assigned.get(name, []))
    return roots


def _names(expr: cst.BaseExpression) -> set[str]:
    found: set[str] = set()

    class Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.add(node.value)

    expr.visit(Names())
    return found


def _strings(expr: cst.BaseExpression) -> list[tuple[cst.SimpleString, bool]]:
    """The strings in ``expr``, each with whether it is an element of a list, tuple or set."""
    found: list[tuple[cst.SimpleString, bool]] = []
    elements: set[cst.CSTNode] = set()

    class Strings(cst.CSTVisitor):
        def visit_DictElement(self, node: cst.DictElement) -> bool:
            node.value.visit(self)  # keys are extra names, not requirements
            return False

        def visit_Element(self, node: cst.Element) -> None:
            elements.add(node.value)

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            found.append((node, node in elements))

    expr.visit(Strings())
    return found
