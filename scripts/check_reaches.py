"""No module of petastream reaches another's private names.

A loader is a composition of values (petastream.pipeline), and every package talks to the
others through their public names: a module that reads another's ``_private`` attribute, or
imports a ``_private`` name or module from outside the package it belongs to, couples to its
insides and breaks silently when they change. Checked (an AST walk, no import):

* imports: a ``_private`` module or name is the business of the package it lives in, and of
  that package's subpackages (``petastream._extras`` of all of petastream's;
  ``petastream.spark._records`` of ``petastream.spark``'s; ``_f`` defined in
  ``petastream.storage.location`` of ``petastream.mds``'s): importing it from outside is a reach;
* attributes: ``x._name`` where ``x`` is not ``self``, ``cls`` or ``super()``, unless ``_name``
  is one this module defines itself (an attribute its classes set on ``self``, or a name in one
  of its class bodies: another instance of its own class, a fork handler of its own cache), or a
  name the standard library documents as public despite the underscore (namedtuple's
  ``_replace``, ``_asdict``, ``_fields``, ``_make``, ``_field_defaults``; ``os._exit``).

What remains is listed below, each reach with its reason: ``ALLOWED`` (a third party's insides
with no public way to the same thing), and ``PENDING`` (in modules another change is rewriting
or deleting; remove the entry with the reach).

Usage: ``python scripts/check_reaches.py [paths...]`` (default: all of src/petastream); prints
each reach as ``path:line: what`` and exits 1 if there is any not listed.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

ROOT = Path(os.environ.get("PETASTREAM_CHECK_ROOT") or Path(__file__).resolve().parent.parent / "src")
DEFAULT = ["petastream"]

# Underscore names that are public API where they are used.
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}
PUBLIC_UNDERSCORE = {("os", "_exit")}

# (module path under src/, what) -> why the reach stays.
ALLOWED = {
    ("petastream/torch/_processes.py", "reaches it._workers_done_event"):
        "torch's DataLoader iterator: a fresh event for its shutdown after a worker died holding the old one's lock",
    ("petastream/spark/cache.py", "reaches df.sparkSession.sparkContext._jvm"):
        "pyspark: the analyzed plan as explain(extended) prints it has no Python API on classic Spark; "
        "the JVM's PythonSQLUtils is what DataFrame.explain itself calls",
    ("petastream/spark/cache.py", "reaches df._explain_string"):
        "pyspark Connect: the same text without printing it (DataFrame.explain prints to stdout and returns None)",
    ("petastream/compat/etl/_pickling.py", "reaches pickle._Pickler"):
        "the pure-Python pickler: its save_global can name a class after a module absent here (petastorm), "
        "which the C pickler refuses; Petastorm-readable schema pickles need it",
    ("petastream/parquet/discover.py", "reaches fs._strip_protocol"):
        "fsspec's classmethod: the path a filesystem object given by the user (Petastorm's ETL API takes "
        "them) has for a URL; fsspec.core.strip_protocol picks the class by the URL's scheme instead, which "
        "need not be the given object's (a pyarrow.fs filesystem wrapped)",
    ("petastream/compat/etl/_pickling.py", "reaches copyreg._reconstructor"):
        "protocol 0/1 pickles (Petastorm datasets written from Python 2) name copyreg._reconstructor; "
        "the safe unpickler's allow-list has to hold that very function",
    ("petastream/spark/scan_plan.py", "reaches df._jdf"):
        "pyspark classic's JVM DataFrame: the optimized logical plan (queryExecution) has no Python "
        "API, and reading the plan is how the converter knows a DataFrame is a plain scan of files",
    ("petastream/spark/scan_plan.py", "reaches df._plan"):
        "pyspark Connect's client-side plan (its protobuf): the only view of a Connect DataFrame's "
        "plan without asking the server, which may not know Delta",
}

# Reaches in modules that another change of issue 37 is rewriting or deleting (owner in brackets).
PENDING: dict[tuple[str, str], str] = {}  # none left: issue 37's rewrites have landed


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _is_package(module: str) -> bool:
    return (ROOT.joinpath(*module.split(".")) / "__init__.py").exists()


def _scope(target: str) -> str | None:
    """The package whose business the private part of ``target`` (a dotted module or name) is;
    None when nothing in it is private."""
    parts = target.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            parent = ".".join(parts[:i])
            return parent if not parent or _is_package(parent) else parent.rsplit(".", 1)[0]
    return None


def _own_private_names(tree: ast.Module) -> set[str]:
    """The private names this module defines: attributes set on ``self``/``cls`` and names
    bound in its class bodies."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(item.name)
                elif isinstance(item, ast.Assign):
                    names.update(t.id for t in item.targets if isinstance(t, ast.Name))
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
    return {n for n in names if _private(n)}


def _self_like(base: ast.expr) -> bool:
    if isinstance(base, ast.Name):
        return base.id in ("self", "cls")
    return isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super"


def reaches(path: Path) -> list[tuple[int, str]]:
    """``(line, what)`` of each reach in the module at ``path``."""
    module = _module_name(path)
    tree = ast.parse(path.read_text(), str(path))
    own_names = _own_private_names(tree)
    out = []

    def outside(target: str) -> bool:
        scope = _scope(target)
        return scope is not None and not (not scope or module == scope or module.startswith(scope + "."))

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mod = node.module
            if not mod.startswith("petastream"):
                continue
            if outside(mod):
                out.append((node.lineno, f"imports from another package's private module {mod}"))
            for alias in node.names:
                if _private(alias.name) and not outside(mod) and outside(f"{mod}.{alias.name}"):
                    out.append((node.lineno, f"imports private {alias.name} from {mod}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("petastream") and outside(alias.name):
                    out.append((node.lineno, f"imports another package's private module {alias.name}"))
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            if (_self_like(base) or node.attr in own_names or node.attr in NAMEDTUPLE_API
                    or (ast.unparse(base), node.attr) in PUBLIC_UNDERSCORE):
                continue
            out.append((node.lineno, f"reaches {ast.unparse(node)}"))
    return sorted(out)


def main(argv: list[str]) -> int:
    targets = [Path(a) for a in argv] or [ROOT / p for p in DEFAULT]
    files = [f.resolve() for t in targets for f in (sorted(t.rglob("*.py")) if t.is_dir() else [t])]
    listed = {**ALLOWED, **PENDING}
    found, used = [], set()
    for f in files:
        rel = str(f.relative_to(ROOT))
        for line, what in reaches(f):
            if (rel, what) in listed:
                used.add((rel, what))
            else:
                found.append(f"{f}:{line}: {what}")
    print("\n".join(found) if found else f"no private reaches in {len(files)} modules "
          f"(besides {len(used)} listed in scripts/check_reaches.py)")
    if not argv:  # a listed reach that is gone: its entry can go too
        for rel, what in sorted(set(listed) - used):
            print(f"note: listed but not found (remove the entry): {rel}: {what}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
