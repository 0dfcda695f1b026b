"""The ``petastorm`` dependency -> ``petastream[spark]``: requirement strings, requirements
files and ``pip install`` command lines.

A requirement on Petastorm (any version, extras, environment marker) becomes one on
``petastream[spark]``: the version is dropped (Petastorm's versions mean nothing for
petastream), the marker and any comment are kept, and Petastorm's framework extras carry over
(``petastorm[torch]`` -> ``petastream[spark,torch]``, ``tf``/``tf_gpu`` -> ``tf``). Lines
that pin other packages for Petastorm's sake (``pyarrow<15``) are left alone. What cannot be
rewritten safely (a URL or VCS requirement, hash-pinned lines) is reported instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .report import ManualItem

__all__ = [
    "NEW_REQUIREMENT",
    "Manual",
    "rewrite_requirement",
    "rewrite_requirement_line",
    "migrate_requirements_txt",
    "rewrite_pip_command",
    "mentions_petastream",
    "new_requirement",
]

NEW_REQUIREMENT = "petastream[spark]"
_EXTRAS = {"torch": "torch", "tf": "tf", "tf_gpu": "tf"}

# name, optional extras, version spec, optional marker -- as a whole requirement string
_REQUIREMENT = re.compile(
    r"""(?ix)
    (?P<name>petastorm)(?![\w.\-])
    (?P<extras>\s*\[[^\]]*\])?
    (?P<spec>[^;]*?)
    (?P<tail>\s*(?:;.*)?)
    """
)
_SPEC = re.compile(r"\s*((===?|~=|!=|<=?|>=?)\s*[\w.*+!\-]+\s*,?\s*)*")
_URL_HINT = re.compile(r"(?i)(egg=petastorm\b|petastorm\s*@|/petastorm(\.git)?\b)")
_PETASTREAM = re.compile(r"(?im)^\s*petastream(?![\w.\-])")

URL_SUGGESTION = f"install {NEW_REQUIREMENT} from PyPI instead of Petastorm from a URL"


@dataclass(frozen=True)
class Manual:
    """A Petastorm requirement that is reported rather than rewritten."""

    message: str
    suggestion: str

    def item(self, line: int) -> ManualItem:
        return ManualItem(line, "unsupported-requirement", self.message, self.suggestion)


def mentions_petastream(text: str) -> bool:
    return bool(_PETASTREAM.search(text))


def new_requirement(extras: str | None) -> str:
    names = ["spark"]
    for raw in re.findall(r"[\w\-]+", extras or ""):
        mapped = _EXTRAS.get(raw.lower().replace("-", "_"))
        if mapped and mapped not in names:
            names.append(mapped)
    return f"petastream[{','.join(names)}]"


def rewrite_requirement(text: str) -> str | None:
    """``text`` (one requirement, no comment) rewritten, or None when it is not Petastorm."""
    match = _REQUIREMENT.fullmatch(text)
    if match is None or not _SPEC.fullmatch(match["spec"]):
        return None
    return new_requirement(match["extras"]) + match["tail"]


# -- requirements*.txt ---------------------------------------------------------------------------

_LINE = re.compile(r"(?P<lead>\s*)(?P<req>[^#]*?)(?P<comment>\s*(?:#.*)?)")


def migrate_requirements_txt(text: str) -> tuple[str, list[ManualItem]]:
    lines = text.splitlines(keepends=True)
    items: list[ManualItem] = []
    has_petastream = mentions_petastream(text)
    for i, line in enumerate(lines):
        body = line.rstrip("\r\n")
        result = rewrite_requirement_line(body, has_petastream=has_petastream)
        if isinstance(result, Manual):
            items.append(result.item(i + 1))
        elif result is not None:
            lines[i] = result + line[len(body) :]
    return "".join(lines), items


def rewrite_requirement_line(line: str, *, has_petastream: bool) -> str | Manual | None:
    """One requirements-file line (comment allowed) rewritten, reported, or None (unrelated)."""
    match = _LINE.fullmatch(line)
    if match is None or not match["req"] or "petastorm" not in match["req"].lower():
        return None
    req = match["req"]
    if req.lstrip().startswith("-") or _URL_HINT.search(req):
        if _URL_HINT.search(req):
            return Manual(f"Petastorm installed from a URL: {req.strip()}", URL_SUGGESTION)
        return None
    if "--hash" in req or req.rstrip().endswith("\\"):
        return Manual(
            f"hash-pinned Petastorm requirement: {req.strip()}",
            f"replace it with {NEW_REQUIREMENT} and regenerate the hashes (pip-compile)",
        )
    new = rewrite_requirement(req)
    if new is None:
        return None
    if has_petastream:
        return Manual(
            f"{req.strip()} is listed next to petastream",
            "remove the Petastorm requirement",
        )
    return match["lead"] + new + match["comment"]


# -- pip command lines (notebook magics, shell cells) --------------------------------------------

_PIP_INSTALL = re.compile(r"(?i)\bpip3?(?:\.exe)?\s+install\b")
_TOKEN = re.compile(r"""(?P<q>['"]?)(?P<req>petastorm(?![\w.\-])[^\s'"]*)(?P=q)(?=\s|$|;|&|\|)""", re.I)


def rewrite_pip_command(line: str) -> str | None:
    """``pip install ... petastorm==x ...`` with ``"petastream[spark]"``, or None if no change.

    Unquoted, the new requirement is double-quoted: square brackets are glob characters in
    shells (zsh refuses an unmatched glob).
    """
    install = _PIP_INSTALL.search(line)
    if install is None:
        return None
    head, tail = line[: install.end()], line[install.end() :]

    def replace(match: re.Match[str]) -> str:
        start = match.start()
        if start > 0 and not tail[start - 1].isspace():
            return match.group(0)
        new = rewrite_requirement(match["req"])
        if new is None:
            return match.group(0)
        quote = match["q"] or '"'
        return f"{quote}{new}{quote}"

    new_tail = _TOKEN.sub(replace, tail)
    return None if new_tail == tail else head + new_tail
