"""``# TODO(petastream): ...`` comments above the statements a person has to migrate.

A comment goes into the ``leading_lines`` of the nearest enclosing node that has them (a
statement, an ``except``/``else``/``elif`` clause), so it sits on its own line right above
the code, indented like it. Decorators are skipped for their function or class: a comment
above the first decorator parses back as the definition's, and a comment already there is
not added twice, which keeps a second run from changing anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import libcst as cst

__all__ = ["anchor_for", "add_comments", "comments_above"]


def anchor_for(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> cst.CSTNode | None:
    current: cst.CSTNode | None = node
    while current is not None:
        if hasattr(current, "leading_lines") and not isinstance(current, (cst.Module, cst.Decorator)):
            return current
        current = parents.get(current)
    return None


def comments_above(anchor: cst.CSTNode, module: cst.Module) -> set[str]:
    """Comments on the lines right above ``anchor`` (the module header counts for the first)."""
    lines = list(getattr(anchor, "leading_lines", ()))
    if module.body and anchor is module.body[0]:
        lines = [*module.header, *lines]
    return {line.comment.value for line in lines if line.comment is not None}


def add_comments(node: Any, comments: Sequence[str]) -> Any:
    """``node`` (a node, a FlattenSentinel of nodes, or a RemovalSentinel) with the comments."""
    if isinstance(node, cst.FlattenSentinel):
        nodes = list(node.nodes)
        if not nodes:
            return node
        return cst.FlattenSentinel([add_comments(nodes[0], comments), *nodes[1:]])
    if not hasattr(node, "leading_lines"):
        return node
    lines = list(node.leading_lines)
    present = {line.comment.value for line in lines if line.comment is not None}
    for text in comments:
        if text not in present:
            lines.append(cst.EmptyLine(indent=True, comment=cst.Comment(text)))
            present.add(text)
    return node.with_changes(leading_lines=lines)
