"""The Petastorm dependency in setup.cfg and pyproject.toml, edited as text.

Both formats are scanned line by line (no TOML/INI round trip) into :class:`~.depfile.Entry`
objects, so every other byte of the file stays as it was; :func:`~.depfile.plan_dependencies`
decides. Covered: setup.cfg ``[options] install_requires / setup_requires / tests_require``
and ``[options.extras_require]``; pyproject.toml PEP 621 ``dependencies`` and
``[project.optional-dependencies]``, PEP 735 ``[dependency-groups]``, ``dependencies``-style
arrays of tool tables (hatch, pdm, uv), and Poetry's ``[tool.poetry.*dependencies]`` tables.
"""

from __future__ import annotations

import re

from .depfile import (
    Entry,
    Project,
    alone_on_line,
    apply_edits,
    attach_comments,
    inline_sibling,
    line_removal,
    line_sibling,
    plan_dependencies,
    trailing_comment,
)
from .pep508 import new_requirement
from .report import ManualItem

__all__ = ["migrate_setup_cfg", "migrate_pyproject", "setup_cfg_entries", "pyproject_entries"]

# -- setup.cfg ------------------------------------------------------------------------------------

_CFG_SECTION = re.compile(r"\s*\[(?P<name>[^\]]+)\]\s*$")
_CFG_KEY = re.compile(r"(?P<key>[^\s#;=:][^=:]*?)\s*[=:]\s*(?P<value>.*)$")
_CFG_DEP_KEYS = {"install_requires", "setup_requires", "tests_require"}
_VALUE = re.compile(r"(?P<req>[^#]*?)(?P<comment>\s*(?:#.*)?)")


def setup_cfg_entries(text: str) -> list[Entry]:
    entries: list[Entry] = []
    section, in_deps, pos = "", False, 0
    for number, raw in enumerate(text.splitlines(keepends=True), start=1):
        body = raw.rstrip("\r\n")
        line_pos, pos = pos, pos + len(raw)
        if (header := _CFG_SECTION.match(body)) is not None:
            section, in_deps = header["name"].strip().lower(), False
            continue
        if not body.strip() or body.lstrip()[0] in "#;":
            continue
        prefix = None
        if (key := _CFG_KEY.match(body)) is not None and not body[0].isspace():
            name = key["key"].strip().lower().replace("-", "_")
            in_deps = section == "options.extras_require" or (section == "options" and name in _CFG_DEP_KEYS)
            start, value, prefix = key.start("value"), key["value"], "    "
        elif in_deps:
            start, value = 0, body
        else:
            continue
        match = _VALUE.fullmatch(value)
        if not in_deps or match is None or not match["req"].strip():
            continue
        req = match["req"].strip()
        begin = line_pos + start + value.index(req)
        end = begin + len(req)
        comment = match["comment"].strip()
        entries.append(
            Entry(
                number,
                begin,
                end,
                req,
                comment=comment,
                comment_span=(line_pos + len(body) - len(comment), line_pos + len(body)) if comment else None,
                add=line_sibling(text, begin, end, prefix=prefix),
                remove=line_removal(text, begin, end) if prefix is None else None,
            )
        )
    # setuptools reads a value line to its end ('pkg  # why' is not a requirement): comments
    # go on lines of their own
    return attach_comments(text, entries, inline=False, prefixes="#;")


def migrate_setup_cfg(text: str, project: Project | None = None) -> tuple[str, list[ManualItem]]:
    edits, items = plan_dependencies(setup_cfg_entries(text), project)
    return apply_edits(text, edits), items


# -- pyproject.toml ---------------------------------------------------------------------------------

_TOML_HEADER = re.compile(r"\s*\[\[?(?P<name>[^\]]+)\]\]?\s*(#.*)?$")
_TOML_KEY = re.compile(r"\s*(?P<key>[\w\-.\"' ]+?)\s*=\s*(?P<value>.*)$")
_ANY_KEY_TABLES = {"project.optional-dependencies", "dependency-groups", "tool.pdm.dev-dependencies"}
_ARRAY_KEYS = {"dependencies", "extra-dependencies", "dev-dependencies"}
_POETRY_TABLE = re.compile(r"tool\.poetry\.(?:group\.[^.]+\.)?(?:dev-)?dependencies")
_POETRY_EXTRAS = re.compile(r"extras\s*=\s*\[(?P<extras>[^\]]*)\]")
_POETRY_VERSION = re.compile(r"""(?:^|\{|,)\s*version\s*=\s*(?P<q>["'])(?P<spec>[^"']*)(?P=q)""")


