"""Read pipelines move to petastream.compat as one, or stay on Petastorm as one.

A read pipeline is a reader, the loaders or TF helpers reading from it, the TransformSpec it
is handed and the collate function its loader is given (:data:`mapping.PIPELINE`). Its pieces
only work with their own library's: petastream.compat.pytorch's loaders read a petastream
Reader (they need its ``pool_type`` and ``loader_kwargs``), Petastorm's ``tf_utils`` need a
Petastorm Reader, the two ``decimal_friendly_collate`` are not the same function, and a
TransformSpec moved while its reader stays makes the file need both libraries. So, per file
(one notebook: all its cells):

- Which readers compat takes over, and which of their calls, is declared in
  :data:`mapping.COMPAT_READERS`: today every ``make_reader`` and ``make_batch_reader`` call
  (any data, any store), and a ``WeightedSamplingReader``; ``petastorm.reader.Reader`` only as
  a name (annotations, isinstance): a file that calls it, Petastorm's internal constructor,
  keeps it on Petastorm, and with it its pipeline.
- The pieces are grouped by what the file connects (:func:`links.links`: a loader to its
  reader, a TransformSpec to the reader it is handed, a collate function to its loader; each
  imported name is one piece, so two pipelines sharing a ``DataLoader`` import are one group).
  A group with a reader that stays stays whole, and its other pieces are reported
  (``kept-with-petastorm-reader``, naming that reader); a group without one moves whole.
- A piece the file does not connect (a loader handed a parameter, a TransformSpec built for
  another module) stays too while the file keeps any reader on Petastorm, and moves otherwise.
  What goes to a converter (``make_torch_dataloader(data_loader_fn=BatchedDataLoader)``, also
  through ``functools.partial``, or ``transform_spec=spec``) is compat's after the migration:
  a piece only used that way moves. A TransformSpec handed to both a converter and a reader
  that stays moves: compat's converter needs compat's, and Petastorm's readers read compat's
  (they use only its ``func``, ``edit_fields``, ``removed_fields`` and ``selected_fields``).

The outcome is a :class:`Policy`, whose :meth:`Policy.resolve` replaces :func:`mapping.resolve`
for every other analysis of the file, so imports, attribute chains and patch targets agree.

A loader that moves but reads a reader from outside the file (a parameter, another module's
helper) cannot be checked here: :func:`unchecked_loaders` notes each such call
(``loader-reader-unchecked``), since a Petastorm reader handed to it fails at run time.

The converter's context managers, constructed by hand (``TorchDatasetContextManager(files,
batch_size, kwargs, 0, None)``), are a reader and a loader in one: compat's read only the MDS
files a converter wrote. Handed ``converter.file_urls`` they move; handed literal URLs (Parquet
files, by construction) they stay on Petastorm, reported; handed anything else they move with a
note (``files-unchecked``, :func:`unchecked_context_managers`), as a loader handed an outside
reader does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from .bindings import Binding
from .links import CONVERTER, UNKNOWN, call_of, first_argument, index_flow, links
from .mapping import (
    COLLATES,
    COMPAT_READERS,
    LOADERS,
    NAME_ONLY,
    PIPELINE,
    READERS,
    TRANSFORMS,
    Resolved,
    Unsupported,
    canonical,
    resolve,
)
from .plan import Finding
from .tree import Tree

__all__ = ["Member", "Policy", "members", "plan_pipeline", "call_of", "unchecked_loaders",
           "unchecked_context_managers"]

KEPT = "kept-with-petastorm-reader"
# The converter's context managers, by the name of the argument holding the files they read.
_CONTEXT_MANAGERS = {
    f"petastorm.spark.spark_dataset_converter.{name}": "parquet_file_url_list"
    for name in ("TorchDatasetContextManager", "TFDatasetContextManager")
}


@dataclass(frozen=True, eq=False)
class Member:
    """One place a Petastorm object of interest is named in the file."""

    path: str  # canonical Petastorm path (petastorm.reader.make_reader -> petastorm.make_reader)
    written: str  # the path as the file spells it
    node: cst.CSTNode  # the Name/Attribute naming it, or the import alias when it is never used


def members(bindings: Sequence[Binding], wanted: frozenset[str]) -> Iterator[Member]:
    """Every use (or unused import) of a path in ``wanted``, in binding order, each once
    (``import petastorm.spark`` and ``import petastorm.pytorch`` both bind ``petastorm``)."""
    seen: set[int] = set()
    for member in _members(bindings, wanted):
        if id(member.node) not in seen:
            seen.add(id(member.node))
            yield member


def _members(bindings: Sequence[Binding], wanted: frozenset[str]) -> Iterator[Member]:
    for binding in bindings:
        if not binding.is_module:
            path = canonical(binding.path)
            if path not in wanted:
                continue
            if not binding.uses:
                yield Member(path, binding.path, binding.alias)
            for use in binding.uses:
                if isinstance(use.node, cst.Name):
                    yield Member(path, binding.path, use.node)
            continue
        for use in binding.uses:
            if not isinstance(use.node, cst.Name):
                continue
            attrs = use.attrs or ()
            for depth in range(1, len(attrs) + 1):
                written = ".".join([binding.path, *attrs[:depth]])
                if canonical(written) in wanted:
                    yield Member(canonical(written), written, use.attributes[depth - 1])
                    break


def _is_file_urls(url: cst.BaseExpression | None) -> bool:
    return isinstance(url, cst.Attribute) and url.attr.value == "file_urls"


def _literal_urls(url: cst.BaseExpression | None) -> bool:
    """A string, or a list/tuple of strings, written in the call: not a converter's files."""
    if isinstance(url, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
        return True
    if isinstance(url, (cst.List, cst.Tuple)) and url.elements:
        return all(_literal_urls(e.value) for e in url.elements)
    return False


@dataclass
class Policy:
    """What the file's read pipelines decided; :meth:`resolve` is the file's resolver."""

    blocked: dict[str, Unsupported] = field(default_factory=dict)  # canonical path -> why it stays
    staying: str | None = None  # the first reader or TF helper that stays on Petastorm

    def resolve(self, path: str) -> Resolved | Unsupported:
        key = canonical(path)
        if key in self.blocked:
            kept = self.blocked[key]
            return Unsupported(path, kept.suggestion, kept.code, kept.reason)
        return resolve(path)

    def star_kept(self, module: str) -> Unsupported | None:
        """Why ``from <module> import *`` stays, when it brings in a piece of a pipeline."""
        if self.staying is None or not any(p.rpartition(".")[0] == module for p in PIPELINE):
            return None
        return _kept(f"from {module} import *", self.staying, linked=False)


def plan_pipeline(tree: Tree, bindings: Sequence[Binding]) -> Policy:
    parents = tree.parents
    found = list(members(bindings, PIPELINE))
    policy = Policy()
    for member in members(bindings, frozenset(_CONTEXT_MANAGERS)):
        call = call_of(member.node, parents)
        if call is not None and _literal_urls(first_argument(call, _CONTEXT_MANAGERS[member.path])):
            policy.blocked[member.path] = _reads_parquet(member.path)
    for member in found:
        if member.path in READERS and member.path not in policy.blocked:
            takes = COMPAT_READERS.get(member.path)
            if takes is None:
                policy.blocked[member.path] = _not_taken(member.path)
            elif takes == NAME_ONLY and call_of(member.node, parents) is not None:
                policy.blocked[member.path] = _constructed(member.path)
    # readers and TF helpers compat does not take over: where pipelines stay, in file order
    roots = list(dict.fromkeys(m.path for m in found if isinstance(policy.resolve(m.written), Unsupported)))
    if not roots:
        return policy
    policy.staying = roots[0]
    groups = _Groups()
    unknown: set[str] = set()
    to_converter: set[str] = set()
    flow = index_flow(tree, [(m.path, m.node) for m in found])
    for member in found:
        groups.add(member.path)
        for target in links(member.path, member.node, flow):
            if target == UNKNOWN:
                unknown.add(member.path)
            elif target == CONVERTER:
                to_converter.add(member.path)
            else:
                groups.join(member.path, target)
    for group in groups.all():
        stays = [p for p in roots if p in group]
        if not stays and not group & unknown:
            continue  # a pipeline compat takes over whole
        transforms_move = "petastorm.TransformSpec" in to_converter
        for path in sorted(group - set(roots)):
            if path in TRANSFORMS and transforms_move:
                continue  # compat's TransformSpec serves the converter and Petastorm's reader
            policy.blocked[path] = _kept(path, (stays or roots)[0], linked=bool(stays))
    return policy


class _Groups:
    """Pipeline pieces joined by what the file connects (a small union-find over paths)."""

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}

    def add(self, path: str) -> None:
        self._parent.setdefault(path, path)

    def _root(self, path: str) -> str:
        self.add(path)
        while self._parent[path] != path:
            self._parent[path] = self._parent[self._parent[path]]
            path = self._parent[path]
        return path

    def join(self, a: str, b: str) -> None:
        self._parent[self._root(a)] = self._root(b)

    def all(self) -> list[set[str]]:
        out: dict[str, set[str]] = {}
        for path in self._parent:
            out.setdefault(self._root(path), set()).add(path)
        return list(out.values())


