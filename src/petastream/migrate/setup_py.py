"""The Petastorm dependency in setup.py (LibCST).

Only strings that are requirements are touched: those inside the values of ``setup(...)``'s
``install_requires``, ``extras_require``, ``tests_require`` and ``setup_requires`` keywords,
and inside module-level variables those values name (``install_requires=REQUIRED``, also
through ``+`` or an extras dict). ``name="petastorm"`` or package lists are never candidates.
"""

from __future__ import annotations

import re

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .edits import string_with
from .report import ManualItem
from .requirements import URL_SUGGESTION, Manual, rewrite_requirement

__all__ = ["migrate_setup_py"]

_KEYWORDS = {"install_requires", "extras_require", "tests_require", "setup_requires"}


def migrate_setup_py(code: str) -> tuple[str, list[ManualItem]]:
    if "petastorm" not in code.lower():
        return code, []
    wrapper = MetadataWrapper(cst.parse_module(code), unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    roots = _dependency_expressions(wrapper.module)
    has_petastream = bool(re.search(r"[\"']petastream(?![\w\-.])", code))
    replacements: dict[cst.SimpleString, cst.SimpleString] = {}
    items: list[ManualItem] = []
    for root in roots:
        for node in _strings(root):
            value = node.evaluated_value
            if not isinstance(value, str) or "petastorm" not in value.lower():
                continue
            line = positions[node].start.line
            new = rewrite_requirement(value)
            if new is None:
                if re.search(r"(?i)petastorm\s*@|egg=petastorm", value):
                    items.append(Manual(f"Petastorm installed from a URL: {value}", URL_SUGGESTION).item(line))
            elif has_petastream:
                items.append(
                    Manual(f"{value} is listed next to petastream", "remove the Petastorm requirement").item(
                        line
                    )
                )
            else:
                replacements[node] = string_with(node, new)
    if not replacements:
        return code, items

    class Replace(cst.CSTTransformer):
        def leave_SimpleString(
            self, original_node: cst.SimpleString, updated_node: cst.SimpleString
        ) -> cst.SimpleString:
            return replacements.get(original_node, updated_node)

    return wrapper.module.visit(Replace()).code, items


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


def _strings(expr: cst.BaseExpression) -> list[cst.SimpleString]:
    found: list[cst.SimpleString] = []

    class Strings(cst.CSTVisitor):
        def visit_DictElement(self, node: cst.DictElement) -> bool:
            node.value.visit(self)  # keys are extra names, not requirements
            return False

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            found.append(node)

    expr.visit(Strings())
    return found
