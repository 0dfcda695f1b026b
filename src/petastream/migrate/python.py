"""Migrate one Python source text: parse, analyse, apply, report.

The analyses (:mod:`.imports`, :mod:`.strings`) work on one LibCST tree with scope, parent and
position metadata and return plans keyed by its nodes; :class:`_Apply` carries them out in a
single pass, so comments and formatting outside the rewritten nodes are untouched.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, ScopeProvider

from .bindings import find_bindings
from .import_order import ImportStyle, tidy_imports
from .imports import plan_imports
from .numpy_names import plan_numpy
from .pipeline import plan_pipeline, unchecked_context_managers, unchecked_loaders
from .plan import Finding, Plan
from .report import ManualItem
from .strings import plan_strings
from .todo import add_comments, anchor_for, comments_above
from .tree import Tree, index_tree
from .usages import plan_usages

__all__ = ["PythonResult", "migrate_python", "might_need_migration", "describe_parse_error"]

_MARKERS = ("petastorm", "PARENT_CACHE_DIR_URL_CONF", "petastream.compat")


@dataclass
class PythonResult:
    code: str
    items: list[ManualItem]


def might_need_migration(code: str) -> bool:
    """Cheap pre-check: files that never mention Petastorm are not parsed at all."""
    return any(marker in code for marker in _MARKERS)


def describe_parse_error(err: cst.ParserSyntaxError, code: str | None = None) -> str:
    """``does not parse: line L, column C: <why>``: CPython's own account when it rejects
    ``code`` too (LibCST reports a bare ``!cmd`` line at the line after it, and lists the
    tokens it expected rather than a reason), else LibCST's."""
    if code is not None:
        try:
            compile(code, "<file>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as e:
            if e.lineno:
                return f"does not parse: line {e.lineno}, column {e.offset or 1}: {e.msg}"
        except (ValueError, RecursionError, MemoryError):  # NUL bytes, absurd nesting
            pass
    message = re.sub(r"^(parser error: )?(error at \d+:\d+: )?", "", err.message)
    return f"does not parse: line {err.raw_line}, column {err.raw_column}: {message}"


def migrate_python(
    code: str,
    *,
    todo: bool = False,
    style: ImportStyle | None = None,
    barrier: Callable[[str], bool] | None = None,
) -> PythonResult:
    """Rewrite Petastorm imports and patch targets in ``code``; list what stays manual.

    ``style``: the file's isort settings for the rewritten imports (:mod:`.import_order`);
    ``barrier``: comments that separate import groups (notebook cell markers).
    Raises ``libcst.ParserSyntaxError`` when ``code`` does not parse.
    """
    if not might_need_migration(code):
        return PythonResult(code, [])
    wrapper = MetadataWrapper(cst.parse_module(code), unsafe_skip_copy=True)
    module = wrapper.module
    scopes = wrapper.resolve(ScopeProvider)
    tree = index_tree(module)
    bindings, stars = find_bindings(tree, scopes)
    policy = plan_pipeline(tree, bindings)
    plan = (
        plan_imports(tree, bindings, stars, policy)
        .merge(plan_strings(tree, policy.resolve))
        .merge(plan_usages(code, tree, bindings, policy))
    )
    if plan.statements or plan.expressions:  # a file migrate rewrites runs on NumPy 2 after
        plan = plan.merge(plan_numpy(tree, scopes))
    plan.findings += unchecked_loaders(tree, bindings, policy)
    plan.findings += unchecked_context_managers(tree, bindings, policy)
    items: list[ManualItem] = []
    comments: dict[cst.CSTNode, list[str]] = {}
    if plan.findings:  # positions cost a codegen pass: only when something is reported
        positions = wrapper.resolve(PositionProvider)
        items = [_item(f, positions) for f in plan.findings]
    if todo:  # TODO comments mark what a person has to do: manual items, not notes
        for finding, item in zip(plan.findings, items, strict=True):
            if not item.is_manual:
                continue
            anchor = anchor_for(finding.node, tree.parents)
            if anchor is not None and item.todo_comment not in comments_above(anchor, module):
                comments.setdefault(anchor, []).append(item.todo_comment)
    targets = [*plan.statements, *plan.expressions, *comments]
    if targets:
        module = module.visit(_Apply(plan, comments, _ancestors(targets, tree)))
    if plan.statements:
        module = tidy_imports(module, style, origins=plan.origins, barrier=barrier)
    items.sort(key=lambda i: (i.line, i.column, i.code))
    return PythonResult(module.code, items)


def _ancestors(targets: list[cst.CSTNode], tree: Tree) -> set[cst.CSTNode]:
    """Every node with a target below it: the only subtrees the apply pass has to enter."""
    found: set[cst.CSTNode] = set()
    for target in targets:
        for node in tree.ancestors(target):
            if node in found:
                break
            found.add(node)
    return found


def _item(finding: Finding, positions: Mapping[cst.CSTNode, Any]) -> ManualItem:
    start = positions[finding.node].start
    uses = [str(n) for n in sorted({positions[u].start.line for u in finding.uses} - {start.line})]
    return ManualItem(
        line=start.line,
        column=start.column,
        code=finding.code,
        message=finding.message,
        suggestion=finding.suggestion,
        uses=tuple(uses),
        severity=finding.severity,
    )


class _Apply(cst.CSTTransformer):
    """Replace planned nodes, expand planned import statements, add TODO comments."""

    def __init__(
        self,
        plan: Plan,
        comments: Mapping[cst.CSTNode, Sequence[str]],
        enter: set[cst.CSTNode],
    ) -> None:
        super().__init__()
        self._plan = plan
        self._comments = comments
        self._enter = enter

    def on_visit(self, node: cst.CSTNode) -> bool:
        return node in self._enter and super().on_visit(node)

    def on_leave(self, original_node: Any, updated_node: Any) -> Any:
        result = super().on_leave(original_node, updated_node)
        comments = self._comments.get(original_node)
        return add_comments(result, comments) if comments else result

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> Any:
        return self._replace(original_node, updated_node)

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> Any:
        return self._replace(original_node, updated_node)

    def leave_SimpleString(
        self, original_node: cst.SimpleString, updated_node: cst.SimpleString
    ) -> Any:
        return self._replace(original_node, updated_node)

    def _replace(self, original: Any, updated: Any) -> Any:
        new = self._plan.expressions.get(original)
        if new is None:
            return updated
        return new.with_changes(lpar=updated.lpar, rpar=updated.rpar)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> Any:
        body = self._expand(original_node.body, updated_node.body)
        if body is None:
            return updated_node
        if not body:
            return cst.RemoveFromParent()
        if len(original_node.body) > 1:
            return updated_node.with_changes(body=_semicolons(body))
        lines = [cst.SimpleStatementLine(body=[statement]) for statement in body]
        lines[0] = lines[0].with_changes(
            leading_lines=updated_node.leading_lines,
            trailing_whitespace=updated_node.trailing_whitespace,
        )
        return cst.FlattenSentinel(lines)

    def leave_SimpleStatementSuite(
        self, original_node: cst.SimpleStatementSuite, updated_node: cst.SimpleStatementSuite
    ) -> Any:
        body = self._expand(original_node.body, updated_node.body)
        if body is None:
            return updated_node
        return updated_node.with_changes(body=_semicolons(body) or [cst.Pass()])

    def _expand(
        self,
        original: Sequence[cst.BaseSmallStatement],
        updated: Sequence[cst.BaseSmallStatement],
    ) -> list[cst.BaseSmallStatement] | None:
        if not any(s in self._plan.statements for s in original):
            return None
        out: list[cst.BaseSmallStatement] = []
        for orig, upd in zip(original, updated, strict=True):
            out.extend(self._plan.statements.get(orig, [upd]))
        return out


def _semicolons(body: list[cst.BaseSmallStatement]) -> list[cst.BaseSmallStatement]:
    return [s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT) for s in body]
