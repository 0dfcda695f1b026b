"""Uses that migrate but need a person's eye: Petastorm's cache layout and custom collate_fn.

- **Cache layout** (``cache-layout``, manual). Petastorm's converter cached Parquet files; the
  compat converter caches MDS (``index.json`` + ``.mds`` shards). Code that reads or lists the
  cache itself -- ``spark.read.parquet(converter.cache_dir_url)``, ``glob(cache + "/*.parquet")``,
  ``pq.ParquetDataset(converter.file_urls)`` -- or calls the private helpers that hand out
  cache files (:data:`mapping.CACHE_LAYOUT_HELPERS`) is rewritten like the rest, and reported:
  it breaks on the new layout. Values derived from the cache URL are followed through plain
  assignments (``cache = converter.cache_dir_url``, ``self.cache_url = ...``) by name, within
  the file; the conf key of the parent cache directory counts as a cache URL too. The helpers
  are found by their (distinctive, private) names, so a file already migrated to
  petastream.compat is still reported: the problem is not solved by the rewrite.
- **collate_fn** (``custom-collate-fn``, info). ``DataLoader(reader, collate_fn=f)`` keeps
  ``f``; petastream.compat calls it per batch with the list of row dicts, as Petastorm does,
  which is slow next to the columnar loaders. The note says so; nothing is dropped. Passing
  ``decimal_friendly_collate`` (the default) needs no note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import libcst as cst

from .bindings import Binding
from .edits import full_name
from .mapping import CACHE_LAYOUT_HELPERS, COLLATES, Resolved
from .pipeline import Policy, call_of, members
from .plan import Finding, Plan
from .tree import Tree

__all__ = ["plan_usages"]

_CACHE_ATTRS = frozenset({"cache_dir_url", "file_urls"})
_CONF_KEY = "petastorm.spark.converter.parentCacheDirUrl"
_CONF_ATTR = "PARENT_CACHE_DIR_URL_CONF"
_READS = frozenset(
    {"parquet", "read_parquet", "read_table", "ParquetDataset", "ParquetFile", "read_metadata",
     "read_schema", "dataset"}
)
_LISTS = frozenset({"glob", "iglob", "rglob", "listdir", "scandir", "walk", "ls", "find", "list_files"})
_LAYOUT_SUGGESTION = (
    "use converter.file_urls for the cached files, petastream.open(converter.cache_dir_url) to "
    "read the rows, or read the source DataFrame (not the cache) with Spark"
)


_HELPER_NAMES = frozenset(path.rpartition(".")[2] for path in CACHE_LAYOUT_HELPERS)
_CACHE_MARKERS = (*_CACHE_ATTRS, _CONF_KEY, _CONF_ATTR, *_HELPER_NAMES)


def plan_usages(code: str, tree: Tree, bindings: Sequence[Binding], policy: Policy) -> Plan:
    """``code`` is the source of ``tree``: the cache analysis is skipped when it cannot apply.

    The cache analysis works on names, not on Petastorm bindings, so it reports the same
    items again on a file already migrated to petastream.compat (the work is not done yet).
    """
    plan = Plan()
    if any(marker in code for marker in _CACHE_MARKERS):
        helpers = _layout_helpers(tree, plan)
        _cache_reads(tree, helpers, plan)
    if "collate_fn" in code:
        _collate(bindings, policy, tree.parents, plan)
    return plan


def _layout_helpers(tree: Tree, plan: Plan) -> set[cst.CSTNode]:
    """Report each use of a cache-layout helper (by its distinctive private name)."""
    found: set[cst.CSTNode] = set()
    for node in tree.of_type(cst.Name):
        name = cst.ensure_type(node, cst.Name)
        if name.value not in _HELPER_NAMES:
            continue
        parent = tree.parents.get(name)
        use: cst.CSTNode = parent if isinstance(parent, cst.Attribute) and parent.attr is name else name
        if any(isinstance(a, (cst.Import, cst.ImportFrom)) for a in tree.ancestors(use)):
            continue
        found.add(use)
        plan.findings.append(
            Finding(
                use,
                "cache-layout",
                f"{name.value} now comes from petastream.compat, where it works on an MDS cache "
                "(index.json + .mds shards), not on Petastorm's Parquet files",
                _LAYOUT_SUGGESTION,
            )
        )
    return found


# -- reads of the cache ---------------------------------------------------------------------------


def _cache_reads(tree: Tree, helpers: set[cst.CSTNode], plan: Plan) -> None:
    names, attrs = _cache_names(tree, helpers)
    for node in tree.of_type(cst.Call):
        call = cst.ensure_type(node, cst.Call)
        callee = full_name(call.func) or ""
        last = callee.rpartition(".")[2] or _method_name(call)
        if last not in _READS and last not in _LISTS:
            continue
        if callee.startswith("petastorm") or not _mentions_cache(call, names, attrs, helpers):
            continue
        what = "reads the converter's cache as Parquet" if last in _READS else "lists the converter's cache files"
        plan.findings.append(
            Finding(
                call,
                "cache-layout",
                f"{callee or last}(...) {what}, but the cache holds MDS shards now "
                "(index.json + .mds files)",
                _LAYOUT_SUGGESTION,
            )
        )


def _method_name(call: cst.Call) -> str:
    """``glob`` for ``Path(x).glob(...)``, whose callee has no dotted name."""
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else ""


def _cache_names(tree: Tree, helpers: set[cst.CSTNode]) -> tuple[set[str], set[str]]:
    """Variable names and attribute names assigned a value derived from the cache URL."""
    names: set[str] = set()
    attrs: set[str] = set()
    assignments = [
        (cst.ensure_type(n, cst.Assign).targets, cst.ensure_type(n, cst.Assign).value)
        for n in tree.of_type(cst.Assign)
    ]
    assignments += [
        ((cst.AssignTarget(a.target),), a.value)
        for a in (cst.ensure_type(n, cst.AnnAssign) for n in tree.of_type(cst.AnnAssign))
        if a.value is not None
    ]
    changed = True
    while changed:  # a = converter.cache_dir_url; b = a + "/x": until nothing new is found
        changed = False
        for targets, value in assignments:
            if not _mentions_cache(value, names, attrs, helpers):
                continue
            for target in targets:
                node = target.target
                if isinstance(node, cst.Name) and node.value not in names:
                    names.add(node.value)
                    changed = True
                elif isinstance(node, cst.Attribute) and node.attr.value not in attrs | _CACHE_ATTRS:
                    attrs.add(node.attr.value)
                    changed = True
    return names, attrs


def _mentions_cache(
    node: cst.CSTNode, names: set[str], attrs: set[str], helpers: set[cst.CSTNode]
) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if current in helpers:
            return True
        if isinstance(current, cst.Attribute) and (
            current.attr.value in _CACHE_ATTRS or current.attr.value in attrs or current.attr.value == _CONF_ATTR
        ):
            return True
        if isinstance(current, cst.Name) and current.value in names:
            return True
        if isinstance(current, cst.SimpleString) and current.evaluated_value == _CONF_KEY:
            return True
        stack.extend(current.children)
    return False


# -- collate_fn -------------------------------------------------------------------------------------


def _collate(
    bindings: Sequence[Binding],
    policy: Policy,
    parents: Mapping[cst.CSTNode, cst.CSTNode],
    plan: Plan,
) -> None:
    # decimal_friendly_collate is the default; it moves with its loader (see .pipeline)
    default = {m.node for m in members(bindings, COLLATES)}
    for member in members(bindings, frozenset({"petastorm.pytorch.DataLoader"})):
        if not isinstance(policy.resolve(member.written), Resolved):
            continue  # stays on Petastorm, which keeps its own collate behaviour
        arg = _collate_argument(member.node, parents)
        if arg is not None and arg.value not in default:
            plan.findings.append(
                Finding(
                    arg,
                    "custom-collate-fn",
                    "custom collate_fn kept: petastream.compat's DataLoader runs it per batch on "
                    "a list of rows, as Petastorm does",
                    "for speed, consider BatchedDataLoader (columns arrive as tensors) or a "
                    "TransformSpec in make_torch_dataloader(...)",
                    severity="info",
                )
            )


def _collate_argument(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> cst.Arg | None:
    call = call_of(node, parents)
    positional = 2  # DataLoader(reader, batch_size, collate_fn, ...)
    if call is None:  # functools.partial(DataLoader, ..., collate_fn=f)
        arg = parents.get(node)
        outer = parents.get(arg) if isinstance(arg, cst.Arg) else None
        callee = full_name(outer.func) if isinstance(outer, cst.Call) else None
        if callee is None or callee.rpartition(".")[2] != "partial":
            return None
        call, positional = cst.ensure_type(outer, cst.Call), 3
    for index, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == "collate_fn":
            return arg
        if arg.keyword is None and not arg.star and index == positional:
            return arg
    return None
