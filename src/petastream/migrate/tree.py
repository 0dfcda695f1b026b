"""One cheap walk over a LibCST tree: every node in source order, and each node's parent.

LibCST visitors rebuild each node they pass through, so a full visitor pass costs several
times a plain walk over the dataclass fields; the analyses here need many lookups but no
rebuilding. The parents match ``ParentNodeProvider``'s; node identity is the key (LibCST
nodes hash and compare by identity).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import libcst as cst

__all__ = ["Tree", "index_tree"]

_FIELDS: dict[type, tuple[str, ...]] = {}


@dataclass
class Tree:
    nodes: list[cst.CSTNode]  # pre-order, children in field order
    parents: dict[cst.CSTNode, cst.CSTNode]
    _by_type: dict[type, list[cst.CSTNode]] = field(default_factory=dict, repr=False)

    def of_type(self, *types: type) -> list[cst.CSTNode]:
        """Nodes that are instances of ``types``, in source order (grouped once per tree)."""
        if not self._by_type:
            for node in self.nodes:
                self._by_type.setdefault(type(node), []).append(node)
        groups = [group for cls, group in self._by_type.items() if issubclass(cls, types)]
        if len(groups) == 1:
            return list(groups[0])
        wanted = {id(n) for group in groups for n in group}
        return [n for n in self.nodes if id(n) in wanted]

    def ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        out = []
        current = self.parents.get(node)
        while current is not None:
            out.append(current)
            current = self.parents.get(current)
        return out


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def index_tree(module: cst.Module) -> Tree:
    nodes: list[cst.CSTNode] = []
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        nodes.append(node)
        children: list[cst.CSTNode] = []
        for name in _fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, cst.CSTNode):
                children.append(value)
            elif isinstance(value, (list, tuple)):
                children.extend(v for v in value if isinstance(v, cst.CSTNode))
        for child in children:
            parents[child] = node
        stack.extend(reversed(children))
    return Tree(nodes, parents)
