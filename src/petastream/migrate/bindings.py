"""Find Petastorm imports, the names they bind, and every use of those names (scope-aware).

A *binding* is one imported name: ``from petastorm.spark import make_spark_converter`` binds
``make_spark_converter`` to the path ``petastorm.spark.make_spark_converter``; ``import
petastorm.spark`` binds ``petastorm`` to the package ``petastorm``; ``import
petastorm.spark.spark_dataset_converter as psc`` binds ``psc`` to that module.

A *use* is a load of the bound name that LibCST's scope analysis resolves to the import: a
parameter or local variable that happens to be called ``petastorm`` is not a use. LibCST's own
reference lists attribute dotted accesses (``petastorm.spark.x``) to the longest dotted import
even where a local name shadows it, so each use is resolved here by its leftmost name instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import ImportAssignment, Scope

from .edits import full_name, local_name
from .mapping import PETASTORM_MODULES, is_petastorm_path
from .tree import Tree

__all__ = ["Binding", "Use", "StarImport", "find_bindings"]

_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


@dataclass(eq=False)
class Use:
    """One load of a bound name, with the attribute chain that follows it."""

    node: cst.Name | cst.BaseString
    attributes: tuple[cst.Attribute, ...] = ()  # enclosing attributes, innermost first
    # For a string annotation: the attributes after the name ("petastorm.spark.X"), or None
    # when the string is more than a dotted name ("Optional[petastorm.spark.X]").
    string_attrs: tuple[str, ...] | None = ()
    shadowed: bool = False  # the name may also be a non-import value here

    @property
    def attrs(self) -> tuple[str, ...] | None:
        if isinstance(self.node, cst.BaseString):
            return self.string_attrs
        return tuple(a.attr.value for a in self.attributes)


@dataclass(eq=False)
class Binding:
    """One name bound by a Petastorm import."""

    name: str
    path: str  # what the name denotes
    imported: str  # what the statement imports (``import a.b.c`` binds ``a``, imports ``a.b.c``)
    is_module: bool
    statement: cst.Import | cst.ImportFrom
    alias: cst.ImportAlias
    uses: list[Use] = field(default_factory=list)

    @property
    def denotes_module_exactly(self) -> bool:
        """True when the name is the module itself (not a parent package reached through it)."""
        return self.is_module and self.path == self.imported


@dataclass(eq=False)
class StarImport:
    """``from petastorm.x import *``."""

    module: str
    statement: cst.ImportFrom


def find_bindings(
    tree: Tree, scopes: Mapping[cst.CSTNode, Scope | None]
) -> tuple[list[Binding], list[StarImport]]:
    bindings, stars = _collect_imports(tree)
    _attach_uses(bindings, scopes, tree.parents)
    return bindings, stars


def _collect_imports(tree: Tree) -> tuple[list[Binding], list[StarImport]]:
    found: list[Binding] = []
    stars: list[StarImport] = []
    for node in tree.of_type(cst.Import, cst.ImportFrom):
        if isinstance(node, cst.Import):
            for alias in node.names:
                imported = full_name(alias.name) or ""
                if is_petastorm_path(imported):
                    path = imported if alias.asname is not None else imported.split(".")[0]
                    found.append(Binding(local_name(alias), path, imported, True, node, alias))
            continue
        node = cst.ensure_type(node, cst.ImportFrom)
        source = full_name(node.module)
        if node.relative or source is None or not is_petastorm_path(source):
            continue
        if isinstance(node.names, cst.ImportStar):
            stars.append(StarImport(source, node))
            continue
        for alias in node.names:
            path = f"{source}.{full_name(alias.name)}"
            is_module = path in PETASTORM_MODULES
            found.append(Binding(local_name(alias), path, path, is_module, node, alias))
    return found, stars


def _attach_uses(
    bindings: list[Binding],
    scopes: Mapping[cst.CSTNode, Scope | None],
    parents: Mapping[cst.CSTNode, cst.CSTNode],
) -> None:
    by_key: dict[tuple[cst.CSTNode, str], Binding] = {(b.statement, b.name): b for b in bindings}
    names = {b.name for b in bindings}
    seen: set[int] = set()
    for access_scope, node, name, string_attrs in _accesses(scopes, names):
        if id(node) in seen:
            continue
        seen.add(id(node))
        assignments = access_scope[name]
        ours = [
            by_key[(a.node, name)]
            for a in assignments
            if isinstance(a, ImportAssignment) and (a.node, name) in by_key
        ]
        if not ours:
            continue
        shadowed = len(ours) != len(assignments)
        if isinstance(node, cst.Name):
            use = Use(node, _attribute_chain(node, parents), shadowed=shadowed)
        else:
            use = Use(node, string_attrs=string_attrs, shadowed=shadowed)
        for binding in ours:
            binding.uses.append(use)


def _accesses(
    scopes: Mapping[cst.CSTNode, Scope | None], names: set[str]
) -> Iterator[tuple[Scope, cst.Name | cst.BaseString, str, tuple[str, ...] | None]]:
    """(scope, leftmost name node or string annotation, name, attrs in the string) per access."""
    for scope in {s for s in scopes.values() if s is not None}:
        for access in scope.accesses:
            if isinstance(access.node, cst.BaseString):
                yield from _string_annotation(scope, access.node, names)
                continue
            base: cst.BaseExpression = access.node
            while isinstance(base, cst.Attribute):
                base = base.value
            if isinstance(base, cst.Name) and base.value in names:
                yield scope, base, base.value, ()


def _string_annotation(
    scope: Scope, node: cst.BaseString, names: set[str]
) -> Iterator[tuple[Scope, cst.BaseString, str, tuple[str, ...] | None]]:
    value = node.evaluated_value if isinstance(node, cst.SimpleString) else None
    if isinstance(value, str) and _DOTTED.fullmatch(value):
        head, *rest = value.split(".")
        if head in names:
            yield scope, node, head, tuple(rest)
        return
    text = value if isinstance(value, str) else cst.Module([]).code_for_node(node)
    for name in sorted(names):
        if re.search(rf"(?<![\w.]){re.escape(name)}\b", text):
            yield scope, node, name, None


def _attribute_chain(
    node: cst.Name, parents: Mapping[cst.CSTNode, cst.CSTNode]
) -> tuple[cst.Attribute, ...]:
    chain: list[cst.Attribute] = []
    current: cst.CSTNode = node
    parent = parents.get(current)
    while isinstance(parent, cst.Attribute) and parent.value is current:
        chain.append(parent)
        current = parent
        parent = parents.get(current)
    return tuple(chain)