def _kept(path: str, reader: str, *, linked: bool) -> Unsupported:
    if path in READERS:
        role = (
            "it would become a petastream reader, which Petastorm's loaders, tf_utils and "
            "WeightedSamplingReader cannot read"
        )
    elif path in TRANSFORMS:
        name = path.rpartition(".")[2]
        role = f"moving {name} without its reader would make this file need petastream as well as petastorm"
    elif path in COLLATES:
        role = "petastream.compat's decimal_friendly_collate goes with petastream.compat's loaders, not Petastorm's"
    else:
        role = "petastream.compat's loaders and tf_utils read only petastream readers"
    where = f"its read pipeline uses {reader}" if linked else f"this file also uses {reader}"
    reason = f"{path} stays on Petastorm: {where}, which stays on Petastorm, and {role}"
    suggestion = (
        f"migrate {reader} first (see its item); the rest of the pipeline moves with it on the "
        "next run; until then this file keeps petastorm (and so does the project's dependency list)"
    )
    return Unsupported(path, suggestion, KEPT, reason)


def _not_taken(path: str) -> Unsupported:
    return Unsupported(
        path,
        "rewrite this reader by hand with make_reader or make_batch_reader from petastream.compat",
        "unsupported-use",
        f"{path} is not a reader petastream.compat takes over",
    )


