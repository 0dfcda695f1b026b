"""requirements*.txt / *.in files: the petastorm requirement, the pins beside it, lock files.

Every requirement line becomes an :class:`~.depfile.Entry` and :func:`~.depfile.plan_dependencies`
decides (petastorm -> ``petastream[spark]`` or kept beside it; pins reviewed). Comments,
options (``-r``, ``--index-url``), markers and line endings are kept byte for byte.

A lock file (pip-compile or ``uv pip compile`` output, or any file with ``--hash`` pins) is not
edited: rewriting one line of a resolved set leaves Petastorm's transitive pins behind and no
longer matches its hashes. It gets one ``regenerate-lock`` item instead, naming the command
from its header, until it is regenerated from its migrated input (:mod:`.locks`).

The requirement-string rules live in :mod:`.pep508` (re-exported here).
"""

from __future__ import annotations

import re

from .depfile import (
    Entry,
    Project,
    apply_edits,
    attach_comments,
    line_removal,
    line_sibling,
    plan_dependencies,
)
from .locks import is_pip_lock, lock_items
from .pep508 import (
    NEW_REQUIREMENT,
    URL_SUGGESTION,
    new_requirement,
    rewrite_pip_command,
    rewrite_requirement,
)
from .report import ManualItem

__all__ = [
    "NEW_REQUIREMENT",
    "URL_SUGGESTION",
    "migrate_requirements_txt",
    "new_requirement",
    "requirement_entries",
    "rewrite_pip_command",
    "rewrite_requirement",
]

_LINE = re.compile(r"(?P<lead>\s*)(?P<req>[^#]*?)(?P<comment>\s*(?:#.*)?)")


def requirement_entries(text: str) -> list[Entry]:
    entries: list[Entry] = []
    pos = 0
    for number, raw in enumerate(text.splitlines(keepends=True), start=1):
        body = raw.rstrip("\r\n")
        match = _LINE.fullmatch(body)
        req = match["req"].rstrip(" \t\\") if match is not None else ""
        if match is not None and req and (not req.startswith("-") or "petastorm" in req.lower()):
            start = pos + match.start("req")
            end = start + len(req)
            comment = match["comment"].strip()
            entries.append(
                Entry(
                    number,
                    start,
                    end,
                    req,
                    comment=comment,
                    comment_span=(pos + match.end("comment") - len(comment), pos + match.end("comment"))
                    if comment
                    else None,
                    add=line_sibling(text, start, end),
                    remove=line_removal(text, start, end),
                )
            )
        pos += len(raw)
    return attach_comments(text, entries)


def migrate_requirements_txt(text: str, project: Project | None = None) -> tuple[str, list[ManualItem]]:
    """``project``: what the code of the same run needs (None: unknown, petastorm is replaced)."""
    if is_pip_lock(text):
        return text, lock_items(text, "requirements", project)
    edits, items = plan_dependencies(requirement_entries(text), project)
    return apply_edits(text, edits), items
