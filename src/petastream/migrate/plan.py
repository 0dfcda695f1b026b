"""What the Python transforms decide, before anything is rewritten.

Each analysis (imports, strings) returns a :class:`Plan` keyed by nodes of the original tree;
:mod:`petastream.migrate.python` merges the plans and applies them in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

__all__ = ["Finding", "Plan"]


@dataclass(frozen=True, eq=False)
class Finding:
    """A manual item, still as a node (positions are added when it becomes a ManualItem)."""

    node: cst.CSTNode
    code: str
    message: str
    suggestion: str
    uses: tuple[cst.CSTNode, ...] = ()
    severity: str = "manual"  # or "info": a note on a rewrite that was made


@dataclass
class Plan:
    # original Import/ImportFrom -> what replaces it (empty: removed)
    statements: dict[cst.CSTNode, list[cst.BaseSmallStatement]] = field(default_factory=dict)
    # original Name/Attribute/SimpleString -> its replacement
    expressions: dict[cst.CSTNode, cst.BaseExpression] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    # new import statement -> the statement it replaces (for isort order, see
    # petastream.migrate.import_order: was the group in order before the rewrite?)
    origins: dict[cst.CSTNode, cst.Import | cst.ImportFrom] = field(default_factory=dict)

    def merge(self, other: Plan) -> Plan:
        return Plan(
            {**self.statements, **other.statements},
            {**self.expressions, **other.expressions},
            [*self.findings, *other.findings],
            {**self.origins, **other.origins},
        )
