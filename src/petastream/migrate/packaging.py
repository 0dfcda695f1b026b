"""The Petastorm dependency in setup.cfg and pyproject.toml, edited as text.

Both formats are edited line by line (no TOML/INI round trip) so every other byte of the file
stays as it was. Covered: setup.cfg ``[options] install_requires / setup_requires /
tests_require`` and ``[options.extras_require]``; pyproject.toml PEP 621 ``dependencies`` and
``[project.optional-dependencies]``, PEP 735 ``[dependency-groups]``, ``dependencies``-style
arrays of tool tables (hatch, pdm, uv), and Poetry's ``[tool.poetry.*dependencies]`` tables.
"""

from __future__ import annotations

import re

from .report import ManualItem
from .requirements import (
    URL_SUGGESTION,
    Manual,
    mentions_petastream,
    new_requirement,
    rewrite_requirement,
    rewrite_requirement_line,
)

__all__ = ["migrate_setup_cfg", "migrate_pyproject"]

# -- setup.cfg ------------------------------------------------------------------------------------

_CFG_SECTION = re.compile(r"\s*\[(?P<name>[^\]]+)\]\s*$")
_CFG_KEY = re.compile(r"(?P<key>[^\s#;=:][^=:]*?)\s*[=:]\s*(?P<value>.*)$")
_CFG_DEP_KEYS = {"install_requires", "setup_requires", "tests_require"}


def migrate_setup_cfg(text: str) -> tuple[str, list[ManualItem]]:
    lines = text.splitlines(keepends=True)
    items: list[ManualItem] = []
    has_petastream = mentions_petastream(text)
    section, in_deps = "", False
    for i, line in enumerate(lines):
        body = line.rstrip("\r\n")
        if (header := _CFG_SECTION.match(body)) is not None:
            section, in_deps = header["name"].strip().lower(), False
            continue
        if not body.strip() or body.lstrip()[0] in "#;":
            continue
        if (key := _CFG_KEY.match(body)) is not None and not body[0].isspace():
            name = key["key"].strip().lower().replace("-", "_")
            in_deps = section == "options.extras_require" or (
                section == "options" and name in _CFG_DEP_KEYS
            )
            start, value = key.start("value"), key["value"]
        elif in_deps:
            start, value = 0, body
        else:
            continue
        if not in_deps or not value.strip():
            continue
        result = rewrite_requirement_line(value, has_petastream=has_petastream)
        if isinstance(result, Manual):
            items.append(result.item(i + 1))
        elif result is not None:
            lines[i] = body[:start] + result + line[len(body) :]
    return "".join(lines), items


# -- pyproject.toml ---------------------------------------------------------------------------------

_TOML_HEADER = re.compile(r"\s*\[\[?(?P<name>[^\]]+)\]\]?\s*(#.*)?$")
_TOML_KEY = re.compile(r"\s*(?P<key>[\w\-.\"' ]+?)\s*=\s*(?P<value>.*)$")
_ANY_KEY_TABLES = {"project.optional-dependencies", "dependency-groups", "tool.pdm.dev-dependencies"}
_ARRAY_KEYS = {"dependencies", "extra-dependencies", "dev-dependencies"}
_POETRY_TABLE = re.compile(r"tool\.poetry\.(?:group\.[^.]+\.)?(?:dev-)?dependencies")
_PETASTREAM_DEP = re.compile(r"(?im)([\"']petastream(?![\w\-.])|^\s*petastream\s*=)")
_POETRY_EXTRAS = re.compile(r"extras\s*=\s*\[(?P<extras>[^\]]*)\]")


def _norm(key: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in key.split("."))


def _is_dependency_array(table: str, key: str) -> bool:
    if table == "project" and key == "optional-dependencies":
        return False
    if table in _ANY_KEY_TABLES:
        return True
    return key in _ARRAY_KEYS and not _POETRY_TABLE.fullmatch(table)


def migrate_pyproject(text: str) -> tuple[str, list[ManualItem]]:
    has_petastream = bool(_PETASTREAM_DEP.search(text))
    edits: list[tuple[int, int, str]] = []
    items: list[ManualItem] = []
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
                end = _scan_array(text, value_at, has_petastream, edits, items)
                after = text.find("\n", end)
                eol = max(eol, len(text) if after == -1 else after)
            elif _POETRY_TABLE.fullmatch(table) and name.lower() == "petastorm":
                _poetry_line(text, pos, eol, key, has_petastream, edits, items)
        pos = eol + 1
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text, items


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _scan_array(
    text: str,
    start: int,
    has_petastream: bool,
    edits: list[tuple[int, int, str]],
    items: list[ManualItem],
) -> int:
    """Walk the TOML array at ``text[start] == '['``; rewrite its Petastorm strings; return its end."""
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
            _toml_string(text, i + 1, close, has_petastream, edits, items)
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


def _toml_string(
    text: str,
    start: int,
    end: int,
    has_petastream: bool,
    edits: list[tuple[int, int, str]],
    items: list[ManualItem],
) -> None:
    content = text[start:end]
    if "petastorm" not in content.lower():
        return
    new = rewrite_requirement(content)
    line = _line_of(text, start)
    if new is None:
        if re.search(r"(?i)petastorm\s*@", content):
            items.append(Manual(f"Petastorm installed from a URL: {content}", URL_SUGGESTION).item(line))
        return
    if has_petastream:
        items.append(
            Manual(f"{content} is listed next to petastream", "remove the Petastorm requirement").item(
                line
            )
        )
        return
    edits.append((start, end, new))


def _poetry_line(
    text: str,
    pos: int,
    eol: int,
    key: re.Match[str],
    has_petastream: bool,
    edits: list[tuple[int, int, str]],
    items: list[ManualItem],
) -> None:
    value = key["value"].rstrip("\r")
    if text[eol - 1 : eol] == "\r":
        eol -= 1
    line = _line_of(text, pos)
    if has_petastream:
        items.append(
            Manual("petastorm is listed next to petastream", "remove the Petastorm dependency").item(line)
        )
        return
    if "git" in value or "url" in value or "path" in value:
        items.append(Manual(f"Petastorm installed from a URL or path: {value}", URL_SUGGESTION).item(line))
        return
    extras = _POETRY_EXTRAS.search(value)
    requirement = new_requirement(f"[{extras['extras']}]" if extras else None)
    names = requirement[len("petastream[") : -1].split(",")
    comment = re.search(r"\s+#[^\"']*$", value)
    quoted = ", ".join(f'"{n}"' for n in names)
    new = f'petastream = {{ version = "*", extras = [{quoted}] }}'
    start = pos + key.start("key")
    edits.append((start, eol, new + (comment.group(0) if comment else "")))
