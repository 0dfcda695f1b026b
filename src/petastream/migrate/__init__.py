"""petastream.migrate: rewrite Petastorm code to use petastream.compat (a LibCST codemod).

``petastream migrate PATH...`` is the command (:mod:`petastream.migrate.cli`); the same is
available from Python::

    from petastream.migrate import migrate_paths, migrate_source, Options, Report

    results = migrate_paths(["src/"], Options(todo=False), jobs=4)
    report = Report.build("diff", results)

Modules, one job each: ``mapping`` (what Petastorm names become), ``advice`` (what to do
instead where petastream.compat has no equivalent), ``bindings`` and
``imports`` (Python imports and their uses, scope-aware), ``pipeline`` and ``links`` (a read
pipeline -- reader, loaders, TransformSpec, collate -- moves or stays as one), ``usages``
(cache-layout reads, custom collate_fn), ``strings`` (mock.patch targets), ``import_order``
(lint-clean imports), ``python`` (one Python source); ``depfile`` (the dependency decision for every format), ``pins`` (version
pins against petastream's metadata), ``pep508`` (requirement strings, pip commands),
``requirements`` / ``packaging`` / ``setup_py`` / ``conda`` / ``locks`` (the formats);
``magics`` / ``notebooks`` (Jupyter and Databricks), ``files`` (one file), ``runner`` (many
files, code first, then dependency files), ``report``, ``cli``. The user guide is
docs/migrate-tool.md. Importing this package pulls in LibCST, packaging and PyYAML only.
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
