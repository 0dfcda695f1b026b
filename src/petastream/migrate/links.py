"""What one use of a read-pipeline object is connected to, as far as its file says.

A read pipeline is a reader, the loaders or TF helpers reading from it, the TransformSpec it is
handed and the collate function its loader is given (:data:`mapping.PIPELINE`). For one place
such an object is named, :func:`links` answers with:

- the canonical paths of the pipeline objects it works with: a loader's or TF helper's reader
  (``DataLoader(make_reader(url))``, ``with make_reader(url) as r: DataLoader(r)``), a
  WeightedSamplingReader's readers (``WeightedSamplingReader([r1, r2], [.5, .5])``); the reader
  a TransformSpec is handed (``make_reader(url, transform_spec=spec)``); the loader a collate
  function is given (``DataLoader(r, collate_fn=...)``, also through ``functools.partial``);
  an ``edit_field`` goes with the file's TransformSpec;
- :data:`CONVERTER` where it goes to a converter (``converter.make_torch_dataloader(
  transform_spec=..., data_loader_fn=...)``), which is compat's after the migration;
- :data:`UNKNOWN` where the file does not tell (a parameter, another module's helper, a use
  that is neither called nor passed).

Values are followed through plain names (``spec = TransformSpec(...)`` then
``transform_spec=spec``) by name, not by scope: a name reused for something else links more
than it should, which only keeps more of a pipeline together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import libcst as cst

from .edits import full_name
from .mapping import COLLATES, LOADERS, READER_CONSUMERS, READERS
from .tree import Tree

__all__ = ["CONVERTER", "UNKNOWN", "Flow", "index_flow", "links", "call_of", "first_argument", "fed_by_converter"]

CONVERTER = "<converter>"
UNKNOWN = "<unknown>"
TRANSFORM_SPEC = "petastorm.TransformSpec"
# The argument a reader consumer takes its reader(s) from, where it is not ``reader``.
_READER_ARGUMENT = {"petastorm.weighted_sampling_reader.WeightedSamplingReader": "readers"}
_CONVERTER_METHODS = frozenset({"make_torch_dataloader", "make_tf_dataset"})


@dataclass
class Flow:
    """One file's index for :func:`links`."""

    parents: Mapping[cst.CSTNode, cst.CSTNode]
    paths: dict[cst.CSTNode, str]  # each node naming a pipeline object -> its canonical path
    assigned: dict[str, list[cst.BaseExpression]]  # name -> the values bound to it (=, with-as)
    passed: dict[str, list[cst.Arg]]  # name -> the call arguments that pass it


def index_flow(tree: Tree, named: Sequence[tuple[str, cst.CSTNode]]) -> Flow:
    """``named``: (canonical path, node) for every use of a pipeline object in the file."""
    assigned: dict[str, list[cst.BaseExpression]] = {}
    passed: dict[str, list[cst.Arg]] = {}
    for node in tree.of_type(cst.Assign, cst.AnnAssign, cst.WithItem, cst.Arg):
        if isinstance(node, cst.Arg):
            if isinstance(node.value, cst.Name):
                passed.setdefault(node.value.value, []).append(node)
            continue
        for name, value in _bound(node):
            assigned.setdefault(name, []).append(value)
    return Flow(tree.parents, {node: path for path, node in named}, assigned, passed)


def _bound(node: cst.CSTNode) -> list[tuple[str, cst.BaseExpression]]:
    if isinstance(node, cst.Assign):
        return [(t.target.value, node.value) for t in node.targets if isinstance(t.target, cst.Name)]
    if isinstance(node, cst.AnnAssign) and node.value is not None and isinstance(node.target, cst.Name):
        return [(node.target.value, node.value)]
    if isinstance(node, cst.WithItem) and node.asname is not None and isinstance(node.asname.name, cst.Name):
        return [(node.asname.name.value, node.item)]
    return []


def links(path: str, node: cst.CSTNode, flow: Flow) -> set[str]:
    """What the use ``node`` of the pipeline object ``path`` is connected to (see the module
    docstring); empty for a reader, where a pipeline starts."""
    if path in READER_CONSUMERS:
        return _consumer_links(node, flow, _READER_ARGUMENT.get(path, "reader"))
    if path == TRANSFORM_SPEC:
        return _spec_links(node, flow)
    if path in COLLATES:
        return _collate_links(node, flow)
    if path in READERS:
        return set()
    # edit_field: its 4-tuples go into a TransformSpec(edit_fields=[...])
    return {TRANSFORM_SPEC} if TRANSFORM_SPEC in flow.paths.values() else {UNKNOWN}


