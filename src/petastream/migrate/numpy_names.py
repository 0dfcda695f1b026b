"""NumPy names that NumPy 1.24 and 2.0 removed, rewritten in the files migrate rewrites.

Petastorm 0.13.1 pinned numpy below 1.24 in practice, so code written against it (and its own
examples) says ``np.float``, ``np.string_``, ``np.NaN``. petastream runs on NumPy 2, where
those names are gone, so a file migrate rewrites gets them replaced too, the way ruff's NPY001
and NPY201 fixes replace them: the builtin for the aliases NumPy 1.24 removed (``np.float`` ->
``float``), the surviving NumPy name for those NumPy 2.0 removed (``np.float_`` ->
``np.float64``, ``np.NaN`` -> ``np.nan``). Every replacement works on NumPy 1.24 too. Only
names with such a replacement are rewritten (not ``np.trapz``: ``np.trapezoid`` is NumPy 2
only); ``np`` is whatever name the file binds NumPy to (``import numpy as xx``, ``import
numpy``), found through the scopes, so a local variable called ``np`` is left alone.
``from numpy import float_`` becomes ``from numpy import float64 as float_``; a removed alias
of a builtin is dropped from a ``from numpy import`` (the builtin is what the name meant).
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst
from libcst.metadata import ImportAssignment, Scope

from .edits import full_name
from .plan import Plan
from .tree import Tree

__all__ = ["plan_numpy", "BUILTIN_ALIASES", "RENAMED", "CONSTANTS"]

# NPY001: aliases of builtins, removed in NumPy 1.24
BUILTIN_ALIASES: Mapping[str, str] = {
    "bool": "bool", "int": "int", "float": "float", "complex": "complex", "object": "object",
    "str": "str", "long": "int", "unicode": "str",
}
# NPY201: removed in NumPy 2.0, with a NumPy name that exists since before 1.24
RENAMED: Mapping[str, str] = {
    "float_": "float64", "complex_": "complex128", "cfloat": "complex128", "singlecomplex": "complex64",
    "longfloat": "longdouble", "clongfloat": "clongdouble", "longcomplex": "clongdouble",
    "string_": "bytes_", "unicode_": "str_",
    "Inf": "inf", "Infinity": "inf", "infty": "inf", "PINF": "inf", "NaN": "nan", "NAN": "nan",
    "alltrue": "all", "sometrue": "any", "product": "prod", "cumproduct": "cumprod",
    "round_": "round", "in1d": "isin", "row_stack": "vstack", "mat": "asmatrix",
}
# NPY201 constants that become an expression: (negated?, the NumPy name or a literal)
CONSTANTS: Mapping[str, tuple[bool, str]] = {"NINF": (True, "inf"), "PZERO": (False, "0.0"),
                                             "NZERO": (True, "0.0")}
_BUILTIN_CALLABLES = {"issubclass_": "issubclass"}


def _numpy_names(scopes: Mapping[cst.CSTNode, Scope | None]) -> list[cst.Name]:
    """Every Name node that refers to the numpy module bound by an ``import`` statement."""
    found: list[cst.Name] = []
    seen: set[int] = set()
    for scope in {id(s): s for s in scopes.values() if s is not None}.values():
        for access in scope.accesses:
            node = access.node
            if id(node) in seen or not isinstance(node, cst.Name):
                continue
            seen.add(id(node))
            referents = list(access.referents)
            if referents and all(_binds_numpy(r, node.value) for r in referents):
                found.append(node)
    return found


def _binds_numpy(assignment: object, name: str) -> bool:
    if not isinstance(assignment, ImportAssignment) or not isinstance(assignment.node, cst.Import):
        return False
    for alias in assignment.node.names:
        imported = full_name(alias.name) or ""
        if alias.asname is not None:
            bound = cst.ensure_type(alias.asname.name, cst.Name).value
            if bound == name and imported == "numpy":
                return True
        elif name == "numpy" and imported.split(".")[0] == "numpy":
            return True
    return False


def _replacement(value: cst.Name, attr: str) -> cst.BaseExpression | None:
    if attr in BUILTIN_ALIASES:
        return cst.Name(BUILTIN_ALIASES[attr])
    if attr in _BUILTIN_CALLABLES:
        return cst.Name(_BUILTIN_CALLABLES[attr])
    if attr in RENAMED:
        return cst.Attribute(value=cst.Name(value.value), attr=cst.Name(RENAMED[attr]))
    if attr in CONSTANTS:
        negated, target = CONSTANTS[attr]
        inner: cst.BaseExpression = (cst.Float(target) if target[0].isdigit()
                                     else cst.Attribute(value=cst.Name(value.value), attr=cst.Name(target)))
        return cst.UnaryOperation(cst.Minus(), inner) if negated else inner
    return None


def _plan_from_import(statement: cst.ImportFrom, plan: Plan) -> None:
    if isinstance(statement.names, cst.ImportStar) or full_name(statement.module) != "numpy":
        return
    if statement.relative:
        return
    kept: list[cst.ImportAlias] = []
    changed = False
    for alias in statement.names:
        name = full_name(alias.name) or ""
        if name in RENAMED:
            asname = alias.asname or cst.AsName(name=cst.Name(name))
            kept.append(alias.with_changes(name=cst.Name(RENAMED[name]), asname=asname))
            changed = True
        elif (name in BUILTIN_ALIASES or name in _BUILTIN_CALLABLES) and alias.asname is None:
            changed = True  # the builtin of that name is what it meant
        else:
            kept.append(alias)
    if not changed:
        return
    if kept:
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        new = statement.with_changes(names=kept)
        plan.statements[statement] = [new]
        plan.origins[new] = statement
    else:
        plan.statements[statement] = []


def plan_numpy(tree: Tree, scopes: Mapping[cst.CSTNode, Scope | None]) -> Plan:
    """Replacements for the removed NumPy names of the module (see the module docstring)."""
    plan = Plan()
    for name in _numpy_names(scopes):
        parent = tree.parents.get(name)
        if not isinstance(parent, cst.Attribute) or parent.value is not name:
            continue
        new = _replacement(name, parent.attr.value)
        if new is not None:
            plan.expressions[parent] = new
    for statement in tree.of_type(cst.ImportFrom):
        _plan_from_import(cst.ensure_type(statement, cst.ImportFrom), plan)
    return plan
