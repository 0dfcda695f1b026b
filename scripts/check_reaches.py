"""No module on the loader path reaches another module's private names.

A loader is a composition of values (petastream.pipeline); a module that reads another's
``_private`` attribute, or imports a ``_private`` name or module from another package, couples
to its insides and breaks silently when they change. Checked (an AST walk, no import):

* ``from petastream.a.b import _name`` and ``import``/``from`` of ``petastream.a._mod``, where
  ``_name``/``_mod`` is not in the importing module's own package;
* ``x._name`` where ``x`` is not ``self`` or ``cls`` (another object's private attribute).

Usage: ``python scripts/check_reaches.py [paths...]`` (default: the loader path); prints each
reach as ``path:line: what`` and exits 1 if there is any.
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

ROOT = Path(os.environ.get("PETASTREAM_CHECK_ROOT") or Path(__file__).resolve().parent.parent / "src")
LOADER_PATH = ["petastream/source.py", "petastream/pipeline", "petastream/torch", "petastream/tf",
               "petastream/compat/_tf.py", "petastream/compat/_collate.py", "petastream/stream/budget.py"]


# Reaches into a third party's insides, each a workaround with its reason.
ALLOWED = {
    ("petastream/torch/_processes.py", "it._workers_done_event"):
        "torch's DataLoader iterator: a fresh event for its shutdown after a worker died holding the old one's lock",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _package(module: str) -> str:
    return module.rsplit(".", 1)[0]


def reaches(path: Path) -> list[str]:
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    own = module if path.name == "__init__.py" else _package(module)
    tree = ast.parse(path.read_text(), str(path))
    out = []

    def foreign(target: str) -> bool:  # a module outside this module's own package
        return not (target == own or target.startswith(own + "."))

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mod = node.module
            if mod.startswith("petastream") and foreign(mod) and any(_private(p) for p in mod.split(".")):
                out.append(f"{path}:{node.lineno}: imports from another package's private module {mod}")
            for alias in node.names:
                if _private(alias.name) and mod.startswith("petastream") and mod != module:
                    out.append(f"{path}:{node.lineno}: imports private {alias.name} from {mod}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("petastream") and foreign(alias.name) and any(
                        _private(p) for p in alias.name.split(".")):
                    out.append(f"{path}:{node.lineno}: imports another package's private module {alias.name}")
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            allowed = (str(path.relative_to(ROOT)), ast.unparse(node)) in ALLOWED
            if not (isinstance(base, ast.Name) and base.id in ("self", "cls")) and not allowed:
                out.append(f"{path}:{node.lineno}: reaches {ast.unparse(node)}")
    return out


def main(argv: list[str]) -> int:
    targets = [Path(a) for a in argv] or [ROOT / p for p in LOADER_PATH]
    files = [f for t in targets for f in (sorted(t.rglob("*.py")) if t.is_dir() else [t])]
    found = [r for f in files for r in reaches(f.resolve())]
    print("\n".join(found) if found else f"no private reaches in {len(files)} modules")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