def _constructed(path: str) -> Unsupported:
    return Unsupported(
        path,
        "create the reader with make_reader(url, ...) or make_batch_reader(url, ...), which "
        "petastream.compat takes over with Petastorm's arguments; until then this file keeps "
        "petastorm, and so does the reader's pipeline",
        "unsupported-use",
        f"{path} is called in this file: its constructor (pyarrow_filesystem, dataset_path, "
        "worker_class, ...) is Petastorm's reader internals, which petastream.compat does not "
        "provide (it keeps the name, for annotations and isinstance)",
    )


def _reads_parquet(path: str) -> Unsupported:
    name = path.rpartition(".")[2]
    return Unsupported(
        path,
        "convert the data with make_spark_converter(spark.read.parquet(url)) and use "
        "converter.make_torch_dataloader()/make_tf_dataset() (petastream.compat); until then "
        "this file keeps petastorm",
        "unsupported-use",
        f"{name} is handed file URLs here, which it reads as Parquet; petastream.compat's "
        f"{name} reads only the MDS files a converter wrote (converter.file_urls)",
    )


def unchecked_context_managers(
    tree: Tree, bindings: Sequence[Binding], policy: Policy
) -> list[Finding]:
    """Notes on moving context-manager calls whose files are not ``converter.file_urls``."""
    notes = []
    for member in members(bindings, frozenset(_CONTEXT_MANAGERS)):
        call = call_of(member.node, tree.parents)
        if call is None or not isinstance(policy.resolve(member.written), Resolved):
            continue
        files = first_argument(call, _CONTEXT_MANAGERS[member.path])
        if files is None or _is_file_urls(files):
            continue
        name = member.path.rpartition(".")[2]
        notes.append(
            Finding(
                files,
                "files-unchecked",
                f"{name} now comes from petastream.compat, which reads only the MDS files a "
                "converter wrote; these files are made outside this call",
                "make sure they are converter.file_urls; for Parquet files use "
                "make_spark_converter(spark.read.parquet(url)), or keep Petastorm here",
                severity="info",
            )
        )
    return notes


def unchecked_loaders(tree: Tree, bindings: Sequence[Binding], policy: Policy) -> list[Finding]:
    """Notes on moving loader calls whose reader does not come from a reader made in this file."""
    parents = tree.parents
    readers = {
        m.node for m in members(bindings, READERS) if isinstance(policy.resolve(m.written), Resolved)
    }
    made = _names_bound_to_readers(tree, readers)
    notes = []
    for member in members(bindings, LOADERS):
        call = call_of(member.node, parents)
        if call is None or not isinstance(policy.resolve(member.written), Resolved):
            continue
        source = first_argument(call, "reader")
        if source is None or _is_reader(source, readers, made):
            continue
        notes.append(
            Finding(
                source,
                "loader-reader-unchecked",
                f"{member.path.rpartition('.')[2]} now comes from petastream.compat and needs a "
                "petastream reader; this one is made outside this file",
                "make sure it comes from petastream.compat (make_reader, make_batch_reader, "
                "migrated with it) or use converter.make_torch_dataloader(); a Petastorm reader "
                "fails here",
                severity="info",
            )
        )
    return notes


def _is_reader(expr: cst.BaseExpression, readers: set[cst.CSTNode], made: set[str]) -> bool:
    if isinstance(expr, cst.Call):
        return expr.func in readers
    return isinstance(expr, cst.Name) and expr.value in made


def _names_bound_to_readers(tree: Tree, readers: set[cst.CSTNode]) -> set[str]:
    """``r = make_batch_reader(...)`` and ``with make_batch_reader(...) as r`` in this file."""
    made: set[str] = set()
    for node in tree.of_type(cst.Assign, cst.WithItem):
        if isinstance(node, cst.Assign):
            value, targets = node.value, [t.target for t in node.targets]
        else:
            item = cst.ensure_type(node, cst.WithItem)
            value, targets = item.item, [item.asname.name] if item.asname is not None else []
        if isinstance(value, cst.Call) and value.func in readers:
            made.update(t.value for t in targets if isinstance(t, cst.Name))
    return made