def _norm(key: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in key.split("."))


def _is_dependency_array(table: str, key: str) -> bool:
    if table == "project" and key == "optional-dependencies":
        return False
    if table in _ANY_KEY_TABLES:
        return True
    return key in _ARRAY_KEYS and not _POETRY_TABLE.fullmatch(table)


def pyproject_entries(text: str) -> list[Entry]:
    entries: list[Entry] = []
    table, pos = "", 0
    while pos < len(text):
        eol = text.find("\n", pos)
        eol = len(text) if eol == -1 else eol
        line = text[pos:eol]
        header = _TOML_HEADER.match(line)
        key = None if header else _TOML_KEY.match(line)
        if header is not None:
            table = _norm(header["name"])
        elif key is not None:
            name, value_at = _norm(key["key"]), pos + key.start("value")
            if text.startswith("[", value_at) and _is_dependency_array(table, name):
                end = _scan_array(text, value_at, entries)
                after = text.find("\n", end)
                eol = max(eol, len(text) if after == -1 else after)
            elif _POETRY_TABLE.fullmatch(table) and name.lower() != "python":
                _poetry_entry(text, pos, eol, key, name, entries)
        pos = eol + 1
    return attach_comments(text, entries)


def migrate_pyproject(text: str, project: Project | None = None) -> tuple[str, list[ManualItem]]:
    edits, items = plan_dependencies(pyproject_entries(text), project)
    return apply_edits(text, edits), items


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _scan_array(text: str, start: int, entries: list[Entry]) -> int:
    """Walk the TOML array at ``text[start] == '['``, adding its strings; return its end."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch == "#":
            i = text.find("\n", i)
            i = len(text) if i == -1 else i
            continue
        if ch in "\"'":
            close = text.find(ch, i + 1)
            while ch == '"' and close != -1 and text[close - 1] == "\\":
                close = text.find(ch, close + 1)
            if close == -1:
                return len(text)
            entries.append(_array_entry(text, i + 1, close, ch))
            i = close + 1
            continue
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def _array_entry(text: str, start: int, end: int, quote: str) -> Entry:
    alone = alone_on_line(text, start, end, quote)
    comment, span = trailing_comment(text, end + 1) if alone else ("", None)
    return Entry(
        _line_of(text, start),
        start,
        end,
        text[start:end],
        comment=comment,
        comment_span=span,
        add=line_sibling(text, start, end, quote=quote, comma=True) if alone else inline_sibling(end, quote),
        remove=line_removal(text, start, end) if alone else None,
    )


def _poetry_entry(
    text: str, pos: int, eol: int, key: re.Match[str], name: str, entries: list[Entry]
) -> None:
    value = key["value"].rstrip("\r")
    comment = re.search(r"\s+(#[^\"']*)$", value)
    body = value[: comment.start()] if comment else value
    comment_text = comment.group(1) if comment else ""
    comment_span = (pos + key.start("value") + comment.start(1), pos + key.start("value") + len(value)) if comment else None
    line = _line_of(text, pos)
    if name.lower() == "petastorm" or name.lower() == "petastream":
        start = pos + key.start("key")
        entries.append(
            Entry(
                line,
                start,
                pos + key.start("value") + len(body),
                text[start : pos + key.start("value") + len(body)],
                syntax="poetry",
                name=name,
                comment=comment_text,
                comment_span=comment_span,
                add=line_sibling(text, start, pos + key.start("value") + len(body)),
                remove=line_removal(text, start, start),
                new_petastorm=_poetry_petastream,
            )
        )
        return
    # a pin: the constraint string, bare ("^1.2") or in a table ({ version = "^1.2" })
    value_at = pos + key.start("value")
    quoted = re.match(r"""(?P<q>["'])(?P<spec>[^"']*)(?P=q)""", body)
    version = quoted or _POETRY_VERSION.search(body)
    if version is None:
        return
    start = value_at + version.start("spec")
    entries.append(
        Entry(
            line,
            start,
            start + len(version["spec"]),
            version["spec"],
            syntax="poetry",
            name=name,
            comment=comment_text,
            comment_span=comment_span,
        )
    )


def _poetry_petastream(entry: Entry) -> str | None:
    extras = _POETRY_EXTRAS.search(entry.text)
    requirement = new_requirement(f"[{extras['extras']}]" if extras else None)
    names = requirement[len("petastream[") : -1].split(",")
    quoted = ", ".join(f'"{n}"' for n in names)
    return f'petastream = {{ version = "*", extras = [{quoted}] }}'
