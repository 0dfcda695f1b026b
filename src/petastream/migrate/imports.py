"""Decide what every Petastorm import becomes, and rewrite the uses that need it.

Rules, per bound name (see :mod:`petastream.migrate.bindings`):

- A name with a compat equivalent (``from petastorm.spark import make_spark_converter``,
  ``from petastorm.pytorch import DataLoader as PetastormDataLoader``) is imported from its
  compat module instead; aliases and the statement's formatting are kept.
- A module that compat mirrors, bound under its own name (``import
  petastorm.spark.spark_dataset_converter as x``, ``from petastorm.spark import
  spark_dataset_converter``), is imported from compat under the same name when every use of
  it is migratable; nothing else changes.
- Otherwise (``import petastorm`` used as ``petastorm.spark.make_spark_converter(...)``) each
  migratable use is rewritten to its full ``petastream.compat...`` path and ``import
  petastream.compat`` is added. The Petastorm import goes only when every use was migrated;
  the rest stay, and are findings with a suggestion.
- Names compat does not provide stay as they are and are findings.
- An unused ``import petastorm`` becomes ``import petastream.compat`` (alias kept).

Every question "what does this path become?" goes through the file's resolver (a
:class:`~petastream.migrate.pipeline.Policy`), which keeps a read pipeline together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import libcst as cst

from .bindings import Binding, StarImport, Use
from .edits import (
    dotted,
    full_name,
    make_import,
    renamed_alias,
    string_with,
    with_names,
)
from .mapping import COMPAT, Resolved, Unsupported, resolve, suggestion_for
from .pipeline import Policy
from .plan import Finding, Plan
from .tree import Tree

__all__ = ["plan_imports"]


@dataclass
class _Decision:
    action: str  # "keep" | "move" | "remove"
    target: str | None = None  # for "move": the compat path the name now comes from
    needed: list[str] = field(default_factory=list)  # modules to `import` next to the statement


_Resolver = Callable[[str], "Resolved | Unsupported"]


def plan_imports(
    tree: Tree,
    bindings: Sequence[Binding],
    stars: Sequence[StarImport],
    policy: Policy | None = None,
) -> Plan:
    plan = Plan()
    parents = tree.parents
    policy = policy or Policy()
    decisions = {id(b): _decide(b, plan, policy.resolve) for b in bindings}
    emitted = _existing_imports(tree)
    for statement in _in_order(b.statement for b in bindings):
        mine = [b for b in bindings if b.statement is statement]
        replacement = _rebuild(statement, mine, decisions, emitted, parents)
        if replacement is not None:
            plan.statements[statement] = replacement
            plan.origins.update((new, statement) for new in replacement)
    for star in stars:
        _plan_star(star, plan, policy)
    return plan


def _in_order(statements: Iterable[cst.Import | cst.ImportFrom]) -> list[cst.Import | cst.ImportFrom]:
    """Distinct statements, first occurrence first (nodes compare by value, so by id here)."""
    seen: set[int] = set()
    out: list[cst.Import | cst.ImportFrom] = []
    for s in statements:
        if id(s) not in seen:
            seen.add(id(s))
            out.append(s)
    return out


# -- decisions ----------------------------------------------------------------------------------


def _decide(binding: Binding, plan: Plan, resolver: _Resolver) -> _Decision:
    if not binding.is_module:
        return _decide_name(binding, plan, resolver)
    exact = resolver(binding.path) if binding.denotes_module_exactly else None
    resolved = [(use, _resolve_use(binding, use, resolver)) for use in binding.uses]
    if isinstance(exact, Resolved) and all(
        isinstance(r, tuple) and not u.shadowed for u, r in resolved
    ):
        return _Decision("move", exact.new)
    needed: list[str] = []
    complete = True
    for use, result in resolved:
        if use.shadowed:
            plan.findings.append(_shadowed(binding, use))
            complete = False
        elif isinstance(result, tuple):
            new, depth = result
            _rewrite_use(use, new, depth, plan)
            needed.append(new.module)
        else:
            plan.findings.append(_unsupported_use(use, result))
            complete = False
    imported = resolver(binding.imported)
    if complete and isinstance(imported, Resolved) and imported.is_module:
        needed.append(imported.new)  # what the statement imported, if nothing else needs it
    if complete and needed:
        return _Decision("remove", needed=needed)
    if not binding.uses and binding.imported == "petastorm":
        # an unused ``import petastorm`` (an availability check, a leftover): the compat
        # package stands where it stood
        return _Decision("move", COMPAT)
    if not binding.uses and not needed:
        plan.findings.append(
            Finding(
                binding.alias,
                "unsupported-import",
                f"import {binding.imported} has no petastream.compat equivalent",
                suggestion_for(binding.imported),
            )
        )
    return _Decision("keep", needed=needed)


def _decide_name(binding: Binding, plan: Plan, resolver: _Resolver) -> _Decision:
    result = resolver(binding.path)
    if isinstance(result, Resolved) and result.consumed == binding.path.count(".") + 1:
        return _Decision("move", result.new)
    unsupported = result if isinstance(result, Unsupported) else Unsupported(
        binding.path, suggestion_for(binding.path)
    )
    plan.findings.append(
        Finding(
            binding.alias,
            unsupported.code or "unsupported-import",
            unsupported.reason or f"{binding.path} is not provided by petastream.compat",
            unsupported.suggestion,
            uses=tuple(u.node for u in binding.uses),
        )
    )
    return _Decision("keep")


def _resolve_use(
    binding: Binding, use: Use, resolver: _Resolver
) -> tuple[Resolved, int] | Unsupported | None:
    """The use's compat equivalent and how many attributes of the chain it replaces."""
    attrs = use.attrs
    if attrs is None:
        return None
    path = ".".join([binding.path, *attrs])
    result = resolver(path)
    if isinstance(result, Unsupported):
        return result
    depth = result.consumed - (binding.path.count(".") + 1)
    if depth < 0:
        return Unsupported(path, suggestion_for(path))
    return result, depth