def _consumer_links(node: cst.CSTNode, flow: Flow, keyword: str) -> set[str]:
    call = call_of(node, flow.parents)
    if call is not None:
        return _readers_of(first_argument(call, keyword), flow, set()) or {UNKNOWN}
    return {CONVERTER} if fed_by_converter(node, flow.parents) else {UNKNOWN}


def _readers_of(expr: cst.BaseExpression | None, flow: Flow, seen: set[str]) -> set[str]:
    """The readers ``expr`` is made of: a reader call, a name bound to one, a list of them."""
    if isinstance(expr, cst.Name):
        if expr.value in seen:  # r = [r]: followed once
            return set()
        seen.add(expr.value)
        return {p for value in flow.assigned.get(expr.value, []) for p in _readers_of(value, flow, seen)}
    if isinstance(expr, (cst.List, cst.Tuple)):
        return {p for element in expr.elements for p in _readers_of(element.value, flow, seen)}
    if isinstance(expr, cst.Call) and flow.paths.get(expr.func) in READERS:
        return {flow.paths[expr.func]}
    return set()


def _spec_links(node: cst.CSTNode, flow: Flow) -> set[str]:
    destinations = _destinations(call_of(node, flow.parents) or node, flow)
    if destinations is None:
        return {UNKNOWN}
    found = set()
    for call, arg in destinations:
        if arg.keyword is None or arg.keyword.value != "transform_spec":
            found.add(UNKNOWN)
        elif flow.paths.get(call.func) in READERS:
            found.add(flow.paths[call.func])
        elif isinstance(call.func, cst.Attribute) and call.func.attr.value in _CONVERTER_METHODS:
            found.add(CONVERTER)
        else:
            found.add(UNKNOWN)
    return found


def _collate_links(node: cst.CSTNode, flow: Flow) -> set[str]:
    destinations = _destinations(node, flow)
    if destinations is None:
        return {UNKNOWN}
    found = set()
    for call, arg in destinations:
        func = call.func
        if _is_partial(call) and call.args and call.args[0] is not arg:
            func = call.args[0].value  # partial(DataLoader, collate_fn=...)
        path = flow.paths.get(func)
        found.add(path if path is not None and path in LOADERS else UNKNOWN)
    return found


def _destinations(expr: cst.CSTNode, flow: Flow) -> list[tuple[cst.Call, cst.Arg]] | None:
    """The calls the value of ``expr`` is passed to: directly, or through the name it is
    bound to; None when it goes nowhere the file shows."""
    parent = flow.parents.get(expr)
    if isinstance(parent, cst.Arg):
        call = flow.parents.get(parent)
        return [(call, parent)] if isinstance(call, cst.Call) else None
    names = [name for name, value in _bound(parent) if value is expr] if parent is not None else []
    found = []
    for name in names:
        for arg in flow.passed.get(name, []):
            call = flow.parents.get(arg)
            if isinstance(call, cst.Call):
                found.append((call, arg))
    return found or None


def _is_partial(call: cst.Call) -> bool:
    callee = full_name(call.func)
    return callee is not None and callee.rpartition(".")[2] == "partial"


def call_of(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> cst.Call | None:
    """The call ``node(...)``, when ``node`` is what is called."""
    parent = parents.get(node)
    return parent if isinstance(parent, cst.Call) and parent.func is node else None


def first_argument(call: cst.Call, keyword: str) -> cst.BaseExpression | None:
    """The argument ``keyword=``, else the first positional one."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    first = call.args[0] if call.args else None
    return first.value if first is not None and first.keyword is None and not first.star else None


def fed_by_converter(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> bool:
    """``data_loader_fn=<node>`` or ``data_loader_fn=partial(<node>, ...)``."""
    arg = parents.get(node)
    if not isinstance(arg, cst.Arg):
        return False
    if arg.keyword is not None:
        return arg.keyword.value == "data_loader_fn"
    call = parents.get(arg)
    if not isinstance(call, cst.Call) or not _is_partial(call) or call.args[0] is not arg:
        return False
    outer = parents.get(call)
    return isinstance(outer, cst.Arg) and outer.keyword is not None and outer.keyword.value == "data_loader_fn"
