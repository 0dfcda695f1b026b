"""One file in, one :class:`FileResult` out: pick the transform by file kind, never raise.

Kinds: ``python`` (.py), ``databricks`` (a .py Databricks source notebook), ``notebook``
(.ipynb), ``requirements`` (requirements*.txt / .in, and .txt/.in files in a
``requirements/`` folder), ``setup.py`` (Python and its dependency lists), ``setup.cfg``,
``pyproject.toml``, ``conda`` (environment*.yml / .yaml, conda*.yml / .yaml) and ``lock``
(poetry.lock, uv.lock, Pipfile.lock, pdm.lock, conda-lock.yml). The dependency kinds
(:data:`DEPENDENCY_KINDS`) take :attr:`Options.project`: what the code of the same run still
needs. A file that never mentions Petastorm or petastream is not parsed. Nothing is written
here; an unreadable or unparseable file becomes a result with ``error`` set.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import libcst as cst

from .conda import is_conda_environment, migrate_environment_yml
from .depfile import Project
from .import_order import ImportStyle, style_for
from .locks import LOCK_FILES, lock_items
from .notebooks import is_databricks_source, migrate_databricks, migrate_ipynb
from .packaging import migrate_pyproject, migrate_setup_cfg
from .python import describe_parse_error, migrate_python
from .report import FileResult, ManualItem
from .requirements import migrate_requirements_txt
from .setup_py import migrate_setup_py

__all__ = ["Options", "DEPENDENCY_KINDS", "file_kind", "migrate_file", "migrate_text"]

DEPENDENCY_KINDS = frozenset({"requirements", "setup.py", "setup.cfg", "pyproject.toml", "conda", "lock"})

_REQUIREMENTS = re.compile(r"requirements.*\.(txt|in)", re.I)
_BOM = "\ufeff"
_MARKERS = (b"petastorm", b"parent_cache_dir_url_conf", b"petastream")


@dataclass(frozen=True)
class Options:
    """Settings for one run that every worker needs."""

    todo: bool = False  # mark manual items with "# TODO(petastream): ..." comments
    style: ImportStyle | None = None  # the file's isort settings (set per file by migrate_file)
    # For dependency files: what the code migrated in the same run still needs (None: no
    # knowledge, the file is migrated on its own and petastorm is replaced).
    project: Project | None = None


def file_kind(path: Path) -> str | None:
    name = path.name
    if name == "setup.py":
        return "setup.py"
    if name.endswith(".py"):
        return "python"
    if name.endswith(".ipynb"):
        return "notebook"
    if name in ("setup.cfg", "pyproject.toml"):
        return name
    if name in LOCK_FILES or name.endswith(".conda-lock.yml"):
        return "lock"
    if is_conda_environment(name):
        return "conda"
    if _REQUIREMENTS.fullmatch(name) or (
        path.parent.name == "requirements" and path.suffix in (".txt", ".in")
    ):
        return "requirements"
    return None


def needs_migration(path: Path) -> bool:
    """False when the file cannot need anything (it never mentions Petastorm or petastream);
    unreadable files say True, so their error is reported by :func:`migrate_file`."""
    try:
        data = path.read_bytes().lower()
    except OSError:
        return True
    return any(marker in data for marker in _MARKERS)


def migrate_file(path: Path, display: str, options: Options) -> FileResult:
    kind = file_kind(path)
    if kind is None:
        return FileResult(
            display,
            "unknown",
            error="not a file petastream migrate handles (.py, .ipynb, requirements*.txt, "
            "setup.py, setup.cfg, pyproject.toml, environment.yml, lock files)",
        )
    try:
        data = path.read_bytes()
    except OSError as err:
        return FileResult(display, kind, error=f"cannot read: {err.strerror or err}")
    if not any(marker in data.lower() for marker in _MARKERS):
        return FileResult(display, kind)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return FileResult(display, kind, error=f"not UTF-8 text ({err.reason} at byte {err.start})")
    if kind not in DEPENDENCY_KINDS or kind == "setup.py":
        options = replace(options, style=style_for(path))
    return migrate_text(text, kind, display, options, name=path.name)


def migrate_text(
    text: str, kind: str, display: str, options: Options, *, name: str = ""
) -> FileResult:
    """Migrate ``text`` as a file of ``kind``; the result's texts keep a leading BOM."""
    bom = _BOM if text.startswith(_BOM) else ""
    body = text[len(bom) :]
    if kind == "python" and is_databricks_source(body):
        kind = "databricks"
    errors: list[str] = []
    try:
        if kind == "lock":
            new, items = body, lock_items(body, name, options.project)
        else:
            new, items = _TRANSFORMS[kind](body, options, errors)
    except cst.ParserSyntaxError as err:
        # a Databricks file failed with its magics masked: LibCST's account is of that text
        return FileResult(display, kind,
                          error=describe_parse_error(err, body if kind == "python" else None))
    except (ValueError, RecursionError) as err:
        return FileResult(display, kind, error=str(err) or type(err).__name__)
    except Exception as err:  # noqa: BLE001 - one broken file must not stop the run
        return FileResult(display, kind, error=f"internal error: {type(err).__name__}: {err}")
    result = FileResult(display, kind, original=text, items=items)
    if new != body:
        result.new = bom + new
    if errors:
        result.error = "; ".join(errors)
    return result


_Transform = Callable[[str, Options, list[str]], tuple[str, list[ManualItem]]]


def _python(text: str, options: Options, errors: list[str]) -> tuple[str, list[ManualItem]]:
    result = migrate_python(text, todo=options.todo, style=options.style)
    return result.code, result.items


def _databricks(text: str, options: Options, errors: list[str]) -> tuple[str, list[ManualItem]]:
    result = migrate_databricks(text, todo=options.todo, style=options.style)
    return result.text, result.items


def _notebook(text: str, options: Options, errors: list[str]) -> tuple[str, list[ManualItem]]:
    result = migrate_ipynb(text, todo=options.todo, style=options.style)
    errors.extend(result.errors)
    return result.text, result.items


def _setup_py(text: str, options: Options, errors: list[str]) -> tuple[str, list[ManualItem]]:
    code, items = _python(text, options, errors)
    project = options.project
    own = tuple(f"setup.py:{i.line}" for i in items if i.keeps_petastorm)
    if project is not None and own:
        project = Project((*project.petastorm_uses, *own), project.code_scanned)
    code, more = migrate_setup_py(code, project)
    return code, sorted([*items, *more], key=lambda i: (i.line, i.column))


def _text(fn: Callable[[str, Project | None], tuple[str, list[ManualItem]]]) -> _Transform:
    return lambda text, options, errors: fn(text, options.project)


_TRANSFORMS: dict[str, _Transform] = {
    "python": _python,
    "databricks": _databricks,
    "notebook": _notebook,
    "setup.py": _setup_py,
    "requirements": _text(migrate_requirements_txt),
    "setup.cfg": _text(migrate_setup_cfg),
    "pyproject.toml": _text(migrate_pyproject),
    "conda": _text(migrate_environment_yml),
}
