"""petastream.migrate: rewrite Petastorm code to use petastream.compat (a LibCST codemod).

``petastream migrate PATH...`` is the command (:mod:`petastream.migrate.cli`); the same is
available from Python::

    from petastream.migrate import migrate_paths, migrate_source, Options, Report

    results = migrate_paths(["src/"], Options(todo=False), jobs=4)
    report = Report.build("diff", results)

Modules, one job each: ``mapping`` (what Petastorm names become), ``bindings`` and
``imports`` (Python imports and their uses, scope-aware), ``strings`` (mock.patch targets),
``python`` (one Python source), ``requirements`` / ``packaging`` / ``setup_py`` (the
dependency), ``magics`` / ``notebooks`` (Jupyter and Databricks), ``files`` (one file),
``runner`` (many files), ``report``, ``cli``. Importing this package pulls in LibCST only.
"""

from __future__ import annotations

from .files import Options, migrate_file, migrate_text
from .python import PythonResult, migrate_python
from .report import FileResult, ManualItem, Report
from .runner import migrate_paths

__all__ = [
    "FileResult",
    "ManualItem",
    "Options",
    "PythonResult",
    "Report",
    "migrate_file",
    "migrate_paths",
    "migrate_python",
    "migrate_source",
    "migrate_text",
]


def migrate_source(code: str, *, todo: bool = False) -> str:
    """``code`` (Python) migrated to petastream.compat; manual items are not returned."""
    return migrate_python(code, todo=todo).code