def _rewrite_use(use: Use, new: Resolved, depth: int, plan: Plan) -> None:
    if isinstance(use.node, cst.BaseString):
        rest = (use.attrs or ())[depth:]
        plan.expressions[use.node] = string_with(
            cst.ensure_type(use.node, cst.SimpleString), ".".join([new.new, *rest])
        )
    else:
        target = use.attributes[depth - 1] if depth else use.node
        plan.expressions[target] = dotted(new.new)


def _unsupported_use(use: Use, result: Unsupported | None) -> Finding:
    if result is None:
        return Finding(
            use.node,
            "unsupported-use",
            "a string annotation refers to a petastorm import",
            "write the annotation against petastream.compat by hand",
        )
    if result.path == "petastorm":
        return Finding(
            use.node,
            "unsupported-use",
            "the petastorm package itself is used here (not one of its names)",
            "use petastream.compat instead, or drop this use",
        )
    return Finding(use.node, result.code or "unsupported-use", result.message, result.suggestion)


def _shadowed(binding: Binding, use: Use) -> Finding:
    return Finding(
        use.node,
        "shadowed-import",
        f"'{binding.name}' here may be the petastorm import or another value assigned to the "
        "same name, so it was not rewritten",
        "migrate this use by hand",
    )


# -- statements ---------------------------------------------------------------------------------


def _rebuild(
    statement: cst.Import | cst.ImportFrom,
    bindings: list[Binding],
    decisions: dict[int, _Decision],
    emitted: dict[tuple[int, str], bool],
    parents: Mapping[cst.CSTNode, cst.CSTNode],
) -> list[cst.BaseSmallStatement] | None:
    by_alias = {id(b.alias): decisions[id(b)] for b in bindings}
    if all(d.action == "keep" and not d.needed for d in by_alias.values()):
        return None
    block = _block(statement, parents)
    needed: list[str] = []
    for d in by_alias.values():
        for m in d.needed:
            if (block, m) not in emitted and m not in needed:
                needed.append(m)
    for m in needed:
        emitted[(block, m)] = True
    head: list[cst.BaseSmallStatement] = []
    if isinstance(statement, cst.Import):
        head += _rebuild_import(statement, by_alias)
    else:
        head += _rebuild_import_from(statement, by_alias)
    return [*head, *(make_import(m) for m in sorted(needed))]


def _block(statement: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> int:
    """Identity of the statement list an import statement sits in (its line's parent)."""
    line = parents.get(statement)
    return id(parents.get(line) if line is not None else None)


def _rebuild_import(statement: cst.Import, decisions: dict[int, _Decision]) -> list[cst.Import]:
    names: list[cst.ImportAlias] = []
    for alias in statement.names:
        d = decisions.get(id(alias))
        if d is None or d.action == "keep":
            names.append(alias)
        elif d.action == "move" and d.target is not None:
            names.append(renamed_alias(alias, d.target, from_import=False))
    if not names:
        return []
    if len(names) < len(statement.names):
        names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return [statement.with_changes(names=names)]


def _rebuild_import_from(
    statement: cst.ImportFrom, decisions: dict[int, _Decision]
) -> list[cst.ImportFrom]:
    if isinstance(statement.names, cst.ImportStar):
        return [statement]
    aliases = list(statement.names)
    kept: list[cst.ImportAlias] = []
    groups: dict[str, list[cst.ImportAlias]] = {}
    for alias in aliases:
        d = decisions.get(id(alias))
        if d is None or d.action == "keep":
            kept.append(alias)
        elif d.action == "move" and d.target is not None:
            parent = d.target.rpartition(".")[0]
            groups.setdefault(parent, []).append(renamed_alias(alias, d.target, from_import=True))
    if not kept and len(groups) == 1:
        parent, moved = next(iter(groups.items()))
        if len(moved) == len(aliases):  # same names, new module: keep the formatting as is
            return [statement.with_changes(module=dotted(parent), names=moved)]
    out = [with_names(statement, None, kept)] if kept else []
    out += [with_names(statement, parent, moved) for parent, moved in groups.items()]
    return out


def _existing_imports(tree: Tree) -> dict[tuple[int, str], bool]:
    """(statement list, module) for every plain ``import petastream...`` already there."""
    found: dict[tuple[int, str], bool] = {}
    for node in tree.of_type(cst.Import):
        block = _block(node, tree.parents)
        for alias in cst.ensure_type(node, cst.Import).names:
            name = full_name(alias.name) or ""
            if alias.asname is None and name.startswith("petastream"):
                found[(block, name)] = True
    return found


def _plan_star(star: StarImport, plan: Plan, policy: Policy) -> None:
    kept = policy.star_kept(star.module)
    if kept is not None:
        plan.findings.append(
            Finding(star.statement, kept.code or "", kept.message, kept.suggestion)
        )
        return
    result = resolve(star.module)
    if isinstance(result, Resolved) and result.is_module:
        plan.statements[star.statement] = [star.statement.with_changes(module=dotted(result.new))]
        return
    plan.findings.append(
        Finding(
            star.statement,
            "unsupported-import",
            f"from {star.module} import * has no petastream.compat equivalent",
            "import the names you use explicitly; make_spark_converter, SparkDatasetConverter, "
            "TransformSpec and edit_field come from petastream.compat",
        )
    )
